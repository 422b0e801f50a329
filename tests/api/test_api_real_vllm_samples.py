"""The cockpit's API readers on the bytes real vLLM 0.32 (CPU build) sent: SSE with thinking, content,
usage, tool calls and the extra null keys; error bodies; a stream cut by a shutdown. Captures in
tests/fixtures/samples/real-vllm-0.32-cpu (the live server: tests/real_vllm)."""

from __future__ import annotations

import json

import pytest
from vllmread import SAMPLES, sample_response, sample_sections, turn_from_sse

from cockpit.api.errors import from_status
from cockpit.api.sse import SseEvent
from cockpit.api.stream import MESSAGE_ABORTED, ChunkAccumulator, Finished, StreamError

URL = "http://127.0.0.1:8000/v1/chat/completions"


def test_thinking_on_is_reasoning_with_usage() -> None:
    turn = turn_from_sse(sample_response("sse-chat-thinking-on.txt")[1])
    assert turn.error_kind is None and turn.kinds[0] == "RoleStarted" and turn.kinds[-1] == "Finished"
    assert turn.reasoning and not turn.content
    assert turn.completion_tokens and turn.finish_reason == "length"


def test_thinking_off_is_content() -> None:
    turn = turn_from_sse(sample_response("sse-chat-thinking-off.txt")[1])
    assert turn.error_kind is None and turn.content and not turn.reasoning


def test_forced_named_tool_call_is_one_call_named_once() -> None:
    """0.32's first tool-call delta carries id, type, name and the first arguments fragment together."""
    body = sample_sections("sse-tool-calls.txt")["forced named tool call, stream"]
    turn = turn_from_sse(body)
    assert turn.error_kind is None, turn
    assert [name for name, _ in turn.tools] == ["get_weather"]
    args = turn.tools[0][1]
    first = json.loads(body.split(b"data: ")[2].split(b"\n")[0])
    assert args.startswith(first["choices"][0]["delta"]["tool_calls"][0]["function"]["arguments"])


@pytest.mark.parametrize("name", ["sse-during-sigterm.txt", "sse-sigterm-run4-stream1.txt",
                                  "sse-sigterm-run4-stream2.txt"])
def test_a_stream_stalled_by_a_shutdown_is_not_finished(name: str) -> None:
    body = sample_response(name)[1]
    open_turn = turn_from_sse(body, closed=False)      # the server kept the connection: bytes just stop
    assert "Finished" not in open_turn.kinds and open_turn.error_kind is None
    closed = turn_from_sse(body)                       # the connection closed without [DONE]
    assert closed.error_kind == "protocol_error" and "Finished" not in closed.kinds


def test_an_aborted_answer_is_cut_not_finished() -> None:
    """`finish_reason: abort` (vLLM aborted the request in a shutdown), usage and [DONE]: an error with the
    part that arrived, never Finished (so `chat` exits 1)."""
    acc = ChunkAccumulator(t_start=0.0, clock=lambda: 1.0)
    chunks = [
        {"id": "c", "object": "chat.completion.chunk", "model": "m",
         "choices": [{"index": 0, "delta": {"role": "assistant", "content": ""}, "finish_reason": None}]},
        {"id": "c", "object": "chat.completion.chunk", "model": "m",
         "choices": [{"index": 0, "delta": {"content": "half an"}, "finish_reason": None,
                      "token_ids": None}]},
        {"id": "c", "object": "chat.completion.chunk", "model": "m",
         "choices": [{"index": 0, "delta": {"content": ""}, "finish_reason": "abort", "stop_reason": None}]},
        {"id": "c", "object": "chat.completion.chunk", "model": "m", "choices": [],
         "usage": {"prompt_tokens": 5, "total_tokens": 7, "completion_tokens": 2}},
    ]
    events = [e for c in chunks for e in acc.feed(SseEvent(json.dumps(c)))] + acc.feed(SseEvent("[DONE]"))
    assert not any(isinstance(e, Finished) for e in events)
    err = events[-1]
    assert isinstance(err, StreamError) and err.kind == "server_error" and err.message == MESSAGE_ABORTED
    assert err.partial is not None and err.partial.content == "half an"
    assert err.partial.finish_reason == "abort"
    assert "shutting down" in err.remedy


@pytest.mark.parametrize(("title", "says", "never"), [
    ("wrong model, stream:true", "Wrong model name", "max_tokens"),
    ("max_tokens beyond context (2048), stream:true", "--max-model-len", "model name"),
    ("temperature 5, stream:true", "sampling option", "model name"),
    ("malformed JSON", "could not read the request body", "model name"),
    ("messages missing", "could not read the request body", "model name"),
    ("unknown path", "Wrong path", "model name"),
    ("prompt longer than context (non-stream)", "shorter prompt", "model name"),
])
def test_error_bodies_get_the_remedy_of_their_cause(title: str, says: str, never: str) -> None:
    raw = sample_sections("error-bodies.txt")[title]
    status = _status("error-bodies.txt", title)
    err = from_status(status, raw, URL)
    assert says in err.remedy and never not in err.remedy, (title, err.message, err.remedy)
    assert "\n" not in err.message


def _status(name: str, title: str) -> int:
    text = (SAMPLES / name).read_text()
    part = text.split("### " + title, 1)[1]
    return int(part.split("HTTP/1.1 ", 1)[1].split(" ", 1)[0])


def test_auto_tool_choice_400_gets_a_remedy_about_the_server_flags() -> None:
    body = (b'{"error":{"message":"\\"auto\\" tool choice requires --enable-auto-tool-choice and '
            b'--tool-call-parser to be set","type":"BadRequestError","param":null,"code":400}}')
    err = from_status(400, body, URL)
    assert "--enable-auto-tool-choice" in err.remedy and "--tool-call-parser" in err.remedy
    assert "model name" not in err.remedy and "max_tokens" not in err.remedy
