"""Stream deadlines over real HTTP (the fake engine on 127.0.0.1): no first token, no token mid-answer.

Comments, keep-alives, role-only, empty and usage-only chunks are not tokens: a server that sends only
those every 200 ms still hits the deadline, on the lean raw path and on the httpx path alike, and the
server sees the connection closed. Plain requests (/health, /v1/models) have a total deadline.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import time
from collections.abc import AsyncIterator

import pytest
from apifakes import FakeEngine

from cockpit.api import rawstream
from cockpit.api.chat import ChatRequest
from cockpit.api.client import ApiClient
from cockpit.api.errors import ApiError
from cockpit.api.smoke import run_smoke
from cockpit.api.stream import ChatEvent, ContentDelta, Finished, StreamDeadlines, StreamError

REQ = ChatRequest([{"role": "user", "content": "Write two sentences about the ocean."}])
SHORT = StreamDeadlines(first_token_s=1.0, idle_s=0.8)
PATHS = ["raw", "httpx"]


@contextlib.asynccontextmanager
async def client_for(base: str, path: str = "raw", **kw: object) -> AsyncIterator[ApiClient]:
    client = ApiClient(base, **kw)  # type: ignore[arg-type]
    if path == "httpx":
        assert client._raw is not None
        await client._raw.aclose()
        client._raw = None  # what an https gateway gets
    try:
        yield client
    finally:
        await client.aclose()


async def timed(client: ApiClient, **kw: object) -> tuple[list[ChatEvent], float]:
    t0 = time.perf_counter()
    async with client.chat_stream(REQ, **kw) as stream:  # type: ignore[arg-type]
        events = [ev async for ev in stream]
    return events, time.perf_counter() - t0


@pytest.mark.parametrize("path", PATHS)
async def test_comments_alone_hit_the_first_token_deadline(fake_engine: FakeEngine, path: str) -> None:
    async with client_for(fake_engine.base + "/comments/200", path, deadlines=SHORT) as client:
        events, took = await timed(client)
        await asyncio.wait_for(fake_engine.disconnected.wait(), 5)  # the server saw the request closed
    err = events[-1]
    assert isinstance(err, StreamError) and err.kind == "first_token_timeout", err
    assert err.message == "no first token within 1 s"
    assert "r37-cockpit logs --rank 0 -n 200" in err.remedy and "stop" in err.remedy
    assert fake_engine.comments_sent >= 3  # comments kept coming and changed nothing
    assert 0.95 <= took < 2.0


@pytest.mark.parametrize("path", PATHS)
async def test_non_tokens_mid_answer_hit_the_idle_deadline(fake_engine: FakeEngine, path: str) -> None:
    async with client_for(fake_engine.base + "/idle/150", path, deadlines=SHORT) as client:
        events, took = await timed(client)
        await asyncio.wait_for(fake_engine.disconnected.wait(), 5)
    err = events[-1]
    assert isinstance(err, StreamError) and err.kind == "idle_timeout", err
    assert err.message == "no token for 0.8 s mid-answer" and "hung" in err.remedy
    assert err.partial is not None and err.partial.content == "The ocean"  # what came is kept
    assert fake_engine.comments_sent >= 4  # a comment, an empty, a role-only and a usage-only chunk
    assert 0.75 <= took < 2.0


@pytest.mark.parametrize("path", PATHS)
async def test_silent_engine_hits_the_first_token_deadline(fake_engine: FakeEngine, path: str) -> None:
    async with client_for(fake_engine.base + "/hang", path, deadlines=SHORT) as client:
        events, took = await timed(client)
        await asyncio.wait_for(fake_engine.disconnected.wait(), 5)
    assert isinstance(events[-1], StreamError) and events[-1].kind == "first_token_timeout"
    assert 0.95 <= took < 2.0


@pytest.mark.parametrize("path", PATHS)
async def test_tokens_in_time_are_not_cut(fake_engine: FakeEngine, path: str) -> None:
    """A first token at 300 ms and tokens every few ms: well within the deadlines, nothing is cut."""
    async with client_for(fake_engine.base + "/slowfirst/plain_multitoken,300", path,
                          deadlines=StreamDeadlines(0.8, 0.5)) as client:
        events, _ = await timed(client)
    assert isinstance(events[-1], Finished), events[-1]
    async with client_for(fake_engine.base + "/drip/counting,150,30", path,
                          deadlines=StreamDeadlines(1.0, 0.4)) as client:
        events, took = await timed(client)
    assert isinstance(events[-1], Finished), events[-1]
    assert took > 0.4  # the whole answer took longer than the idle deadline: only gaps count


async def test_per_request_deadlines_override_the_clients(fake_engine: FakeEngine) -> None:
    async with client_for(fake_engine.base + "/hang", deadlines=StreamDeadlines.both(30)) as client:
        events, took = await timed(client, deadlines=StreamDeadlines.both(0.5))
    assert isinstance(events[-1], StreamError) and events[-1].message == "no first token within 0.5 s"
    assert took < 1.5


async def test_deadline_longer_than_the_read_timeout_wins(fake_engine: FakeEngine) -> None:
    """A long prefill sends nothing: the read timeout must not cut it before the first-token deadline."""
    async with client_for(fake_engine.base + "/hang", read_timeout=0.3,
                          deadlines=StreamDeadlines(1.0, 1.0)) as client:
        events, took = await timed(client)
    assert isinstance(events[-1], StreamError) and events[-1].kind == "first_token_timeout"
    assert took >= 0.95


async def test_no_deadlines_and_zero_in_the_config() -> None:
    d = StreamDeadlines.from_seconds(0.0, 60.0)
    assert d.first_token_s == math.inf and d.idle_s == 60.0 and d.longest == 60.0
    with pytest.raises(ValueError):
        StreamDeadlines(0.0, 1.0)


async def test_the_raw_watchdog_costs_nothing_per_chunk(fake_engine: FakeEngine,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    """Tokens every 20 ms for a second under a 5 s idle deadline: the watchdog looks a few times, not
    once per chunk (it is the read-timeout timer, re-armed only when it fires)."""
    checks = 0
    original = rawstream._Conn._check

    def counted(self: rawstream._Conn) -> None:
        nonlocal checks
        checks += 1
        original(self)

    monkeypatch.setattr(rawstream._Conn, "_check", counted)
    got = 0
    t0 = time.monotonic()
    async with (client_for(fake_engine.base + "/endless", deadlines=StreamDeadlines(5.0, 0.5)) as client,
                client.chat_stream(REQ) as stream):
        async for ev in stream:
            got += isinstance(ev, ContentDelta)
            if got >= 40:
                break
    elapsed = time.monotonic() - t0
    # the timer fires about twice a second however many chunks come (~1 s of them, longer on a loaded
    # machine): once per chunk would be 40
    assert got >= 40 and checks <= 4 + 2 * elapsed and checks < got // 2, (checks, elapsed)


@pytest.mark.parametrize("path", PATHS)
async def test_non_streamed_answer_within_the_first_token_deadline(fake_engine: FakeEngine,
                                                                   path: str) -> None:
    async with client_for(fake_engine.base + "/hang", path, deadlines=SHORT) as client:
        t0 = time.perf_counter()
        with pytest.raises(ApiError) as info:
            await client.chat(REQ)
        took = time.perf_counter() - t0
        await asyncio.wait_for(fake_engine.disconnected.wait(), 5)
    assert info.value.kind == "first_token_timeout" and info.value.message == "no answer within 1 s"
    assert 0.95 <= took < 2.0


async def test_trickled_health_and_models_have_a_total_deadline(fake_engine: FakeEngine) -> None:
    """One body byte a second never trips a per-read timeout; the total deadline ends it."""
    async with client_for(fake_engine.base + "/trickle", health_timeout=0.5) as client:
        t0 = time.perf_counter()
        health = await client.health()
        assert health.state == "timeout" and "within 0.5 s" in health.message and health.remedy
        with pytest.raises(ApiError) as info:
            await client.models()
        took = time.perf_counter() - t0
    assert info.value.kind == "timeout" and "trickling" in info.value.message
    assert took < 2.0


async def test_smoke_stops_at_the_first_missed_deadline(fake_engine: FakeEngine) -> None:
    """A hung engine: health and models pass, the card request misses its deadline, nothing else runs."""
    async with client_for(fake_engine.base + "/hang", deadlines=StreamDeadlines.both(0.5)) as client:
        t0 = time.perf_counter()
        steps = [s async for s in run_smoke(client)]
        took = time.perf_counter() - t0
    assert [(s.name, s.ok) for s in steps] == [("health", True), ("models", True), ("card request", False)]
    card = steps[-1]
    assert card.kind == "first_token_timeout" and card.missed_deadline
    assert card.detail.startswith("no answer within 0.5 s") and "hung" in card.remedy
    assert took < 1.5


async def test_smoke_health_trickle_fails_in_time(fake_engine: FakeEngine) -> None:
    async with client_for(fake_engine.base + "/trickle", health_timeout=0.5) as client:
        t0 = time.perf_counter()
        steps = [s async for s in run_smoke(client)]
    assert [(s.name, s.ok, s.kind) for s in steps] == [("health", False, "timeout")]
    assert time.perf_counter() - t0 < 1.5


@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize("interval", [0.0, 0.5])
async def test_short_idle_deadline_after_a_long_first_token_one(fake_engine: FakeEngine, path: str,
                                                                interval: float) -> None:
    """The first token switches a 5 s deadline to a 0.3 s one: the watchdog looks again then, so a
    silence right after it ends at 0.3 s, not 5 s. With frames (0.5 s) the raw path sleeps between reads:
    a deadline that passes meanwhile ends the stream at the next read."""
    async with client_for(fake_engine.base + "/idle/60000", path, stream_interval=interval,
                          deadlines=StreamDeadlines(5.0, 0.3)) as client:
        events, took = await asyncio.wait_for(timed(client), 10)
    err = events[-1]
    assert isinstance(err, StreamError) and err.kind == "idle_timeout", err
    assert err.partial is not None and err.partial.content == "The ocean"
    assert 0.3 <= took < interval + 0.8
