"""Kernel receive stamps: once ensure_live returns, the very first bytes on a new connection are stamped."""

from __future__ import annotations

import socket
import struct
import time

import pytest

from cockpit import kstamp

pytestmark = pytest.mark.skipif(kstamp.SO_TIMESTAMPNS is None, reason="no kernel receive timestamps here")


def first_read_age() -> float | None:
    """A new loopback TCP connection with stamps on; how long its first byte waited, per its stamp."""
    with socket.create_server(("127.0.0.1", 0)) as listener:
        assert kstamp.enable(listener)  # accepted sockets inherit it, as in the engine
        with socket.create_connection(listener.getsockname()) as client:
            client.sendall(b"x")
            time.sleep(0.02)  # the byte waits in the kernel before anyone reads it
            server, _ = listener.accept()
            with server:
                _data, anc, _flags, _addr = server.recvmsg(1, kstamp.CMSG_SPACE)
                return kstamp.age(anc)


async def test_after_ensure_live_every_new_connection_is_stamped_from_its_first_byte() -> None:
    assert await kstamp.ensure_live()
    assert await kstamp.ensure_live()  # at once, the second time
    for _ in range(20):
        waited = first_read_age()
        assert waited is not None and 0.015 < waited < 1.0


def test_unstamped_ancillary_data_has_no_age() -> None:
    assert kstamp.age([]) is None
    assert kstamp.age([(socket.SOL_SOCKET, 99, b"\0" * 16)]) is None


def test_received_at_falls_back_to_the_read_time() -> None:
    now_real = 1_800_000_000.0
    stamp = [(socket.SOL_SOCKET, kstamp.SO_TIMESTAMPNS, struct.pack("@ll", 1_799_999_999, 750_000_000))]
    assert kstamp.received_at(stamp, 100.0, now_real, 5.0) == 99.75  # waited 0.25 s in the kernel
    assert kstamp.received_at([], 100.0, now_real, 5.0) == 100.0  # unstamped
    assert kstamp.received_at(stamp, 100.0, now_real, 0.1) == 100.0  # older than max_age: a clock step


def test_the_clock_pair_is_the_closest_of_its_tries(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """A preemption between the two clock reads would shift every stamp by its length: the pair is taken
    from the try whose reads of the local clock lay closest, at their midpoint."""
    reads = iter([0.0, 0.010, 5.0, 5.00002])         # first try preempted 10 ms, second 20 µs
    walls = iter([100.0, 105.0])
    monkeypatch.setattr(kstamp.time, "time", lambda: next(walls))
    now, real = kstamp.clock_pair(lambda: next(reads))
    assert (now, real) == (5.00001, 105.0)
