"""When a request really arrived: an event loop whose TCP transports keep the kernel's receive time.

The simulated engine starts a request's clock at its arrival, like vLLM. Python sees a request only after
the process wakes, the HTTP layer parses it and the handler task starts: 0.3-0.7 ms on a small VM, which
would show up in every TTFT the cockpit measures against the schedule (1 % of an 18-token prompt's TTFT
is 0.48 ms). This loop's transports read with ``recvmsg`` and ``SO_TIMESTAMPNS`` instead, so the kernel's
own receive time of a request's first bytes is at hand (:func:`arrival_of`).

It builds on asyncio's selector transport (private API, stable since 3.8); where that or the socket option
is missing, :func:`loop_factory` returns ``None`` and the engine falls back to the handler's entry time.
"""

from __future__ import annotations

import asyncio
import socket
import time
from typing import Any

from aiohttp import web
from aiohttp.typedefs import Handler

from cockpit import kstamp

try:  # typeshed does not describe this private class: it is Any to the checker
    from asyncio.selector_events import _SelectorSocketTransport  # type: ignore[attr-defined]
except ImportError:  # pragma: no cover - another asyncio
    _SelectorSocketTransport = None

_MAX_AGE = 5.0  # a stamp older than this is a wall-clock step, not a queued request


def _monotonic_of(ancdata: list[tuple[int, int, bytes]]) -> float:
    """The kernel receive time in ``ancdata`` on the monotonic clock (now, if there is none)."""
    return kstamp.received_at(ancdata, *kstamp.clock_pair(time.monotonic), _MAX_AGE)


if _SelectorSocketTransport is not None and kstamp.SO_TIMESTAMPNS is not None:

    class StampedTransport(_SelectorSocketTransport):
        """A TCP transport that notes when the kernel received the first bytes since the last reset."""

        first_rx: float | None = None

        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            kstamp.enable(self._sock)  # where it cannot, the read time is used

        def _read_ready__data_received(self) -> None:  # asyncio's own, with recvmsg
            if self._conn_lost:
                return
            try:
                data, anc, _flags, _addr = self._sock.recvmsg(self.max_size, kstamp.CMSG_SPACE)
            except (BlockingIOError, InterruptedError):
                return
            except (SystemExit, KeyboardInterrupt):
                raise
            except BaseException as exc:
                self._fatal_error(exc, "Fatal read error on socket transport")
                return
            if not data:
                self._read_ready__on_eof()
                return
            if self.first_rx is None:
                self.first_rx = _monotonic_of(anc)
            try:
                self._protocol.data_received(data)
            except (SystemExit, KeyboardInterrupt):
                raise
            except BaseException as exc:
                self._fatal_error(exc, "Fatal error: protocol.data_received() call failed.")

    class StampingLoop(asyncio.SelectorEventLoop):
        """A selector event loop whose plain TCP transports are :class:`StampedTransport`."""

        async def create_server(self, *args: Any, **kwargs: Any) -> asyncio.Server:
            """As asyncio's, with stamping on the listening sockets: accepted sockets inherit it, so
            a request sent right after connecting (before the accept) is stamped too."""
            server = await super().create_server(*args, **kwargs)
            for sock in server.sockets:
                kstamp.enable(sock)
            await kstamp.ensure_live()  # the kernel turns stamping on a little later: wait for it
            return server

        def _make_socket_transport(
            self, sock: socket.socket, protocol: asyncio.BaseProtocol, waiter: Any = None, *,
            extra: Any = None, server: Any = None,
        ) -> asyncio.Transport:
            return StampedTransport(self, sock, protocol, waiter, extra, server)

    def loop_factory() -> asyncio.AbstractEventLoop | None:
        """A new :class:`StampingLoop`."""
        return StampingLoop()

else:  # pragma: no cover - not Linux, or another asyncio

    def loop_factory() -> asyncio.AbstractEventLoop | None:
        return None


def arrival_of(transport: object) -> float:
    """The kernel receive time of the current request's first bytes (without a stamped transport: now)."""
    stamp = getattr(transport, "first_rx", None)
    now = time.monotonic()
    return now if stamp is None else min(stamp, now)


def watch_next(transport: object) -> None:
    """The current request is handled: the next bytes on the connection start the next request."""
    if getattr(transport, "first_rx", None) is not None:
        transport.first_rx = None  # type: ignore[attr-defined]


ARRIVAL = web.RequestKey("arrival", float)
"""``request[ARRIVAL]``: the request's arrival, ``time.monotonic()`` clock (see :func:`note_arrival`)."""


@web.middleware
async def note_arrival(request: web.Request, handler: Handler) -> web.StreamResponse:
    """Set ``request[ARRIVAL]``: the kernel's receive time where the loop keeps it, else now."""
    request[ARRIVAL] = arrival_of(request.transport)
    try:
        return await handler(request)
    finally:
        watch_next(request.transport)
