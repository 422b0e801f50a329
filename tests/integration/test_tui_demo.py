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


async def test_the_tui_records_and_shows_the_events_on_e(demo_cluster, tmp_path, monkeypatch) -> None:
    from cockpit.recipe.recording import path_for
    from cockpit.telemetry.recorder import read_events, read_samples
    from cockpit.tui.dialogs import EventsScreen

    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    cfg = demo_cluster.config
    app = CockpitApp(cfg, demo_cluster.config_path)
    async with app.run_test(size=(160, 48)) as pilot:
        assert app.recording is not None and app.recording.path == path_for(cfg)
        stats = app.ctx.monitor.stats
        await _until(pilot, lambda: all(len(stats.history[r].times) >= 3 for r in cfg.ranks), 60)
        await pilot.press("E")
        await _until(pilot, lambda: isinstance(app.screen, EventsScreen) and app.screen.events, 30)
        screen = app.screen
        assert isinstance(screen, EventsScreen)
        assert any(e.kind == "recorder" and "tui" in e.summary for e in screen.events)
        assert any(e.kind == "condition" for e in screen.events)     # the watcher's first look
        await pilot.press("escape")
    assert app.recording is None                # closed with the app: everything committed
    samples = read_samples(path_for(cfg))
    assert {s["rank"] for s in samples} == set(cfg.ranks)
    ends = [e.summary for e in read_events(path_for(cfg)) if e.kind == "recorder"]
    assert ends[-1] == "recording ends (tui)"
