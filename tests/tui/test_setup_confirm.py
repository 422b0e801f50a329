"""The Setup pane's confirm dialog (issue 25): it opens only once the plan is read, holding every command of
the plan, never empty; while the hosts are read the status line says so, and once the plan is in the dialog
it says what is true (the plan is read and waits for a confirmation), then what the operator chose."""

from __future__ import annotations

import asyncio
from typing import Any

from textual.widgets import Static
from tuihelpers import setup_plan

from cockpit.recipe.setup_model import SetupPlan
from cockpit.tui.app import CockpitApp
from cockpit.tui.dialogs import ConfirmCommands
from cockpit.tui.panes import setup as setup_pane_module
from cockpit.tui.panes.setup import SetupPane

SIZE = (130, 36)


def status(app: CockpitApp) -> str:
    return str(app.query_one(SetupPane).query_one("#setup-status", Static).render())


def dialog_text(screen: ConfirmCommands) -> str:
    return "\n".join(str(w.render()) for w in screen.query(Static))


async def test_the_dialog_opens_with_the_plan_and_the_status_line_tells_the_truth(fixed_config,  # type: ignore[no-untyped-def]
                                                                                    monkeypatch) -> None:
    plan = setup_plan()
    release = asyncio.Event()
    asked: list[tuple[str, ...]] = []

    async def slow_planner(fleet: Any, config: Any, jobs: tuple[str, ...], **kwargs: Any) -> SetupPlan:
        asked.append(tuple(jobs))
        await release.wait()                 # the hosts take their time to answer
        return plan

    monkeypatch.setattr(setup_pane_module, "plan_setup", slow_planner)
    app = CockpitApp(fixed_config, connect=False)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("3")
        await pilot.pause()
        await pilot.press("s")
        for _ in range(10):                  # the plan is being read: no dialog, the status line says so
            await pilot.pause(0.02)
            assert not isinstance(app.screen, ConfirmCommands)
        assert asked and "reading the hosts to plan all" in status(app)

        release.set()
        for _ in range(200):
            if isinstance(app.screen, ConfirmCommands):
                break
            await pilot.pause(0.01)
        screen = app.screen                  # from the moment it is up: made with the whole plan
        assert isinstance(screen, ConfirmCommands)
        assert screen.commands == plan.commands() and len(screen.commands) == 12
        await pilot.pause()
        shown = dialog_text(screen)
        for label, line in plan.commands():
            assert label in shown and line in shown
        assert "Run setup all with these commands" in shown

        line = status(app)                   # the pane under the dialog: the plan is read, not being read
        assert "reading the hosts" not in line
        assert "plan read: 12 commands on 4 ranks" in line and "confirm" in line

        await pilot.press("escape")
        await pilot.pause()
        assert not isinstance(app.screen, ConfirmCommands)
        assert "cancelled: nothing was run" in status(app)


async def test_a_plan_with_nothing_to_run_opens_no_dialog(fixed_config, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    empty = SetupPlan(setup_plan().jobs[:0], {0: "root@spark-0"})

    async def planner(*args: Any, **kwargs: Any) -> SetupPlan:
        return empty

    monkeypatch.setattr(setup_pane_module, "plan_setup", planner)
    app = CockpitApp(fixed_config, connect=False)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("3")
        await pilot.pause()
        await pilot.press("s")
        for _ in range(20):
            await pilot.pause(0.02)
            assert not isinstance(app.screen, ConfirmCommands)
        line = status(app)
        assert "nothing to run" in line and "reading the hosts" not in line
