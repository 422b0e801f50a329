"""OpenAI chat-completion chunks (as vLLM streams them) to typed events, results and timing.

:class:`ChunkAccumulator` takes decoded SSE events with the client-side time they arrived and yields
:data:`ChatEvent` values. Every chunk key is optional (vLLM leaves unset fields out). Thinking text is
read from ``delta.reasoning`` with ``delta.reasoning_content`` as fallback, never both. Tool calls are
accumulated by ``index``; a server that repeats a call's ``id`` and ``function.name`` in every delta
(vLLM and OpenAI send them in the first only) gives one call whose name is said once, and the deprecated
``delta.function_call`` is read only from a server that sends no ``tool_calls``. Token counts come from
``usage``, never from chunk counts: with K3 speculation one chunk carries several tokens. A server that
sends no usage chunk (some ignore ``stream_options.include_usage``) leaves ``completion_tokens`` unknown;
``StreamStats.estimated_tokens`` then counts the deltas that carried text (one token each, so an
undercount under speculation), and whatever shows it says *estimated*.

Exactly one terminal event ends every stream: :class:`Finished` or :class:`StreamError`.

:class:`StreamDeadlines` says how long an answer may go without a token (a content, reasoning or
tool-call delta): SSE comments, keep-alives, role-only and empty chunks are not progress.

Nothing the server sends can make the accumulator keep without bound or raise: an answer whose text
(content, thinking and tool calls together) passes :data:`MAX_ANSWER_CHARS` ends in a ``too_large``
error, and a chunk that is malformed in any way (bad JSON, nested too deeply, ``usage`` of the wrong
types) in a ``protocol_error``; both keep what arrived before as the partial answer.
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Literal

from cockpit.api.sse import DONE, SseEvent

_loads = json.JSONDecoder().decode  # json.loads without its per-call argument checks

ErrorKind = Literal[
    "unreachable", "not_ready", "engine_dead", "http_error", "protocol_error", "timeout", "server_error",
    "first_token_timeout", "idle_timeout", "too_large", "unauthorized",
]
MAX_ANSWER_CHARS = 8 * 1024 * 1024
"""The most text one answer may keep (content, thinking and tool-call arguments together, characters)."""
DEADLINE_KINDS: frozenset[str] = frozenset({"first_token_timeout", "idle_timeout"})
"""The kinds of a stream given up on by a :class:`StreamDeadlines` (the engine may be hung)."""


@dataclass(frozen=True, slots=True)
class StreamDeadlines:
    """How long the client waits for tokens of a streamed answer before it gives up.

    ``first_token_s``: from the request being written to the first content, reasoning or tool-call
    delta (a long prompt's prefill counts). ``idle_s``: between two such deltas mid-answer. Nothing else
    the server sends (SSE comments, keep-alives, role-only or empty chunks, usage) resets either. A
    non-streamed answer comes whole, so all of it must arrive within ``first_token_s``.
    """

    first_token_s: float
    idle_s: float

    def __post_init__(self) -> None:
        if not (self.first_token_s > 0 and self.idle_s > 0):
            raise ValueError(f"stream deadlines must be positive seconds, not {self}")

    @classmethod
    def both(cls, seconds: float) -> StreamDeadlines:
        """The same number of seconds for both deadlines (``--timeout S``)."""
        return cls(seconds, seconds)

    @classmethod
    def from_seconds(cls, first_token_s: float, idle_s: float) -> StreamDeadlines:
        """From ``[engine] first_token_timeout_s`` and ``idle_timeout_s``, where 0 means no deadline."""
        return cls(first_token_s or math.inf, idle_s or math.inf)

    @property
    def longest(self) -> float:
        """The longer deadline of the two that are set (0.0 if neither is)."""
        return max((s for s in (self.first_token_s, self.idle_s) if s != math.inf), default=0.0)


@dataclass(frozen=True, slots=True)
class ToolCall:
    """One complete tool call; ``arguments_json`` is the raw string the model produced."""

    id: str
    name: str
    arguments_json: str
    index: int = 0

    def arguments(self) -> dict[str, Any]:
        """Parsed arguments; raises ``ValueError`` if the model produced invalid (or too deep) JSON."""
        try:
            value = json.loads(self.arguments_json or "{}")
        except RecursionError:
            raise ValueError(f"tool call {self.name!r}: arguments nested too deeply") from None
        if not isinstance(value, dict):
            raise ValueError(f"tool call {self.name!r}: arguments are not a JSON object")
        return value

    def to_message(self) -> dict[str, Any]:
        """The OpenAI ``tool_calls`` entry for an assistant message in the history."""
        return {
            "id": self.id,
            "type": "function",
            "function": {"name": self.name, "arguments": self.arguments_json},
        }


@dataclass(frozen=True, slots=True)
class Usage:
    """Token counts reported by the server (``usage``)."""

    prompt_tokens: int
    completion_tokens: int
    total_tokens: int
    reasoning_tokens: int | None = None


@dataclass(frozen=True, slots=True)
class StreamStats:
    """Client-side timing of one request (``time.perf_counter`` seconds).

    ``ttft_s`` is the time to the first content-or-reasoning delta (the role chunk does not count);
    a tool-call delta counts as a first token too (it is generated text). ``decode_tps`` is
    ``(completion_tokens - 1) / (t_end - t_first_token)`` with tokens from ``usage``. Chunk count
    and gaps between chunks are diagnostics only (one chunk holds several tokens under speculation).
    """

    t_start: float
    t_first_token: float | None
    t_end: float
    completion_tokens: int | None
    chunks: int
    max_gap_s: float
    mean_gap_s: float
    estimated_tokens: int | None = None
    """Without usage from the server: the deltas that carried text, one token each (an estimate)."""

    @property
    def tokens_estimated(self) -> bool:
        """True if the only token count is the estimate (the server sent no usage)."""
        return self.completion_tokens is None and self.estimated_tokens is not None

    @property
    def estimated_decode_tps(self) -> float | None:
        """:attr:`decode_tps` from :attr:`estimated_tokens`, when the server sent no usage."""
        if not self.tokens_estimated:
            return None
        return replace(self, completion_tokens=self.estimated_tokens).decode_tps

    @property
    def ttft_s(self) -> float | None:
        return None if self.t_first_token is None else self.t_first_token - self.t_start

    @property
    def total_s(self) -> float:
        return self.t_end - self.t_start

    @property
    def decode_s(self) -> float | None:
        return None if self.t_first_token is None else self.t_end - self.t_first_token

    @property
    def decode_tps(self) -> float | None:
        span = self.decode_s
        if not self.completion_tokens or self.completion_tokens < 2 or not span or span <= 0:
            return None
        return (self.completion_tokens - 1) / span


def stats_parts(stats: StreamStats | None, finish: str | None = None, *, completion_tokens: int | None = None,
                streaming: bool = False, waited: int | None = None, estimates: bool = True) -> list[str]:
    """One answer's figures as words, for the CLI `chat` and the Chat pane alike:
    `TTFT 0.31 s · 50.5 tok/s · 128 tokens · finish stop`. Unknown values are left out; ``streaming``
    says what is still awaited (``waited``: whole seconds without a first token); ``estimates``: without
    usage, tok/s and tokens estimated from the chunks, marked `~`. ``completion_tokens`` overrides the
    stats' own (the CLI passes the final usage)."""
    parts: list[str] = []
    if stats is not None and stats.ttft_s is not None:
        parts.append(f"TTFT {stats.ttft_s:.2f} s")
    elif streaming:
        parts.append("waiting for the first token" + (f" · {waited} s" if waited is not None else ""))
    tps = stats.decode_tps if stats is not None else None
    if tps is not None:
        parts.append(f"{tps:.1f} tok/s")
    elif estimates and stats is not None and stats.estimated_decode_tps is not None:
        parts.append(f"~{stats.estimated_decode_tps:.1f} tok/s")
    elif streaming:
        parts.append("tok/s when usage arrives")
    tokens = completion_tokens if completion_tokens is not None else (
        stats.completion_tokens if stats is not None else None)
    if tokens is not None:
        parts.append(f"{tokens} tokens")
    elif estimates and stats is not None and stats.tokens_estimated:
        parts.append(f"~{stats.estimated_tokens} tokens (estimated: the server sent no usage)")
    if finish:
        parts.append(f"finish {finish}")
    elif streaming:
        parts.append("streaming…")
    return parts


def aggregate_tps(stats: Iterable[StreamStats]) -> float | None:
    """Aggregate throughput of streams run together: sum of completion tokens / batch wall time."""
    items = list(stats)
    if not items or any(s.completion_tokens is None for s in items):
        return None
    wall = max(s.t_end for s in items) - min(s.t_start for s in items)
    total = sum(s.completion_tokens or 0 for s in items)
    return total / wall if wall > 0 else None


@dataclass(frozen=True, slots=True)
class ChatResult:
    """A finished answer, streamed or not."""

    content: str
    reasoning: str
    tool_calls: tuple[ToolCall, ...]
    finish_reason: str | None
    usage: Usage | None
    stats: StreamStats | None = None
    model: str | None = None
    id: str | None = None

    def to_message(self) -> dict[str, Any]:
        """The assistant message for the history (reasoning kept apart under ``reasoning``)."""
        msg: dict[str, Any] = {"role": "assistant", "content": self.content or None}
        if self.reasoning:
            msg["reasoning"] = self.reasoning
        if self.tool_calls:
            msg["tool_calls"] = [t.to_message() for t in self.tool_calls]
        return msg


# --- events ---------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class RoleStarted:
    role: str = "assistant"


@dataclass(frozen=True, slots=True)
class ReasoningDelta:
    text: str


@dataclass(frozen=True, slots=True)
class ContentDelta:
    text: str


@dataclass(frozen=True, slots=True)
class ToolCallDelta:
    """A piece of tool call ``index``; ``id`` and ``name`` only on its first delta (a name a server
    repeats in later deltas is not passed on)."""

    index: int
    id: str | None
    name: str | None
    arguments_fragment: str


@dataclass(frozen=True, slots=True)
class Finished:
    """Terminal event of a successful stream."""

    finish_reason: str | None
    result: ChatResult
    stats: StreamStats


@dataclass(frozen=True, slots=True)
class StreamError:
    """Terminal event of a failed stream: server error event, HTTP failure, protocol or network error.

    ``partial`` holds what arrived before the failure (may be empty).
    """

    message: str
    kind: ErrorKind = "server_error"
    remedy: str = ""
    status: int | None = None
    partial: ChatResult | None = None


ChatEvent = RoleStarted | ReasoningDelta | ContentDelta | ToolCallDelta | Usage | Finished | StreamError


# --- accumulation ---------------------------------------------------------------------------------


@dataclass(slots=True)
class _ToolAcc:
    index: int
    id: str = ""
    name: str = ""
    arguments: list[str] = field(default_factory=list)


class StreamProtocolError(ValueError):
    """A chunk that is not what an OpenAI-compatible server sends."""


class _TooLarge(Exception):
    """The answer passed :data:`MAX_ANSWER_CHARS` (what fits was kept)."""


REMEDY_PROTOCOL = "The server does not speak vLLM's OpenAI API as expected: check the --api-url."
REMEDY_TOO_LARGE = (
    "The answer was cut at the cockpit's cap (the part that fits is kept): ask for less (--max-tokens), "
    "or check that --api-url is vLLM's OpenAI server."
)


MESSAGE_ABORTED = "the server aborted the answer (finish_reason abort): it was cut, not finished"
REMEDY_ABORTED = (
    "The engine gave the request up, most often because it is shutting down (a stop or a restart of "
    "rank 0); check rank 0's state and log (`r37-cockpit status`), then ask again once the API is ready."
)


def error_message(payload: Any) -> tuple[str, int | None]:
    """Message and code of an OpenAI/vLLM error body: ``{"error": {...}}`` or ``{"object": "error"}``."""
    if isinstance(payload, dict):
        err = payload.get("error", payload)
        if isinstance(err, dict):
            msg = err.get("message") or err.get("detail") or json.dumps(err)[:500]
            code = err.get("code")
            return str(msg), code if isinstance(code, int) else None
        if isinstance(err, str):
            return err, None
    return str(payload)[:500], None


class ChunkAccumulator:
    """Folds chunk events into typed events and a final :class:`ChatResult` (choice 0 only)."""

    def __init__(self, t_start: float | None = None, clock: Callable[[], float] = time.perf_counter) -> None:
        self._clock = clock
        self.t_start = clock() if t_start is None else t_start
        self._content: list[str] = []
        self._reasoning: list[str] = []
        self._tools: dict[int, _ToolAcc] = {}
        self._finish: str | None = None
        self._usage: Usage | None = None
        self._model: str | None = None
        self._id: str | None = None
        self._role_seen = False
        self._t_first: float | None = None
        self._t_token: float | None = None  # arrival of the last content, reasoning or tool-call delta
        self._t_last_chunk: float | None = None
        self._gaps_sum = 0.0
        self._gaps_max = 0.0
        self.chunks = 0
        self.pieces = 0  # deltas that carried content, thinking or tool-call text (the token estimate)
        self._legacy_fn = False  # tool calls come as the deprecated delta.function_call
        self.done = False
        self.kept = 0  # characters of content, thinking and tool-call arguments kept so far
        self.max_chars = MAX_ANSWER_CHARS

    # public -------------------------------------------------------------------------------------

    def feed(self, event: SseEvent, t: float | None = None) -> list[ChatEvent]:
        """Handle one SSE event received at time ``t``; returns the events it produced."""
        if self.done:
            return []
        t = self._clock() if t is None else t
        data = event.data
        if data == DONE or event.is_done:
            self.done = True
            if self._finish == "abort":  # vLLM's mark of a request it gave up (a shutdown, a cancel)
                return [self._error(MESSAGE_ABORTED, "server_error", t, remedy=REMEDY_ABORTED)]
            return [Finished(self._finish, self.result(t), self.stats(t))]
        try:
            chunk = _loads(data)
        except json.JSONDecodeError as exc:
            self.done = True
            return [self._error(f"chunk is not JSON ({exc.msg}): {data[:120]!r}", "protocol_error", t)]
        except RecursionError:
            self.done = True
            return [self._error(f"chunk nested too deeply to read: {data[:40]!r}…", "protocol_error", t)]
        if not isinstance(chunk, dict):
            self.done = True
            return [self._error(f"chunk is not a JSON object: {data[:120]!r}", "protocol_error", t)]
        if "error" in chunk or chunk.get("object") == "error":
            msg, code = error_message(chunk)
            self.done = True
            return [
                self._error(
                    msg,
                    "server_error",
                    t,
                    status=code,
                    remedy="The engine reported an error mid-stream; see rank 0's container log.",
                )
            ]
        self._note_chunk(t)
        out: list[ChatEvent] = []
        try:
            self._chunk(chunk, t, out)
        except StreamProtocolError as exc:
            self.done = True
            out.append(self._error(str(exc), "protocol_error", t))
        except (TypeError, ValueError, ArithmeticError, RecursionError) as exc:  # a shape no check foresaw
            self.done = True
            out.append(self._error(f"malformed chunk ({type(exc).__name__}: {exc})", "protocol_error", t))
        except _TooLarge as exc:
            self.done = True
            out.append(self._error(str(exc), "too_large", t, remedy=REMEDY_TOO_LARGE))
        return out

    def end_of_body(self, t: float | None = None) -> list[ChatEvent]:
        """The body ended; without ``[DONE]`` (and no error before) that is a protocol error."""
        if self.done:
            return []
        self.done = True
        return [
            self._error(
                "stream ended before data: [DONE] (connection closed mid-answer)",
                "protocol_error",
                self._clock() if t is None else t,
                remedy="The server or tunnel dropped the connection; check rank 0's log.",
            )
        ]

    def fail(
        self,
        message: str,
        kind: ErrorKind,
        remedy: str = "",
        status: int | None = None,
        t: float | None = None,
    ) -> StreamError:
        """Terminal error raised outside the chunks (network, timeout); includes the partial answer."""
        self.done = True
        return self._error(message, kind, self._clock() if t is None else t, remedy=remedy, status=status)

    def result(self, t_end: float | None = None) -> ChatResult:
        t_end = self._clock() if t_end is None else t_end
        tools = tuple(
            ToolCall(a.id, a.name, "".join(a.arguments), a.index)
            for a in sorted(self._tools.values(), key=lambda a: a.index)
        )
        return ChatResult(
            content="".join(self._content),
            reasoning="".join(self._reasoning),
            tool_calls=tools,
            finish_reason=self._finish,
            usage=self._usage,
            stats=self.stats(t_end),
            model=self._model,
            id=self._id,
        )

    def live_stats(self) -> StreamStats:
        """Timing up to the last chunk that arrived (for a live display: decode tok/s is not diluted by
        the wait for the next read)."""
        return self.stats(self._t_last_chunk)

    def stats(self, t_end: float | None = None) -> StreamStats:
        t_end = self._clock() if t_end is None else t_end
        gaps = max(self.chunks - 1, 0)
        return StreamStats(
            t_start=self.t_start,
            t_first_token=self._t_first,
            t_end=t_end,
            completion_tokens=self._usage.completion_tokens if self._usage else None,
            chunks=self.chunks,
            max_gap_s=self._gaps_max,
            mean_gap_s=self._gaps_sum / gaps if gaps else 0.0,
            estimated_tokens=None if self._usage else self.pieces,
        )

    # internals ----------------------------------------------------------------------------------

    def _error(
        self, message: str, kind: ErrorKind, t: float, *, remedy: str = "", status: int | None = None
    ) -> StreamError:
        if not remedy and kind == "protocol_error":
            remedy = REMEDY_PROTOCOL
        return StreamError(message, kind, remedy, status, self.result(t))

    def _note_chunk(self, t: float) -> None:
        if self._t_last_chunk is not None:
            gap = t - self._t_last_chunk
            self._gaps_sum += gap
            self._gaps_max = max(self._gaps_max, gap)
        self._t_last_chunk = t
        self.chunks += 1

    @property
    def first_token_seen(self) -> bool:
        """True once a content, reasoning or tool-call delta arrived."""
        return self._t_first is not None

    @property
    def last_token_at(self) -> float | None:
        """When the last content, reasoning or tool-call delta arrived (None before the first)."""
        return self._t_token

    def _first_token(self, t: float) -> None:
        self._t_token = t
        if self._t_first is None:
            self._t_first = t

    def _chunk(self, chunk: dict[str, Any], t: float, out: list[ChatEvent]) -> None:
        if self._id is None:
            self._id = _opt_str(chunk.get("id"))
        if self._model is None:
            self._model = _opt_str(chunk.get("model"))
        choices = chunk.get("choices") or []
        if not isinstance(choices, list):
            raise StreamProtocolError("'choices' is not a list")
        for choice in choices:
            if not isinstance(choice, dict):
                raise StreamProtocolError("a choice is not an object")
            if choice.get("index", 0) != 0:
                continue
            self._delta(choice.get("delta") or {}, t, out)
            reason = choice.get("finish_reason")
            if reason is not None:
                self._finish = str(reason)
        usage = chunk.get("usage")
        if usage is not None:
            self._usage = _usage(usage)
            out.append(self._usage)

    def _delta(self, delta: Any, t: float, out: list[ChatEvent]) -> None:
        if not isinstance(delta, dict):
            raise StreamProtocolError("'delta' is not an object")
        role = delta.get("role")
        if role and not self._role_seen:
            self._role_seen = True
            out.append(RoleStarted(str(role)))
        texts = self.pieces
        reasoning = delta.get("reasoning") or delta.get("reasoning_content")
        if reasoning:
            self.pieces += 1
            self._t_token = t
            if self._t_first is None:
                self._t_first = t
            text = self._keep(str(reasoning), self._reasoning, out)
            self._reasoning.append(text)
            out.append(ReasoningDelta(text))
        content = delta.get("content")
        if content:
            self.pieces += texts == self.pieces  # a delta with thinking and content: one piece
            self._t_token = t
            if self._t_first is None:
                self._t_first = t
            text = self._keep(str(content), self._content, out)
            self._content.append(text)
            out.append(ContentDelta(text))
        calls = delta.get("tool_calls")
        legacy = delta.get("function_call")
        if not calls and legacy and (self._legacy_fn or not self._tools):  # the deprecated form only
            self._legacy_fn = True
            calls = [{"index": 0, "function": legacy}]
        if calls:
            if not isinstance(calls, list):
                raise StreamProtocolError("'tool_calls' is not a list")
            for call in calls:
                ev = self._tool_delta(call, t)
                if ev.arguments_fragment and texts == self.pieces:
                    self.pieces += 1
                out.append(ev)

    def _keep(self, text: str, into: list[str], out: list[ChatEvent]) -> str:
        """``text`` if it fits under the answer's cap; else what fits is kept (and shown) and the answer
        ends with :class:`_TooLarge`."""
        self.kept += len(text)
        if self.kept <= self.max_chars:
            return text
        fits = text[: max(len(text) - (self.kept - self.max_chars), 0)]
        if fits:
            into.append(fits)
            out.append(ReasoningDelta(fits) if into is self._reasoning else ContentDelta(fits))
        raise _TooLarge(f"answer longer than {self.max_chars} characters (content, thinking and tool "
                        "calls together): the rest was not read")

    def _tool_delta(self, call: Any, t: float) -> ToolCallDelta:
        if not isinstance(call, dict):
            raise StreamProtocolError("a tool call delta is not an object")
        call_id = _opt_str(call.get("id"))
        index = call.get("index")
        if isinstance(index, bool) or not isinstance(index, int):
            raise StreamProtocolError(f"tool call delta without an integer index: {call!r:.120}")
        fn = call.get("function") or {}
        if not isinstance(fn, dict):
            raise StreamProtocolError("tool call 'function' is not an object")
        acc = self._tools.get(index)
        if acc is None:
            acc = self._tools[index] = _ToolAcc(index)
        name = _opt_str(fn.get("name"))
        if name is not None and name == acc.name:  # repeated in every delta: said once
            name = None
        if call_id is not None and call_id == acc.id:
            call_id = None
        args = fn.get("arguments") or ""
        if not isinstance(args, str):  # an object some servers send instead of the JSON string
            args = json.dumps(args, ensure_ascii=False)
        self.kept += len(args) + len(name or "")
        if self.kept > self.max_chars:
            raise _TooLarge(f"answer longer than {self.max_chars} characters (content, thinking and tool "
                            "calls together): the rest was not read")
        if call_id:
            acc.id = call_id
        if name:
            acc.name += name  # a name streamed in pieces is joined
        if args:
            acc.arguments.append(args)
        if args or name or call_id:
            self._first_token(t)
        return ToolCallDelta(index, call_id, name, args)


def _opt_str(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None


def _count(raw: dict[str, Any], key: str) -> int | None:
    """A token count of ``usage``: a non-negative integer or absent; anything else is a protocol error."""
    value = raw.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise StreamProtocolError(f"'usage.{key}' is not a token count: {value!r:.60}")
    return value


def _usage(raw: Any) -> Usage:
    if not isinstance(raw, dict):
        raise StreamProtocolError(f"'usage' is not an object: {raw!r:.60}")
    details = raw.get("completion_tokens_details")
    reasoning = _count(details, "reasoning_tokens") if isinstance(details, dict) else None
    prompt = _count(raw, "prompt_tokens") or 0
    completion = _count(raw, "completion_tokens") or 0
    total = _count(raw, "total_tokens")
    return Usage(prompt_tokens=prompt, completion_tokens=completion,
                 total_tokens=total if total else prompt + completion, reasoning_tokens=reasoning)


def result_from_response(body: Any, stats: StreamStats | None = None) -> ChatResult:
    """A non-streamed ``chat.completion`` body to a :class:`ChatResult` (choice 0)."""
    if not isinstance(body, dict):
        raise StreamProtocolError("response is not a JSON object")
    choices = body.get("choices")
    if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
        raise StreamProtocolError("response has no choices")
    choice = choices[0]
    msg = choice.get("message") or {}
    if not isinstance(msg, dict):
        raise StreamProtocolError("choice 'message' is not an object")
    reasoning = msg.get("reasoning") or msg.get("reasoning_content")
    calls: list[ToolCall] = []
    for i, call in enumerate(msg.get("tool_calls") or []):
        fn = call.get("function") if isinstance(call, dict) else None
        if not isinstance(call, dict) or not isinstance(fn, dict):
            raise StreamProtocolError("a tool call in the response is malformed")
        calls.append(
            ToolCall(str(call.get("id") or ""), str(fn.get("name") or ""), str(fn.get("arguments") or ""), i)
        )
    usage = body.get("usage")
    return ChatResult(
        content=str(msg.get("content") or ""),
        reasoning=str(reasoning or ""),
        tool_calls=tuple(calls),
        finish_reason=_opt_str(choice.get("finish_reason")),
        usage=None if usage is None else _usage(usage),
        stats=stats,
        model=_opt_str(body.get("model")),
        id=_opt_str(body.get("id")),
    )


def accumulate(events: Sequence[tuple[SseEvent, float]], t_start: float = 0.0) -> list[ChatEvent]:
    """Run a whole recorded stream (events with arrival times) through an accumulator; for tests/replay."""
    acc = ChunkAccumulator(t_start=t_start, clock=lambda: t_start)
    out: list[ChatEvent] = []
    t_last = t_start
    for ev, t in events:
        t_last = t
        out.extend(acc.feed(ev, t))
    out.extend(acc.end_of_body(t_last))
    return out
