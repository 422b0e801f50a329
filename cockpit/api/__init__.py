"""The engine's OpenAI-compatible API: client, SSE decoding, typed stream events, chat session, smoke.

Its names are imported at first use (`cockpit.lazy`): `cockpit.api.chat` costs nothing of httpx.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from cockpit.lazy import lazy_exports

if TYPE_CHECKING:
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

EXPORTS = {
    "cockpit.api.chat": ("ChatInputError", "ChatRequest", "ChatSession", "ChatSettings", "FileInputError",
                         "image_part", "load_tools", "tool_result_message", "user_message",),
    "cockpit.api.client": ("ApiClient", "ChatStream", "ModelInfo",),
    "cockpit.api.errors": ("ApiError",),
    "cockpit.api.smoke": ("SmokeStep", "run_smoke",),
    "cockpit.api.status": ("ApiStatus",),
    "cockpit.api.stream": ("ChatEvent", "ChatResult", "ContentDelta", "Finished", "ReasoningDelta",
                           "RoleStarted", "StreamError", "StreamStats", "ToolCall", "ToolCallDelta",
                           "Usage", "aggregate_tps",),
}
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
if not TYPE_CHECKING:
    __getattr__, __dir__ = lazy_exports(__name__, EXPORTS)
