"""Closing a host ends its supervisor even when a cancellation gets lost on the way."""

from __future__ import annotations

import asyncio

from cockpit.hosts import Host, HostState


async def test_close_repeats_a_cancellation_that_wait_for_swallowed(fixed_config) -> None:
    """On Python 3.11 a cancellation that lands as `wait_for`'s inner call completes is lost (gh-86296);
    the supervisor's latency probe runs in `wait_for`, and a `setup env` answered "n" once hung there."""
    host = Host(fixed_config.host(0), fixed_config.ssh)
    probe: asyncio.Future[None] = asyncio.get_running_loop().create_future()
    rounds = 0

    async def supervisor() -> None:  # what `_watch` does: probe, and go on until told to stop
        nonlocal rounds
        while True:
            rounds += 1
            await asyncio.wait_for(asyncio.shield(probe) if rounds == 1 else asyncio.sleep(3600), 60)

    host._task = asyncio.create_task(supervisor())
    await asyncio.sleep(0)
    probe.set_result(None)  # the probe completes in the same loop turn as the close's cancel...
    closing = asyncio.create_task(host.close())
    done, _ = await asyncio.wait({closing}, timeout=10)  # ...and close still ends by itself
    if not done:
        closing.cancel()
        host._task.cancel()
    assert closing in done and host._task.done() and host.status.state is HostState.CLOSED
