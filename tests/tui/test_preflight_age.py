"""A preflight shown is a fact with an age (issue 22, item 7): its time once it is older than a minute, and
STALE once a setup job ran after it — the launch gate runs it again rather than judge by it."""

from __future__ import annotations

import sys
from pathlib import Path

from textual.widgets import Static

from cockpit.recipe.checks import PreflightFinished
from cockpit.tui.app import CockpitApp

sys.path.insert(0, str(Path(__file__).parents[1] / "snapshots"))
from test_preflight_snap import mixed, started


async def test_the_preflight_shown_carries_its_age_and_is_marked_stale_after_setup(fixed_config) -> None:
    app = CockpitApp(fixed_config, connect=False)
    async with app.run_test(size=(160, 48)) as pilot:
        await pilot.press("2")
        pane = app.query_one("#preflight-pane")
        results = mixed(fixed_config)
        pane.apply(started(fixed_config))
        for r in results:
            pane.apply(r)
        pane.apply(PreflightFinished(tuple(results), 1.2))
        await pilot.pause()
        status = app.query_one("#preflight-status", Static)
        assert "taken" not in str(status.render())          # just taken: as good as live
        pane.shown_at -= 600                                 # ten minutes later
        app.ctx.preflight = type(app.ctx.preflight)(False, app.ctx.preflight.results, pane.shown_at)
        pane._age_tick()
        text = str(status.render())
        assert "(10 min ago)" in text and "STALE: taken a while ago" in text
        app.ctx.setup_finished()
        pane._age_tick()
        assert "STALE: taken before the last setup job" in str(status.render())
        assert app.ctx.preflight_stale()
