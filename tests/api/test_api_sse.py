"""The SSE decoder on recorded vLLM bytes and on the spec's corner cases, whole and split anywhere."""

from __future__ import annotations

import itertools
import json

import pytest
from apifakes import STREAMS, stream_bytes
from hypothesis import given, settings
from hypothesis import strategies as st

from cockpit.api.sse import SseDecoder, SseError, SseEvent

ALL_STREAMS = sorted(p.stem for p in STREAMS.glob("*.txt"))


def decode(pieces: list[bytes]) -> list[SseEvent]:
    dec = SseDecoder()
    out: list[SseEvent] = []
    for piece in pieces:
        out += dec.feed(piece)
    return out + dec.close()


def split_at(raw: bytes, cuts: list[int]) -> list[bytes]:
    points = sorted({c % (len(raw) + 1) for c in cuts})
    bounds = [0, *points, len(raw)]
    return [raw[a:b] for a, b in itertools.pairwise(bounds)]


def test_basic_fields_and_dispatch() -> None:
    raw = b"data: one\n\ndata:two\n\nevent: note\nid: 7\ndata: x\ndata:  y\n\n"
    assert decode([raw]) == [
        SseEvent("one"),
        SseEvent("two"),
        SseEvent("x\n y", "note", "7"),
    ]


def test_comments_crlf_cr_and_bom() -> None:
    raw = b"\xef\xbb\xbf: hello\r\ndata: a\r\n\r\n: ping\rdata: b\r\rdata\n\n"
    events = decode([raw])
    assert [e.data for e in events] == ["a", "b", ""]


def test_incomplete_event_at_eof_is_dropped() -> None:
    dec = SseDecoder()
    assert dec.feed(b'data: [DONE]\n\ndata: {"partial"') == [SseEvent("[DONE]")]
    assert dec.close() == []
    assert dec.pending


def test_done_sentinel() -> None:
    assert SseEvent("[DONE]").is_done
    assert not SseEvent('{"x": 1}').is_done


def test_cr_at_piece_end_then_lf_is_one_line_end() -> None:
    assert decode([b"data: a\r", b"\n\r", b"\n"]) == [SseEvent("a")]


def test_bad_utf8_and_oversize_are_errors() -> None:
    with pytest.raises(SseError, match="UTF-8"):
        SseDecoder().feed(b"data: \xff\xfe\n\n")
    with pytest.raises(SseError, match="longer"):
        SseDecoder(max_event_bytes=64).feed(b"data: " + b"x" * 100)
    with pytest.raises(SseError, match="larger"):
        SseDecoder(max_event_bytes=64).feed(b"data: " + b"x" * 40 + b"\ndata: " + b"y" * 40 + b"\n")


@pytest.mark.parametrize("name", ALL_STREAMS)
def test_recorded_streams_decode_to_json_chunks(name: str) -> None:
    events = decode([stream_bytes(name)])
    assert events, name
    for ev in events:
        if not ev.is_done:
            assert isinstance(json.loads(ev.data), dict)
    complete = name != "truncated"
    assert events[-1].is_done is complete


def test_crlf_stream_comments_counted() -> None:
    dec = SseDecoder()
    events = dec.feed(stream_bytes("comments_crlf"))
    assert dec.comments == 3
    assert events[-1].is_done
    assert json.loads(events[0].data)["choices"][0]["delta"]["role"] == "assistant"


@settings(max_examples=150, deadline=None)
@given(name=st.sampled_from(ALL_STREAMS), cuts=st.lists(st.integers(min_value=0), max_size=40))
def test_any_split_gives_the_same_events(name: str, cuts: list[int]) -> None:
    raw = stream_bytes(name)
    assert decode(split_at(raw, cuts)) == decode([raw])


@pytest.mark.parametrize("name", ALL_STREAMS)
def test_byte_by_byte(name: str) -> None:
    raw = stream_bytes(name)
    assert decode([raw[i : i + 1] for i in range(len(raw))]) == decode([raw])


_LINES = st.sampled_from(
    ["data: a", "data:b", "data:  c", "data", "data: [DONE]", ": ping", "event: note", "id: 7", "retry: 5",
     "", "x: y", "data: é🌊", 'data: {"k": 1}']
)


@settings(max_examples=300, deadline=None)
@given(lines=st.lists(_LINES, max_size=25), ends=st.sampled_from(["\n", "\r\n", "\r"]),
       cuts=st.lists(st.integers(min_value=0), max_size=12))
def test_fast_path_matches_the_line_rules(lines: list[str], ends: str, cuts: list[int]) -> None:
    """Whole pieces take the block fast path where they can; single bytes always take the line rules."""
    raw = (ends.join(lines) + ends).encode()
    by_byte = decode([raw[i : i + 1] for i in range(len(raw))])
    assert decode([raw]) == by_byte
    assert decode(split_at(raw, cuts)) == by_byte


def test_event_field_before_a_piece_boundary_names_the_next_event() -> None:
    assert decode([b"event: note\n", b"data: x\n\n"]) == [SseEvent("x", "note")]
