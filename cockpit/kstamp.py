"""Kernel receive timestamps (Linux ``SO_TIMESTAMPNS``): when received bytes really arrived.

Shared by the streaming client (:mod:`cockpit.api.rawstream`) and the simulated engine
(:mod:`cockpit.sim.engine.arrival`); like :mod:`cockpit.constants` it holds no cockpit logic, so the sim may
import it. Where the option is missing, callers time a read when it returns.

Linux turns receive stamping on for the whole machine when the first socket asks for it, and does so
*later*, from a work queue (``net_enable_timestamp``): bytes that arrive in the next few milliseconds
carry no stamp. :func:`ensure_live` holds one stamping socket open for the life of the process and waits
until the kernel stamps, so no request or answer falls into that gap.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import socket
import struct
import sys
import time
from collections.abc import Callable

SO_TIMESTAMPNS: int | None = getattr(socket, "SO_TIMESTAMPNS", 35 if sys.platform == "linux" else None)
_TIMESPEC = struct.Struct("@ll")  # struct timespec: tv_sec, tv_nsec
CMSG_SPACE = socket.CMSG_SPACE(_TIMESPEC.size)
"""The ``ancbufsize`` for ``recvmsg`` that holds one stamp."""
LIVE_TIMEOUT = 1.0  # how long ensure_live waits for the kernel before reads are timed as they return

_keeper: socket.socket | None = None
_live: bool | None = None  # ensure_live's answer, once known


def enable(sock: socket.socket) -> bool:
    """Ask the kernel to stamp what ``sock`` receives; False where it cannot."""
    if SO_TIMESTAMPNS is None:
        return False
    try:
        sock.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMPNS, 1)
    except OSError:
        return False
    return True


def age(ancdata: list[tuple[int, int, bytes]], now_real: float | None = None) -> float | None:
    """How long the bytes of a ``recvmsg`` waited in the kernel, from its ``ancdata``; None if unstamped.

    ``now_real`` is ``time.time()`` taken just after the read (taken here if not given). Subtract the
    age from the caller's own clock read at the same moment.
    """
    for level, kind, raw in ancdata:
        if level == socket.SOL_SOCKET and kind == SO_TIMESTAMPNS and len(raw) >= _TIMESPEC.size:
            sec, nsec = _TIMESPEC.unpack_from(raw)
            return (time.time() if now_real is None else now_real) - (sec + nsec * 1e-9)
    return None


def clock_pair(clock: Callable[[], float] = time.perf_counter) -> tuple[float, float]:
    """`clock()` and `time.time()` as of one moment, to put a kernel stamp (wall clock) on `clock`: the
    wall clock read between two reads of `clock`, their midpoint, from the closest of three tries. Read
    one after the other, a preemption between the two reads shifted every stamp by its length (2 ms seen
    on a loaded machine: an arrival before its own write)."""
    best = (math.inf, 0.0, 0.0)
    for _ in range(3):
        before = clock()
        real = time.time()
        after = clock()
        if after - before < best[0]:
            best = (after - before, (before + after) / 2, real)
        if after - before < 50e-6:
            break
    return best[1], best[2]


def received_at(ancdata: list[tuple[int, int, bytes]], now: float, now_real: float, max_age: float) -> float:
    """When the bytes of a ``recvmsg`` arrived, on the caller's clock (``now``, read next to ``now_real``
    = ``time.time()`` just after the read); ``now`` itself if unstamped, or if the stamp is older than
    ``max_age`` (a step of the wall clock, not a wait)."""
    waited = age(ancdata, now_real)
    return now - waited if waited is not None and 0.0 <= waited < max_age else now


def _stamped_now() -> bool:
    """True if a byte sent over a new loopback TCP connection comes with a stamp."""
    with contextlib.ExitStack() as stack:
        listener = stack.enter_context(socket.socket())
        listener.bind(("127.0.0.1", 0))
        listener.listen(1)
        client = stack.enter_context(socket.create_connection(listener.getsockname(), timeout=1.0))
        server = stack.enter_context(listener.accept()[0])
        server.settimeout(1.0)
        enable(server)
        client.sendall(b"x")
        _data, anc, _flags, _addr = server.recvmsg(1, CMSG_SPACE)
        return age(anc) is not None


async def ensure_live(timeout: float = LIVE_TIMEOUT) -> bool:
    """Make sure the kernel stamps received bytes from now on; False where it does not (not Linux, or
    not within ``timeout``). Only the first call waits, a few milliseconds at most; later ones return
    its answer at once."""
    global _live
    if _live is None:
        _live = await _turn_on(timeout)
    return _live


async def _turn_on(timeout: float) -> bool:
    """Open the keeper socket and wait until a probe connection is stamped."""
    global _keeper
    if SO_TIMESTAMPNS is None:
        return False
    try:
        keeper = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    except OSError:
        return False
    if not enable(keeper):
        keeper.close()
        return False
    _keeper = keeper  # open until the process ends: the kernel keeps stamping while one socket asks
    deadline = time.monotonic() + timeout
    while True:
        try:
            if _stamped_now():
                return True
        except OSError:
            return False
        if time.monotonic() >= deadline:
            return False
        await asyncio.sleep(0.001)
