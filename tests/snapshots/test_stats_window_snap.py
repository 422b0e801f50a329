"""Snapshots of a rank's detail with a recorded history window (`w`: live → 15 min → 1 h → 24 h): the
last hour of rank 2 from the recording, its SM clock latching 40 minutes in; and a window with nothing
recorded."""

from __future__ import annotations

from test_stats_snap import NOW, SIZE, fill, frozen, latched, show

from cockpit.recipe.recording import path_for
from cockpit.telemetry.recorder import Recorder, Retention
from cockpit.tui.app import CockpitApp
from cockpit.tui.panes.stats import StatsPane


def COMMAND(rank: int) -> str:
    return f"exec bash -c 'sampler of rank {rank}'"


def record_hour(config) -> None:  # type: ignore[no-untyped-def]
    rec = Recorder(path_for(config), Retention(days=3650)).start()
    for s in range(0, 3600, 5):
        t = NOW - 3600 + s
        latched_now = s >= 2400
        for rank in range(4):
            sm = 820.0 if latched_now and rank == 2 else 2405.0 - (s // 60) % 5
            rec.put_sample(t, rank, {"util": 60.0 + (s // 60) % 30, "sm_mhz": sm,
                                     "power_w": 35.0 + (s // 300), "temp_c": 58.0 + (s // 600),
                                     "mem_available_gib": 24.0 - s / 3600,
                                     "tx_gbps": 12.0 + (s // 120) % 3, "rx_gbps": 11.5})
    rec.close()


async def _window(app: CockpitApp, pilot, presses: int) -> StatsPane:  # type: ignore[no-untyped-def]
    pane = app.query_one(StatsPane)
    for _ in range(presses):
        await pilot.press("w")
    for _ in range(200):
        if pane.recorded is not None:
            break
        await pilot.pause(0.05)
    pane.refresh_view()
    await pilot.pause()
    return pane


def test_rank_detail_with_the_recorded_last_hour(snap_compare, fixed_config, monkeypatch) -> None:
    frozen(monkeypatch)
    record_hour(fixed_config)
    app = CockpitApp(fixed_config, connect=False)
    monkeypatch.setattr(app.ctx.monitor.sampler, "command", COMMAND)

    async def before(pilot) -> None:  # type: ignore[no-untyped-def]
        s, alert = latched(2)
        fill(app.ctx.monitor.stats, r2=s)
        app.ctx.monitor.stats.set_alerts((alert,))
        await show(app, pilot, detail=2)
        pane = await _window(app, pilot, 2)
        assert pane.recorded is not None and "720 samples" in pane.recorded_note
        assert min(v for v in pane.recorded.values("sm_mhz") if v is not None) == 820.0

    assert snap_compare(app, terminal_size=SIZE, run_before=before)


def test_rank_detail_with_nothing_recorded(snap_compare, fixed_config, monkeypatch) -> None:
    frozen(monkeypatch)
    app = CockpitApp(fixed_config, connect=False)
    monkeypatch.setattr(app.ctx.monitor.sampler, "command", COMMAND)

    async def before(pilot) -> None:  # type: ignore[no-untyped-def]
        fill(app.ctx.monitor.stats)
        await show(app, pilot, detail=1)
        pane = await _window(app, pilot, 1)
        assert pane.recorded is not None
        assert pane.recorded_note == "recorded, last 15 min: nothing recorded yet"

    assert snap_compare(app, terminal_size=(80, 24), run_before=before)
