"""What the cockpit reads from an engine's output, as plain values: one reading for the real vLLM and the
simulated engine alike, so contract and differential tests compare the two through the cockpit's own code."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from cockpit.api.chat import ChatRequest
from cockpit.api.client import ApiClient
from cockpit.api.sse import SseDecoder
from cockpit.api.stream import ChatResult, ChunkAccumulator, Finished, StreamDeadlines, StreamError
from cockpit.recipe.phases import Phase
from cockpit.recipe.timeline import RankTimeline

SAMPLES = Path(__file__).parent / "fixtures" / "samples" / "real-vllm-0.32-cpu"


def sample(name: str) -> str:
    return (SAMPLES / name).read_bytes().decode("utf-8", "replace")


@dataclass(frozen=True)
class BootReading:
    phases: tuple[Phase, ...]
    failure: str | None          # the failure label, None when the rank is not failed
    cause: str | None
    context: tuple[str, ...]
    stats: int                   # engine stats lines read


def read_boot(lines: Iterable[str], rank: int = 0, *, stop_at: int | None = None) -> BootReading:
    """Feed a rank's log lines to the cockpit's rank timeline (one second apart); ``stop_at``: the line
    index where the cockpit began stopping it (what it printed from there on is its shutdown)."""
    tl = RankTimeline(rank)
    tl.launched(0.0)
    for i, line in enumerate(lines):
        if stop_at is not None and i == stop_at:
            tl.request_stop(float(i + 1))
        tl.feed_line(line, float(i + 1))
    f = tl.failure
    return BootReading(tuple(s.phase for s in tl.spans), f.label if f else None, f.cause if f else None,
                       f.context if f else (), len(tl.stats))


@dataclass(frozen=True)
class Turn:
    """A streamed answer as the cockpit read it."""

    kinds: tuple[str, ...]          # the event types, in order, runs of one type folded into one
    reasoning: str
    content: str
    tools: tuple[tuple[str, str], ...]   # (name, arguments)
    finish_reason: str | None
    completion_tokens: int | None
    error_kind: str | None
    error_message: str
    error_remedy: str


async def stream_turn(client: ApiClient, request: ChatRequest,
                      deadlines: StreamDeadlines | None = None) -> Turn:
    kinds: list[str] = []
    result: ChatResult | None = None
    error: StreamError | None = None
    async with client.chat_stream(request, deadlines=deadlines) as stream:
        async for event in stream:
            name = type(event).__name__
            if not kinds or kinds[-1] != name:
                kinds.append(name)
            if isinstance(event, Finished):
                result = event.result
            elif isinstance(event, StreamError):
                error, result = event, event.partial
    usage = result.usage if result else None
    return Turn(tuple(kinds), result.reasoning if result else "", result.content if result else "",
                tuple((t.name or "", t.arguments_json) for t in result.tool_calls) if result else (),
                result.finish_reason if result else None, usage.completion_tokens if usage else None,
                error.kind if error else None, error.message if error else "", error.remedy if error else "")


def sample_sections(name: str) -> dict[str, bytes]:
    """A capture file of `### title` sections, each an HTTP response with headers: title → body bytes."""
    out: dict[str, bytes] = {}
    for part in (SAMPLES / name).read_bytes().split(b"### ")[1:]:
        title, _, rest = part.partition(b"\n")
        _, _, body = rest.partition(b"\r\n\r\n") if b"\r\n\r\n" in rest else rest.partition(b"\n\n")
        out[title.decode().strip()] = body
    return out


def sample_response(name: str) -> tuple[int, bytes]:
    """A capture of one HTTP response: (status, body)."""
    raw = (SAMPLES / name).read_bytes()
    head, _, body = raw.partition(b"\r\n\r\n") if b"\r\n\r\n" in raw else raw.partition(b"\n\n")
    return int(head.split(b" ", 2)[1]), body


def turn_from_sse(body: bytes, *, closed: bool = True) -> Turn:
    """Captured SSE bytes read by the cockpit's decoder and chunk accumulator (``closed``: the body ended
    there; else the stream is still open when the bytes stop)."""
    dec, acc = SseDecoder(), ChunkAccumulator(t_start=0.0, clock=lambda: 1.0)
    events = [e for ev in dec.feed(body) for e in acc.feed(ev)]
    if closed:
        events += [e for ev in dec.close() for e in acc.feed(ev)] + acc.end_of_body()
    kinds: list[str] = []
    result: ChatResult | None = None
    error: StreamError | None = None
    for event in events:
        name = type(event).__name__
        if not kinds or kinds[-1] != name:
            kinds.append(name)
        if isinstance(event, Finished):
            result = event.result
        elif isinstance(event, StreamError):
            error, result = event, event.partial
    if result is None and error is None:
        result = acc.result()
    usage = result.usage if result else None
    return Turn(tuple(kinds), result.reasoning if result else "", result.content if result else "",
                tuple((t.name or "", t.arguments_json) for t in result.tool_calls) if result else (),
                result.finish_reason if result else None, usage.completion_tokens if usage else None,
                error.kind if error else None, error.message if error else "", error.remedy if error else "")
