"""One chat stats formatter (`cockpit.api.stream.stats_parts`) for the CLI `chat` and the Chat pane: both
faces print the same words for the same answer; only the pane says what it still awaits, and only the CLI
estimates tok/s from chunks when the server sends no usage (marked `~`)."""

from __future__ import annotations

from cockpit.api.stream import ChatResult, StreamStats, Usage, stats_parts
from cockpit.cli.chat_cmd import stats_line
from cockpit.tui.widgets.chat_turns import stats_text


def _stats(tokens: int | None, estimated: int | None = None) -> StreamStats:
    return StreamStats(t_start=0.0, t_first_token=0.25, t_end=2.25, completion_tokens=tokens, chunks=10,
                       max_gap_s=0.1, mean_gap_s=0.05, estimated_tokens=estimated)


def test_the_cli_and_the_pane_say_the_same() -> None:
    stats = _stats(101)
    result = ChatResult(content="x", reasoning="", tool_calls=(), finish_reason="stop",
                        usage=Usage(prompt_tokens=10, completion_tokens=101, total_tokens=111), model="m")
    words = "TTFT 0.25 s · 50.0 tok/s · 101 tokens · finish stop"
    assert " · ".join(stats_parts(stats, "stop")) == words
    assert stats_line(result, stats) == words
    assert stats_text(stats, "stop", streaming=False).plain == words


def test_streaming_and_estimates() -> None:
    waiting = stats_parts(None, streaming=True, waited=3)
    assert waiting == ["waiting for the first token · 3 s", "tok/s when usage arrives", "streaming…"]
    no_usage = _stats(None, estimated=41)
    assert stats_parts(no_usage) == ["TTFT 0.25 s", "~20.0 tok/s",
                                     "~41 tokens (estimated: the server sent no usage)"]
    assert stats_parts(no_usage, estimates=False) == ["TTFT 0.25 s"]
