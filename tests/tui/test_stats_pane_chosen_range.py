"""The Stats pane's chosen history range (`w` past 24 h, issue 27.3): a dialog asks from / until in the
times `events --since` takes; the rank's recorded samples of that range are shown (one that the 15 min,
1 h and 24 h windows do not reach, as they end now); a range that ends before it begins, or a time that is
not one, is said and the pane goes back to the live history; Esc goes back to live."""

from __future__ import annotations

import time

from cockpit.config import ClusterConfig
from cockpit.recipe.recording import path_for
from cockpit.telemetry.recorder import Recorder, Retention
from cockpit.tui.app import CockpitApp
from cockpit.tui.dialogs.range import RangePrompt
from cockpit.tui.panes.stats import RANGE, WINDOWS, StatsPane

START = time.time() - 3 * 86_400          # three days ago: beyond every fixed window


def stamp(t: float) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(t))


def record(config: ClusterConfig) -> None:
    rec = Recorder(path_for(config), Retention(days=3650)).start()
    for s in range(0, 600, 10):
        for rank in range(4):
            rec.put_sample(START + s, rank, {"util": 50.0, "sm_mhz": 820.0 if rank == 2 else 2405.0})
    rec.close()


async def choose(app: CockpitApp, pilot, since: str, until: str) -> StatsPane:  # type: ignore[no-untyped-def]
    pane = app.query_one(StatsPane)
    for _ in range(len(WINDOWS) - 1):
        await pilot.press("w")
    await pilot.pause()
    assert isinstance(app.screen, RangePrompt)
    app.screen.query_one("#range-from").value = since   # type: ignore[attr-defined]
    app.screen.query_one("#range-until").value = until  # type: ignore[attr-defined]
    await pilot.press("enter")                        # from → until
    await pilot.press("enter")                        # accept
    for _ in range(200):
        if pane.recorded is not None or pane.window == 0:
            break
        await pilot.pause(0.05)
    return pane


async def test_a_chosen_range_shows_what_was_recorded_then(fixed_config: ClusterConfig) -> None:
    record(fixed_config)
    app = CockpitApp(fixed_config, connect=False)
    async with app.run_test(size=(160, 48)) as pilot:
        app.action_show_pane("stats")
        await pilot.pause()
        pane = app.query_one(StatsPane)
        pane.selected = 2
        pane.action_detail()
        pane = await choose(app, pilot, stamp(START - 60), stamp(START + 660))
        assert pane.window == RANGE and pane.recorded is not None
        assert "60 samples" in pane.recorded_note and stamp(START - 60)[:16] in pane.recorded_note
        assert {v for v in pane.recorded.values("sm_mhz") if v is not None} == {820.0}
        await pilot.press("w")                            # past the range: live again
        await pilot.pause()
        assert pane.window == 0 and pane.range is None


async def test_a_bad_range_is_said_and_the_history_goes_back_to_live(fixed_config: ClusterConfig) -> None:
    app = CockpitApp(fixed_config, connect=False)
    async with app.run_test(size=(160, 48)) as pilot:
        app.action_show_pane("stats")
        await pilot.pause()
        pane = app.query_one(StatsPane)
        pane.action_detail()
        pane = await choose(app, pilot, "1h", "2h")        # ends before it begins
        assert pane.window == 0 and pane.range is None
        assert any("must come after" in str(n.message) for n in app._notifications)
        pane = await choose(app, pilot, "soon", "")
        assert pane.window == 0
        assert any("not a time" in str(n.message) for n in app._notifications)
        for _ in range(len(WINDOWS) - 1):
            await pilot.press("w")
        await pilot.pause()
        await pilot.press("escape")
        await pilot.pause()
        assert pane.window == 0 and not isinstance(app.screen, RangePrompt)
