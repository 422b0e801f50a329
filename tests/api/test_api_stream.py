"""The chunk accumulator on recorded vLLM streams: events, results, tool calls, errors and timing."""

from __future__ import annotations

import json

import pytest
from apifakes import stream_bytes
from hypothesis import given, settings
from hypothesis import strategies as st
from test_api_sse import ALL_STREAMS, split_at

from cockpit.api.sse import SseDecoder, SseEvent
from cockpit.api.stream import (
    ChatEvent,
    ChatResult,
    ChunkAccumulator,
    ContentDelta,
    Finished,
    ReasoningDelta,
    RoleStarted,
    StreamError,
    StreamStats,
    ToolCallDelta,
    Usage,
    accumulate,
    aggregate_tps,
    result_from_response,
)


def run(name: str) -> list[ChatEvent]:
    """Whole recorded stream; event i arrives at t = i + 1 (start at 0)."""
    dec = SseDecoder()
    events = dec.feed(stream_bytes(name)) + dec.close()
    return accumulate([(ev, float(i + 1)) for i, ev in enumerate(events)])


def final(events: list[ChatEvent]) -> Finished:
    assert isinstance(events[-1], Finished), events[-1]
    assert not any(isinstance(e, Finished | StreamError) for e in events[:-1])
    return events[-1]


def test_plain_multitoken_counts_tokens_from_usage() -> None:
    events = run("plain_multitoken")
    assert events[0] == RoleStarted("assistant")
    fin = final(events)
    deltas = [e.text for e in events if isinstance(e, ContentDelta)]
    assert len(deltas) == 8
    assert fin.result.content == "".join(deltas)
    assert fin.result.content.startswith("The ocean covers more than seventy percent")
    assert fin.finish_reason == "stop"
    assert fin.result.usage == Usage(14, 26, 40, None)
    # Role chunk at t=1 is not the first token; first content at t=2; [DONE] at t=12.
    stats = fin.stats
    assert stats.ttft_s == 2.0
    assert stats.completion_tokens == 26
    assert stats.decode_tps == pytest.approx(25 / 10)
    assert stats.chunks == 11  # diagnostics only: 11 chunks carried 26 tokens


@pytest.mark.parametrize("name", ["reasoning", "reasoning_content", "reasoning_both"])
def test_reasoning_fields_never_doubled(name: str) -> None:
    events = run(name)
    fin = final(events)
    assert fin.result.reasoning == "The user wants two sentences about the ocean. Keep it short."
    assert [e.text for e in events if isinstance(e, ReasoningDelta)] == [
        "The user wants",
        " two sentences about",
        " the ocean. Keep",
        " it short.",
    ]
    assert fin.result.content == "Waves roll endlessly toward the shore."
    assert fin.result.usage is not None and fin.result.usage.reasoning_tokens == 14
    assert fin.stats.ttft_s == 2.0  # first reasoning delta counts as the first token


def test_error_event_before_done_ends_with_stream_error() -> None:
    events = run("error_before_done")
    err = events[-1]
    assert isinstance(err, StreamError)
    assert not any(isinstance(e, Finished) for e in events)
    assert err.kind == "server_error"
    assert err.status == 400
    assert "longer than the maximum model length" in err.message
    assert err.partial is not None and err.partial.content == "Partial"


def test_comments_and_crlf() -> None:
    fin = final(run("comments_crlf"))
    assert fin.result.content == "Hello, world."
    assert fin.result.usage == Usage(9, 4, 13)


def test_multiline_data() -> None:
    assert final(run("multiline_data")).result.content == "multi-line"


def test_tool_call_split_across_chunks() -> None:
    events = run("tool_call_split")
    fin = final(events)
    deltas = [e for e in events if isinstance(e, ToolCallDelta)]
    assert deltas[0] == ToolCallDelta(0, "chatcmpl-tool-4f2a9c0d1e3b4a5c", "get_weather", "")
    assert [d.arguments_fragment for d in deltas[1:]] == ['{"ci', 'ty": "Par', 'is"}']
    assert all(d.id is None and d.name is None for d in deltas[1:])
    (call,) = fin.result.tool_calls
    assert call.name == "get_weather" and call.id == "chatcmpl-tool-4f2a9c0d1e3b4a5c"
    assert call.arguments() == {"city": "Paris"}
    assert fin.finish_reason == "tool_calls"
    msg = fin.result.to_message()
    assert msg["content"] is None and msg["tool_calls"][0]["function"]["arguments"] == '{"city": "Paris"}'


def test_parallel_tool_calls_by_index() -> None:
    fin = final(run("parallel_tools"))
    calls = fin.result.tool_calls
    assert [(c.index, c.id, c.arguments()["city"]) for c in calls] == [
        (0, "chatcmpl-tool-aaaa1111", "Paris"),
        (1, "chatcmpl-tool-bbbb2222", "Tokyo"),
    ]


def test_truncated_stream_is_protocol_error_with_partial() -> None:
    events = run("truncated")
    err = events[-1]
    assert isinstance(err, StreamError) and err.kind == "protocol_error"
    assert "[DONE]" in err.message
    assert err.partial is not None and err.partial.content == "The ocean is"


def test_unicode_and_length_finish() -> None:
    fin = final(run("unicode"))
    assert fin.result.content == "Océan 🌊 海 — ∞"
    assert fin.finish_reason == "length"


def test_garbage_chunk_is_protocol_error() -> None:
    acc = ChunkAccumulator(t_start=0.0)
    out = list(acc.feed(SseEvent("not json"), 1.0))
    assert isinstance(out[0], StreamError) and out[0].kind == "protocol_error"
    assert acc.done and list(acc.feed(SseEvent("[DONE]"), 2.0)) == []
    acc = ChunkAccumulator(t_start=0.0)
    bad = {"choices": [{"index": 0, "delta": {"tool_calls": [{"function": {"arguments": "x"}}]}}]}
    out = list(acc.feed(SseEvent(json.dumps(bad)), 1.0))
    assert isinstance(out[-1], StreamError) and "index" in out[-1].message


def test_other_choices_ignored_and_missing_keys_tolerated() -> None:
    acc = ChunkAccumulator(t_start=0.0)
    chunks = [
        {"choices": [{"index": 1, "delta": {"content": "other"}}]},
        {"choices": [{"delta": {"content": "a"}}]},
        {},
        {"choices": [{"index": 0}]},
        {"choices": None},
    ]
    for i, c in enumerate(chunks):
        list(acc.feed(SseEvent(json.dumps(c)), float(i)))
    (fin,) = list(acc.feed(SseEvent("[DONE]"), 9.0))
    assert isinstance(fin, Finished) and fin.result.content == "a" and fin.result.usage is None
    assert fin.stats.decode_tps is None


def test_decode_rate_needs_two_tokens() -> None:
    one = StreamStats(0.0, 1.0, 2.0, 1, 1, 0.0, 0.0)
    assert one.decode_tps is None
    assert StreamStats(0.0, 1.0, 3.0, 11, 4, 0.5, 0.5).decode_tps == 5.0


def test_aggregate_tps() -> None:
    a = StreamStats(0.0, 0.5, 4.0, 100, 30, 0.1, 0.1)
    b = StreamStats(0.1, 0.6, 5.0, 150, 40, 0.1, 0.1)
    assert aggregate_tps([a, b]) == 250 / 5.0
    assert aggregate_tps([]) is None


def test_result_from_response() -> None:
    body = {
        "id": "x",
        "model": "m",
        "choices": [
            {
                "index": 0,
                "finish_reason": "tool_calls",
                "message": {
                    "role": "assistant",
                    "content": None,
                    "reasoning_content": "hmm",
                    "tool_calls": [
                        {"id": "t1", "type": "function", "function": {"name": "f", "arguments": "{}"}}
                    ],
                },
            }
        ],
        "usage": {"prompt_tokens": 3, "completion_tokens": 4, "total_tokens": 7},
    }
    res = result_from_response(body)
    assert isinstance(res, ChatResult)
    assert res.content == "" and res.reasoning == "hmm" and res.tool_calls[0].name == "f"
    assert res.usage == Usage(3, 4, 7)


@settings(max_examples=100, deadline=None)
@given(name=st.sampled_from(ALL_STREAMS), cuts=st.lists(st.integers(min_value=0), max_size=30))
def test_split_anywhere_same_result(name: str, cuts: list[int]) -> None:
    raw = stream_bytes(name)

    def fold(pieces: list[bytes]) -> tuple[str, object]:
        dec, acc = SseDecoder(), ChunkAccumulator(t_start=0.0, clock=lambda: 0.0)
        out: list[ChatEvent] = []
        for piece in pieces:
            for ev in dec.feed(piece):
                out += acc.feed(ev, 1.0)
        for ev in dec.close():
            out += acc.feed(ev, 1.0)
        out += acc.end_of_body(1.0)
        last = out[-1]
        text = "".join(e.text for e in out if isinstance(e, ContentDelta | ReasoningDelta))
        res = (
            last.result
            if isinstance(last, Finished)
            else last.partial
            if isinstance(last, StreamError)
            else None
        )
        key = (res.content, res.reasoning, res.tool_calls, res.usage, res.finish_reason) if res else None
        return text, (type(last).__name__, key)

    assert fold(split_at(raw, cuts)) == fold([raw])
