"""Chat requests (serving defaults of the deployment), multi-turn sessions, images and tool files."""

from __future__ import annotations

import base64
import json
import os
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cockpit.api.stream import ChatResult, ToolCall
from cockpit.constants import SERVED_MODEL
from cockpit.files import NotReadable, loads_bounded, read_bounded, write_atomic

EFFORT_LEVELS = {"low": 25, "high": 50, "xhigh": 75, "max": 100}
DEFAULT_EFFORT = "xhigh"
DEFAULT_TEMPERATURE = 1.0
DEFAULT_TOP_P = 0.95
MAX_IMAGES_PER_MESSAGE = 4
MAX_IMAGE_BYTES = 20 * 1024 * 1024
MAX_HISTORY_MESSAGES = 2000
MAX_JSON_FILE_BYTES = 64 * 1024 * 1024   # a saved chat session (its images inline) or a tools file
SESSION_FORMAT = "r37-cockpit.chat"
SESSION_VERSION = 1
_TOOL_NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}$")


class ChatInputError(ValueError):
    """Bad input caught before anything is sent (request settings, image, tool result)."""


def check_temperature(value: float) -> float:
    """``value`` if it is a temperature vLLM takes (0-2), else :class:`ChatInputError`."""
    if not 0.0 <= value <= 2.0:
        raise ChatInputError(f"temperature must be within 0-2, not {value:g}")
    return value


def check_top_p(value: float) -> float:
    """``value`` if it is a top_p vLLM takes ((0, 1]), else :class:`ChatInputError`."""
    if not 0.0 < value <= 1.0:
        raise ChatInputError(f"top_p must be within (0, 1], not {value:g}")
    return value


def parse_number(text: str, what: str) -> float:
    """A number typed by the operator, or :class:`ChatInputError` naming ``what``."""
    try:
        return float(text)
    except ValueError:
        raise ChatInputError(f"{what} needs a number, not {text!r}") from None


class FileInputError(ChatInputError):
    """A file given by the user is unusable: names the file and the reason."""

    def __init__(self, path: str | os.PathLike[str], reason: str):
        self.path = str(path)
        self.reason = reason
        super().__init__(f"{self.path}: {reason}")


# --- requests -------------------------------------------------------------------------------------


@dataclass(slots=True)
class ChatRequest:
    """One ``POST /v1/chat/completions`` body. Defaults are the deployment's serving defaults.

    ``thinking`` goes to ``chat_template_kwargs``; ``reasoning_effort`` (``low``/``high``/``xhigh``/``max``
    or 1–100) is sent only with thinking on, where it matters. ``include_usage`` is always requested.
    """

    messages: list[dict[str, Any]]
    model: str = SERVED_MODEL
    thinking: bool = True
    reasoning_effort: str | int | None = DEFAULT_EFFORT
    temperature: float | None = DEFAULT_TEMPERATURE
    top_p: float | None = DEFAULT_TOP_P
    max_tokens: int | None = None
    tools: list[dict[str, Any]] | None = None
    tool_choice: str | dict[str, Any] | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not self.messages:
            raise ChatInputError("a chat request needs at least one message")
        effort = self.reasoning_effort
        if isinstance(effort, bool) or not (
            effort is None
            or (isinstance(effort, str) and effort in EFFORT_LEVELS)
            or (isinstance(effort, int) and 1 <= effort <= 100)
        ):
            raise ChatInputError(f"reasoning_effort must be low, high, xhigh, max or 1-100, not {effort!r}")
        if self.temperature is not None:
            check_temperature(self.temperature)
        if self.top_p is not None:
            check_top_p(self.top_p)
        if self.max_tokens is not None and (isinstance(self.max_tokens, bool) or self.max_tokens < 1):
            raise ChatInputError(f"max_tokens must be a positive integer, not {self.max_tokens}")
        if isinstance(self.tool_choice, str) and self.tool_choice not in ("auto", "none", "required"):
            raise ChatInputError(
                f"tool_choice must be auto, none, required or a named function, not {self.tool_choice!r}"
            )
        if self.tool_choice not in (None, "none") and not self.tools:
            raise ChatInputError("tool_choice needs tools")
        if self.tools is not None:
            validate_tools(self.tools, source="tools")

    def to_body(self, *, stream: bool) -> dict[str, Any]:
        """The JSON body; ``stream`` adds ``stream_options.include_usage``."""
        body: dict[str, Any] = {"model": self.model, "messages": self.messages, "stream": stream}
        if stream:
            body["stream_options"] = {"include_usage": True}
        body["chat_template_kwargs"] = {"thinking": self.thinking}
        if self.thinking and self.reasoning_effort is not None:
            body["reasoning_effort"] = self.reasoning_effort
        for key in ("temperature", "top_p", "max_tokens", "tools", "tool_choice"):
            value = getattr(self, key)
            if value is not None:
                body[key] = value
        body.update(self.extra)
        return body


def user_message(text: str, images: Sequence[dict[str, Any]] = ()) -> dict[str, Any]:
    """A user message; with images the content becomes a list of parts (text first)."""
    if len(images) > MAX_IMAGES_PER_MESSAGE:
        raise ChatInputError(f"at most {MAX_IMAGES_PER_MESSAGE} images per message, got {len(images)}")
    if not images:
        return {"role": "user", "content": text}
    parts: list[dict[str, Any]] = [{"type": "text", "text": text}] if text else []
    return {"role": "user", "content": [*parts, *images]}


# --- images ---------------------------------------------------------------------------------------


def sniff_image(head: bytes) -> str | None:
    """MIME type from magic bytes (PNG, JPEG, WebP, GIF), else None."""
    if head.startswith(b"\x89PNG\r\n\x1a\n"):
        return "image/png"
    if head.startswith(b"\xff\xd8\xff"):
        return "image/jpeg"
    if head[:4] == b"RIFF" and head[8:12] == b"WEBP":
        return "image/webp"
    if head[:6] in (b"GIF87a", b"GIF89a"):
        return "image/gif"
    return None


def image_part(path: str | os.PathLike[str], *, max_bytes: int = MAX_IMAGE_BYTES) -> dict[str, Any]:
    """An ``image_url`` content part with a base64 data URL; checks readability, type and size first."""
    p = Path(path).expanduser()
    try:
        size = p.stat().st_size
    except FileNotFoundError:
        raise FileInputError(p, "no such file") from None
    except OSError as exc:
        raise FileInputError(p, f"cannot read: {exc.strerror or exc}") from None
    if not p.is_file():
        raise FileInputError(p, "not a regular file")
    if size > max_bytes:
        raise FileInputError(p, f"image is {size / 2**20:.1f} MiB, the limit is {max_bytes / 2**20:.0f} MiB")
    if size == 0:
        raise FileInputError(p, "file is empty")
    try:
        data = p.read_bytes()
    except OSError as exc:
        raise FileInputError(p, f"cannot read: {exc.strerror or exc}") from None
    mime = sniff_image(data[:16])
    if mime is None:
        raise FileInputError(p, "not a PNG, JPEG, WebP or GIF image (by its first bytes)")
    url = f"data:{mime};base64,{base64.b64encode(data).decode('ascii')}"
    return {"type": "image_url", "image_url": {"url": url}}


# --- tools ----------------------------------------------------------------------------------------


def validate_tools(tools: Any, *, source: str) -> list[dict[str, Any]]:
    """Check a list of OpenAI tools; bare function objects are wrapped. Raises ``ChatInputError``."""
    if not isinstance(tools, list) or not tools:
        raise ChatInputError(f"{source}: expected a non-empty JSON list of tools")
    out: list[dict[str, Any]] = []
    names: set[str] = set()
    for i, item in enumerate(tools):
        where = f"{source}: tool #{i + 1}"
        if not isinstance(item, dict):
            raise ChatInputError(f"{where}: expected an object, got {type(item).__name__}")
        if "function" in item:
            if item.get("type", "function") != "function":
                raise ChatInputError(f"{where}: type must be 'function', not {item.get('type')!r}")
            fn = item["function"]
        else:
            fn = item
        if not isinstance(fn, dict):
            raise ChatInputError(f"{where}: 'function' must be an object")
        name = fn.get("name")
        if not isinstance(name, str) or not _TOOL_NAME.match(name):
            raise ChatInputError(f"{where}: 'name' must be 1-64 letters, digits, '_' or '-', not {name!r}")
        where = f"{source}: tool {name!r}"
        if name in names:
            raise ChatInputError(f"{where}: defined twice")
        names.add(name)
        if "description" in fn and not isinstance(fn["description"], str):
            raise ChatInputError(f"{where}: 'description' must be a string")
        params = fn.get("parameters")
        if params is not None:
            if not isinstance(params, dict):
                raise ChatInputError(f"{where}: 'parameters' must be a JSON Schema object")
            if params.get("type", "object") != "object":
                raise ChatInputError(f"{where}: 'parameters.type' must be 'object'")
            props = params.get("properties", {})
            if not isinstance(props, dict):
                raise ChatInputError(f"{where}: 'parameters.properties' must be an object")
            required = params.get("required", [])
            if not isinstance(required, list) or any(r not in props for r in required):
                raise ChatInputError(f"{where}: 'parameters.required' must list names from 'properties'")
        unknown = set(fn) - {"name", "description", "parameters", "strict"}
        if unknown:
            raise ChatInputError(f"{where}: unknown keys {sorted(unknown)}")
        out.append({"type": "function", "function": fn})
    return out


def read_json_file(p: Path) -> Any:
    """A JSON file's content; every way it can fail is a ``FileInputError`` naming the file and reason."""
    try:
        return loads_bounded(read_bounded(p, MAX_JSON_FILE_BYTES).decode("utf-8"))
    except NotReadable as exc:
        raise FileInputError(p, exc.reason) from None
    except FileNotFoundError:
        raise FileInputError(p, "no such file") from None
    except OSError as exc:
        raise FileInputError(p, f"cannot read: {exc.strerror or exc}") from None
    except UnicodeDecodeError:
        raise FileInputError(p, "not UTF-8 text") from None
    except json.JSONDecodeError as exc:
        raise FileInputError(p, f"invalid JSON at line {exc.lineno} column {exc.colno}: {exc.msg}") from None
    except ValueError as exc:  # nested too deeply
        raise FileInputError(p, str(exc)) from None


def load_tools(path: str | os.PathLike[str]) -> list[dict[str, Any]]:
    """Read a JSON file of OpenAI function tools (a list, or ``{"tools": [...]}``), validated."""
    p = Path(path).expanduser()
    raw = read_json_file(p)
    if isinstance(raw, dict) and "tools" in raw:
        raw = raw["tools"]
    try:
        return validate_tools(raw, source=str(p))
    except FileInputError:
        raise
    except ChatInputError as exc:
        raise FileInputError(p, str(exc).removeprefix(f"{p}: ")) from None


def tool_result_message(tool_call_id: str, content: str | dict[str, Any] | list[Any]) -> dict[str, Any]:
    """A ``role: tool`` message answering one tool call (non-string content is JSON-encoded)."""
    text = content if isinstance(content, str) else json.dumps(content, ensure_ascii=False)
    return {"role": "tool", "tool_call_id": tool_call_id, "content": text}


# --- session --------------------------------------------------------------------------------------


@dataclass(slots=True)
class ChatSettings:
    """Per-session request settings (the deployment's serving defaults unless changed)."""

    model: str = SERVED_MODEL
    thinking: bool = True
    reasoning_effort: str | int | None = DEFAULT_EFFORT
    temperature: float | None = DEFAULT_TEMPERATURE
    top_p: float | None = DEFAULT_TOP_P
    max_tokens: int | None = None
    system: str | None = None


class ChatSession:
    """Multi-turn history in OpenAI message form.

    Assistant messages keep thinking text under ``reasoning``, apart from ``content``; it is stored and
    saved but not sent back (:meth:`api_messages`), as the model's template drops old reasoning.
    """

    def __init__(self, settings: ChatSettings | None = None, tools: list[dict[str, Any]] | None = None):
        self.settings = settings or ChatSettings()
        self.tools = validate_tools(tools, source="tools") if tools else None
        self.messages: list[dict[str, Any]] = []
        self._pending_images: list[dict[str, Any]] = []

    # building the history -----------------------------------------------------------------------

    def attach_image(self, path: str | os.PathLike[str]) -> None:
        """Attach an image to the next user message (checked now, at most 4 per message)."""
        if len(self._pending_images) >= MAX_IMAGES_PER_MESSAGE:
            raise ChatInputError(f"at most {MAX_IMAGES_PER_MESSAGE} images per message")
        self._pending_images.append(image_part(path))

    @property
    def pending_images(self) -> int:
        return len(self._pending_images)

    def add_user(self, text: str) -> dict[str, Any]:
        """Append a user message (with the attached images) and return it."""
        if not text.strip() and not self._pending_images:
            raise ChatInputError("empty message")
        msg = user_message(text, self._pending_images)
        self._append(msg)
        self._pending_images = []
        return msg

    def add_result(self, result: ChatResult) -> dict[str, Any]:
        """Append the assistant's answer (content, reasoning, tool calls)."""
        msg = result.to_message()
        self._append(msg)
        return msg

    def pending_tool_calls(self) -> list[ToolCall]:
        """Tool calls of the last assistant message that have no ``role: tool`` answer yet."""
        answered: set[str] = set()
        for msg in reversed(self.messages):
            if msg.get("role") == "tool":
                answered.add(str(msg.get("tool_call_id")))
                continue
            if msg.get("role") == "assistant":
                return [
                    ToolCall(c["id"], c["function"]["name"], c["function"].get("arguments", ""), i)
                    for i, c in enumerate(msg.get("tool_calls") or [])
                    if c["id"] not in answered
                ]
            break
        return []

    def add_tool_result(self, tool_call_id: str, content: str | dict[str, Any] | list[Any]) -> dict[str, Any]:
        """Answer a pending tool call of the last assistant message."""
        pending = {c.id for c in self.pending_tool_calls()}
        if tool_call_id not in pending:
            known = ", ".join(sorted(pending)) or "none"
            raise ChatInputError(f"no pending tool call with id {tool_call_id!r} (pending: {known})")
        msg = tool_result_message(tool_call_id, content)
        self._append(msg)
        return msg

    def clear(self) -> None:
        """Forget the history and attached images (settings and tools stay)."""
        self.messages.clear()
        self._pending_images = []

    def _append(self, msg: dict[str, Any]) -> None:
        if len(self.messages) >= MAX_HISTORY_MESSAGES:
            raise ChatInputError(
                f"the session holds {MAX_HISTORY_MESSAGES} messages: clear it or start a new one"
            )
        self.messages.append(msg)

    # requests -----------------------------------------------------------------------------------

    def api_messages(self) -> list[dict[str, Any]]:
        """The messages to send: system prompt first, assistant ``reasoning`` left out."""
        out: list[dict[str, Any]] = []
        if self.settings.system:
            out.append({"role": "system", "content": self.settings.system})
        for msg in self.messages:
            out.append(
                {k: v for k, v in msg.items() if k != "reasoning"} if msg["role"] == "assistant" else msg
            )
        return out

    def request(self, **overrides: Any) -> ChatRequest:
        """A :class:`ChatRequest` for the history so far; keyword arguments override settings."""
        s = self.settings
        fields: dict[str, Any] = {
            "model": s.model,
            "thinking": s.thinking,
            "reasoning_effort": s.reasoning_effort,
            "temperature": s.temperature,
            "top_p": s.top_p,
            "max_tokens": s.max_tokens,
            "tools": self.tools,
        }
        fields.update(overrides)
        return ChatRequest(messages=self.api_messages(), **fields)

    def last_answer(self) -> str | None:
        """Content of the last assistant message, or None."""
        for msg in reversed(self.messages):
            if msg.get("role") == "assistant":
                return msg.get("content") or ""
        return None

    # files --------------------------------------------------------------------------------------

    def to_json(self) -> dict[str, Any]:
        s = self.settings
        return {
            "format": SESSION_FORMAT,
            "version": SESSION_VERSION,
            "settings": {
                "model": s.model,
                "thinking": s.thinking,
                "reasoning_effort": s.reasoning_effort,
                "temperature": s.temperature,
                "top_p": s.top_p,
                "max_tokens": s.max_tokens,
                "system": s.system,
            },
            "tools": self.tools,
            "messages": self.messages,
        }

    def save(self, path: str | os.PathLike[str], *, overwrite: bool = False) -> Path:
        """Write the session as JSON atomically; refuses an existing file unless ``overwrite``.

        The file gets the mode a new file gets (0666 less the umask), as any editor's would.
        """
        p = Path(path).expanduser()
        if p.exists() and not overwrite:
            raise FileInputError(p, "file exists (pass overwrite=True to replace it)")
        if not p.parent.is_dir():
            raise FileInputError(p, f"directory {p.parent} does not exist")
        data = json.dumps(self.to_json(), ensure_ascii=False, indent=1).encode("utf-8")
        try:
            write_atomic(p, data, overwrite=overwrite)
        except FileExistsError:   # it appeared meanwhile: never clobbered
            raise FileInputError(p, "file exists (pass overwrite=True to replace it)") from None
        except OSError as exc:
            raise FileInputError(p, f"cannot write: {exc.strerror or exc}") from None
        return p

    @classmethod
    def load(cls, path: str | os.PathLike[str]) -> ChatSession:
        """Read a file written by :meth:`save`; a bad file raises ``FileInputError`` naming the reason."""
        p = Path(path).expanduser()
        raw = read_json_file(p)
        try:
            return cls._from_json(raw)
        except ChatInputError as exc:
            raise FileInputError(p, str(exc)) from None

    @classmethod
    def _from_json(cls, raw: Any) -> ChatSession:
        if not isinstance(raw, dict) or raw.get("format") != SESSION_FORMAT:
            raise ChatInputError(f'not a chat session file (expected "format": "{SESSION_FORMAT}")')
        if raw.get("version") != SESSION_VERSION:
            raise ChatInputError(
                f"unsupported session version {raw.get('version')!r} (this build reads {SESSION_VERSION})"
            )
        settings_raw = raw.get("settings", {})
        if not isinstance(settings_raw, dict):
            raise ChatInputError("'settings' must be an object")
        allowed = set(ChatSettings.__dataclass_fields__)
        unknown = set(settings_raw) - allowed
        if unknown:
            raise ChatInputError(f"unknown settings {sorted(unknown)}")
        settings = ChatSettings(**settings_raw)
        # Reuse the request validation for the settings values.
        ChatRequest(
            messages=[{"role": "user", "content": ""}],
            model=settings.model,
            thinking=settings.thinking,
            reasoning_effort=settings.reasoning_effort,
            temperature=settings.temperature,
            top_p=settings.top_p,
            max_tokens=settings.max_tokens,
        )
        session = cls(settings, raw.get("tools") or None)
        messages = raw.get("messages", [])
        if not isinstance(messages, list):
            raise ChatInputError("'messages' must be a list")
        for i, msg in enumerate(messages):
            _check_message(msg, i)
        if len(messages) > MAX_HISTORY_MESSAGES:
            raise ChatInputError(f"{len(messages)} messages, more than the limit of {MAX_HISTORY_MESSAGES}")
        session.messages = list(messages)
        return session


def _check_message(msg: Any, i: int) -> None:
    where = f"message #{i + 1}"
    if not isinstance(msg, dict):
        raise ChatInputError(f"{where}: expected an object")
    role = msg.get("role")
    if role not in ("user", "assistant", "tool", "system"):
        raise ChatInputError(f"{where}: unknown role {role!r}")
    content = msg.get("content")
    if role == "tool" and not isinstance(msg.get("tool_call_id"), str):
        raise ChatInputError(f"{where}: a tool message needs a 'tool_call_id'")
    if not (content is None or isinstance(content, str | list)):
        raise ChatInputError(f"{where}: 'content' must be a string or a list of parts")
    if role == "assistant":
        for call in msg.get("tool_calls") or []:
            fn = call.get("function") if isinstance(call, dict) else None
            if (
                not isinstance(fn, dict)
                or not isinstance(call.get("id"), str)
                or not isinstance(fn.get("name"), str)
            ):
                raise ChatInputError(f"{where}: malformed tool call")
