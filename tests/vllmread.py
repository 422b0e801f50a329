"""What the cockpit reads from an engine's output, as plain values: one reading for the real vLLM and the
simulated engine alike, so contract and differential tests compare the two through the cockpit's own code."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from cockpit.api.chat import ChatRequest
from cockpit.api.client import ApiClient
from cockpit.api.stream import ChatResult, Finished, StreamDeadlines, StreamError
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
                tuple((t.name or "", t.arguments) for t in result.tool_calls) if result else (),
                result.finish_reason if result else None, usage.completion_tokens if usage else None,
                error.kind if error else None, error.message if error else "", error.remedy if error else "")
