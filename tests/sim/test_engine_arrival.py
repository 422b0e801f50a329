"""The engine's request clock starts when the kernel received the request, not when Python got to it."""

from __future__ import annotations

import asyncio
import socket
import time

import pytest
from aiohttp import web

from cockpit.sim.engine import arrival

pytestmark = pytest.mark.skipif(arrival.loop_factory() is None, reason="no stamped transports here")

STALL = 0.15


def run_on_stamping_loop(coro_fn):  # type: ignore[no-untyped-def]
    with asyncio.Runner(loop_factory=arrival.loop_factory) as runner:
        return runner.run(coro_fn())


def request(path: str) -> bytes:
    return f"GET {path} HTTP/1.1\r\nHost: x\r\n\r\n".encode()


def test_a_request_seen_late_keeps_its_arrival_time() -> None:
    """The loop is stalled after each request is sent; arrival is still the send time, per request."""

    async def scenario() -> list[tuple[float, float, float]]:
        seen: list[tuple[float, float]] = []

        async def handler(req: web.Request) -> web.Response:
            seen.append((req[arrival.ARRIVAL], time.monotonic()))
            return web.Response(text="ok")

        app = web.Application(middlewares=[arrival.note_arrival])
        app.router.add_get("/{n}", handler)
        runner = web.AppRunner(app, access_log=None)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        port = runner.addresses[0][1]
        out = []
        loop = asyncio.get_running_loop()
        with socket.create_connection(("127.0.0.1", port)) as sock:  # one keep-alive connection
            sock.setblocking(False)
            for n in range(3):
                sent = time.monotonic()
                sock.send(request(f"/{n}"))
                time.sleep(STALL)  # the loop cannot read the request before this returns
                while len(seen) <= n:
                    await asyncio.sleep(0.001)
                await loop.sock_recv(sock, 4096)  # the answer, before the next request (no pipelining)
                out.append((sent, *seen[n]))
        await runner.cleanup()
        return out

    for sent, arrived, handled in run_on_stamping_loop(scenario):
        assert handled - sent >= STALL  # Python saw the request late...
        assert -0.002 < arrived - sent < 0.02  # ...its arrival is when it was sent


def test_without_a_stamped_transport_arrival_is_now() -> None:
    before = time.monotonic()
    assert before <= arrival.arrival_of(object()) <= time.monotonic()
    arrival.watch_next(object())  # no-op
