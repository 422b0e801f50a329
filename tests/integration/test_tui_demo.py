"""The TUI on a real fleet: hosts turn connected, a host taken away turns lost and comes back."""

from __future__ import annotations

import asyncio
import time

from cockpit.hosts import HostState
from cockpit.tui.app import CockpitApp
from cockpit.tui.panes.hosts import HostsPane


async def _until(pilot, pred, timeout: float) -> float:  # type: ignore[no-untyped-def]
    t0 = time.monotonic()
    while not pred():
        await pilot.pause(0.1)
        assert time.monotonic() - t0 < timeout, "timed out"
    return time.monotonic() - t0


async def test_tui_shows_lost_and_reconnected(demo_cluster) -> None:
    app = CockpitApp(demo_cluster.config, demo_cluster.config_path)
    async with app.run_test(size=(130, 30)) as pilot:
        pane = app.query_one(HostsPane)
        await _until(pilot, lambda: all(s.state is HostState.CONNECTED for s in pane.statuses), 20)
        demo_cluster.fault(0, "host-down")
        try:
            lost_after = await _until(pilot, lambda: pane.statuses[0].state is HostState.LOST, 12)
        finally:
            demo_cluster.fault(0, "host-down", on=False)
        assert lost_after <= 10.5
        assert "rank 0 down" in str(app.query_one("#cluster-header").render())
        await _until(pilot, lambda: pane.statuses[0].state is HostState.CONNECTED, 30)
        await asyncio.sleep(0)
