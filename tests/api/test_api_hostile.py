"""The client against a server that misbehaves on purpose (tests/api/hostile_server.py, real HTTP).

For each way: the request ends within its deadline or cap with the right error kind, the part of the
answer that arrived is kept, nothing raises, and what the client kept is bounded (asserted on its size).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Iterator

import pytest
from hostile_server import PARTIAL, HostileState, hostile_server

from cockpit.api.chat import ChatRequest
from cockpit.api.client import MAX_EVENT_BYTES, MAX_HEALTH_BODY, MAX_MODELS_BODY, ApiClient
from cockpit.api.errors import ApiError
from cockpit.api.smoke import run_smoke
from cockpit.api.stream import MAX_ANSWER_CHARS, ChatEvent, ContentDelta, StreamDeadlines, StreamError
from cockpit.errorcodes import CODES, code_for_api_kind

REQ = ChatRequest([{"role": "user", "content": "Write two sentences about the ocean."}])
SHORT = StreamDeadlines(first_token_s=1.5, idle_s=1.0)
PATHS = ["raw", "httpx"]
LIMIT = 60  # seconds: a test that hits it has found a client that waits forever


@pytest.fixture(scope="module")
def hostile() -> Iterator[HostileState]:
    with hostile_server() as state:
        yield state


@contextlib.asynccontextmanager
async def client_for(base: str, path: str = "raw", **kw: object) -> AsyncIterator[ApiClient]:
    client = ApiClient(base, **kw)  # type: ignore[arg-type]
    if path == "httpx":  # what an https gateway gets
        assert client._raw is not None
        await client._raw.aclose()
        client._raw = None
    try:
        yield client
    finally:
        await client.aclose()


async def events_of(base: str, path: str, deadlines: StreamDeadlines = SHORT,
                    **kw: object) -> list[ChatEvent]:
    async def run() -> list[ChatEvent]:
        async with (client_for(base, path, deadlines=deadlines, **kw) as client,
                    client.chat_stream(REQ) as stream):
            return [ev async for ev in stream]
    return await asyncio.wait_for(run(), LIMIT)


def failed(events: list[ChatEvent], kind: str) -> StreamError:
    """The stream's last event: a StreamError of ``kind`` (exactly one terminal event), with its code."""
    err = events[-1]
    assert isinstance(err, StreamError), err
    assert err.kind == kind, err
    assert sum(isinstance(e, StreamError) for e in events) == 1
    assert code_for_api_kind(kind) in CODES and code_for_api_kind(kind) == "api-" + kind.replace("_", "-")
    return err


def kept(err: StreamError) -> str:
    assert err.partial is not None
    return err.partial.content


@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize("mode", ["garbage", "nodone", "nested", "badusage/string", "badusage/types",
                                  "badusage/huge"])
async def test_malformed_stream_is_a_protocol_error_that_keeps_the_partial(hostile: HostileState,
                                                                           path: str, mode: str) -> None:
    # Deadlines of an hour: the stream ends at the error, it does not wait for the server or a deadline.
    events = await events_of(f"{hostile.base}/{mode}", path, StreamDeadlines.both(3600))
    err = failed(events, "protocol_error")
    assert kept(err) == PARTIAL
    assert "".join(e.text for e in events if isinstance(e, ContentDelta)) == PARTIAL
    if mode.startswith("badusage"):
        assert "usage" in err.message
    if mode == "nested":
        assert "nested too deeply" in err.message and len(err.message) < 200


@pytest.mark.parametrize("path", PATHS)
async def test_a_huge_single_event_is_cut_at_its_cap(hostile: HostileState, path: str) -> None:
    events = await events_of(hostile.base + "/hugeevent", path, stream_interval=0)  # reads not paced
    err = failed(events, "too_large")
    assert f"longer than {MAX_EVENT_BYTES} characters" in err.message and err.remedy
    assert kept(err) == PARTIAL


@pytest.mark.parametrize("path", PATHS)
async def test_an_endless_answer_keeps_at_most_its_cap(hostile: HostileState, path: str) -> None:
    before = hostile.sent.get("flood", 0)
    events = await events_of(hostile.base + "/flood", path, stream_interval=0)
    err = failed(events, "too_large")
    text = kept(err)
    assert text.startswith(PARTIAL) and len(text) == MAX_ANSWER_CHARS  # cut exactly at the cap, kept
    shown = sum(len(e.text) for e in events if isinstance(e, ContentDelta))
    assert shown == MAX_ANSWER_CHARS  # what was shown is what was kept
    assert hostile.sent["flood"] - before > MAX_ANSWER_CHARS  # the server sent more: it was cut


@pytest.mark.parametrize("path", PATHS)
async def test_comment_keepalives_do_not_hold_a_stream(hostile: HostileState, path: str) -> None:
    events = await events_of(hostile.base + "/comments/200", path)
    err = failed(events, "first_token_timeout")
    assert kept(err) == ""
    events = await events_of(hostile.base + "/keepalive/200", path)
    err = failed(events, "idle_timeout")
    assert kept(err) == PARTIAL


@pytest.mark.parametrize("path", PATHS)
async def test_a_trickled_stream_hits_the_first_token_deadline(hostile: HostileState, path: str) -> None:
    err = failed(await events_of(hostile.base + "/trickle", path), "first_token_timeout")
    assert kept(err) == ""


@pytest.mark.parametrize("path", PATHS)
async def test_a_reset_mid_answer_keeps_the_partial(hostile: HostileState, path: str) -> None:
    err = failed(await events_of(hostile.base + "/reset", path), "unreachable")
    assert "dropped" in err.message and kept(err) == PARTIAL


@pytest.mark.parametrize("path", PATHS)
async def test_an_http_error_with_escapes_is_typed(hostile: HostileState, path: str) -> None:
    err = failed(await events_of(hostile.base + "/status/500", path), "http_error")
    assert err.status == 500 and "engine says" in err.message
    err = failed(await events_of(hostile.base + "/status/503", path), "engine_dead")


async def test_endless_plain_bodies_are_capped(hostile: HostileState) -> None:
    async with client_for(hostile.base + "/endless", health_timeout=30) as client:
        health = await asyncio.wait_for(client.health(), LIMIT)
        assert health.state == "http_error" and f"larger than {MAX_HEALTH_BODY // 1024} KiB" in health.message
        with pytest.raises(ApiError) as info:
            await asyncio.wait_for(client.models(), LIMIT)
        assert info.value.kind == "too_large" and f"{MAX_MODELS_BODY >> 20} MiB" in info.value.message
        with pytest.raises(ApiError) as info:
            await asyncio.wait_for(client.chat(REQ, deadlines=StreamDeadlines.both(30)), LIMIT)
        assert info.value.kind == "too_large" and "8 MiB" in info.value.message


async def test_trickled_plain_answers_have_a_total_deadline(hostile: HostileState) -> None:
    async with client_for(hostile.base + "/trickle", health_timeout=1.0) as client:
        health = await asyncio.wait_for(client.health(), LIMIT)
        assert health.state == "timeout" and "within 1 s" in health.message
        with pytest.raises(ApiError) as info:
            await asyncio.wait_for(client.models(), LIMIT)
        assert info.value.kind == "timeout"
        with pytest.raises(ApiError) as info:
            await asyncio.wait_for(client.chat(REQ, deadlines=StreamDeadlines.both(1.0)), LIMIT)
        assert info.value.kind == "first_token_timeout"


async def test_nested_plain_answers_are_protocol_errors(hostile: HostileState) -> None:
    async with client_for(hostile.base + "/nested") as client:
        for call in (client.models(), client.chat(REQ)):
            with pytest.raises(ApiError) as info:
                await asyncio.wait_for(call, LIMIT)
            assert info.value.kind == "protocol_error" and "nested too deeply" in info.value.message


@pytest.mark.parametrize(("mode", "failing", "kind"), [
    ("endless", "health", "http_error"), ("trickle", "health", "timeout"),
    ("nested", "models", "protocol_error"), ("status/500", "health", "http_error")])
async def test_smoke_ends_in_time_on_a_hostile_server(hostile: HostileState, mode: str, failing: str,
                                                      kind: str) -> None:
    async def run() -> list:  # type: ignore[type-arg]
        async with client_for(f"{hostile.base}/{mode}", health_timeout=1.0, deadlines=SHORT) as client:
            return [s async for s in run_smoke(client)]
    steps = await asyncio.wait_for(run(), LIMIT)
    assert steps[-1].name == failing and not steps[-1].ok and steps[-1].kind == kind, steps
