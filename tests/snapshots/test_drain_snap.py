"""Snapshots of the drain countdown before a stop: rank 0 still answering 2 requests (1 waiting), 87 s left
of the 120 s wait, the stop's exact commands below, at 160x48 and 80x24."""

from __future__ import annotations

import pytest

from cockpit.recipe.stop import InFlight
from cockpit.tui.app import CockpitApp
from cockpit.tui.dialogs import DrainDialog

COMMANDS = [("rank 0 (spark-0) — head, first", "docker stop " + "a" * 64),
            ("rank 1 (spark-1)", "docker stop " + "b" * 64)]


@pytest.mark.parametrize("size", [(160, 48), (80, 24)])
def test_drain_countdown(snap_compare, fixed_config, size: tuple[int, int]) -> None:
    app = CockpitApp(fixed_config, connect=False)

    async def before(pilot) -> None:  # type: ignore[no-untyped-def]
        await pilot.pause()
        app.action_show_pane("commands")   # a pane without a clock behind the dialog (hosts counts seconds)
        await pilot.pause()
        dialog = DrainDialog(120, InFlight(3, 1), COMMANDS)
        app.push_screen(dialog)
        await pilot.pause()
        dialog.show(87.2, InFlight(2, 1))
        await pilot.pause()
        assert "2 running, 1 waiting" in str(dialog.query_one("#drain-state").render())

    assert snap_compare(app, terminal_size=size, run_before=before)
