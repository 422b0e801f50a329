"""The engine's OpenAI-compatible API: client, SSE decoding, typed stream events, chat session, smoke."""

from cockpit.api.chat import (
    ChatInputError,
    ChatRequest,
    ChatSession,
    ChatSettings,
    FileInputError,
    image_part,
    load_tools,
    tool_result_message,
    user_message,
)
from cockpit.api.client import ApiClient, ChatStream, ModelInfo
from cockpit.api.errors import ApiError
from cockpit.api.smoke import SmokeStep, run_smoke
from cockpit.api.status import ApiStatus
from cockpit.api.stream import (
    ChatEvent,
    ChatResult,
    ContentDelta,
    Finished,
    ReasoningDelta,
    RoleStarted,
    StreamError,
    StreamStats,
    ToolCall,
    ToolCallDelta,
    Usage,
    aggregate_tps,
)

__all__ = [
    "ApiClient",
    "ApiError",
    "ApiStatus",
    "ChatEvent",
    "ChatInputError",
    "ChatRequest",
    "ChatResult",
    "ChatSession",
    "ChatSettings",
    "ChatStream",
    "ContentDelta",
    "FileInputError",
    "Finished",
    "ModelInfo",
    "ReasoningDelta",
    "RoleStarted",
    "SmokeStep",
    "StreamError",
    "StreamStats",
    "ToolCall",
    "ToolCallDelta",
    "Usage",
    "aggregate_tps",
    "image_part",
    "load_tools",
    "run_smoke",
    "tool_result_message",
    "user_message",
]
