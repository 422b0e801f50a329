"""Preflight, Setup and Launch panes: every key a status line, a placeholder or a notice names is the key
bound now (one remapped in `[ui.keymap]` shows remapped), and a worker that fails is shown once, by the
app, and leaves the pane usable (no "in progress" left behind)."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
from textual.widget import Widget

from cockpit.recipe import launch_run as launch_run_module
from cockpit.recipe.checks import PreflightEvent, PreflightStarted
from cockpit.tui.app import CockpitApp
from cockpit.tui.dialogs import ConfirmResult
from cockpit.tui.panes import preflight as preflight_module
from cockpit.tui.panes.launch import LaunchPane
from cockpit.tui.panes.preflight import PreflightPane

SIZE = (120, 36)


def shown(app: CockpitApp, selector: str) -> str:
    return str(app.query_one(selector, Widget).render())


async def until(pilot, predicate, tries: int = 60) -> None:  # type: ignore[no-untyped-def]
    for _ in range(tries):
        if predicate():
            return
        await pilot.pause(0.05)
    assert predicate()


async def test_preflight_hints_show_a_remapped_key(fixed_config) -> None:
    app = CockpitApp(fixed_config, connect=False)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("2")
        await pilot.pause()
        status = shown(app, "#preflight-status")
        assert "press a to run the preflight" in status and "a run all" in status
        app.set_keymap({"preflight.run_all": "A", "preflight.rerun_host": "H"})
        await pilot.pause()
        await pilot.pause()
        status = shown(app, "#preflight-status")
        assert "press A to run the preflight" in status, status
        assert "A run all" in status and "H re-run host" in status and "c re-run check" in status
        assert "press a " not in status and "a run all" not in status


async def test_setup_hints_and_notes_show_a_remapped_key(fixed_config) -> None:
    app = CockpitApp(fixed_config, connect=False)
    async with app.run_test(size=SIZE) as pilot:
        app.set_keymap({"setup.start": "S", "setup.cancel": "X"})
        await pilot.press("3")
        await pilot.pause()
        status = shown(app, "#setup-status")
        assert "S start" in status and "X cancel all" in status and "j job" in status, status
        assert "s start" not in status and "x cancel all" not in status
        await pilot.press("u")          # nothing ran yet: the note names the start key as bound now
        await pilot.pause()
        assert "nothing to resume: start a job first (S)" in shown(app, "#setup-status")


async def test_launch_placeholder_and_notice_show_a_remapped_key(fixed_config) -> None:
    app = CockpitApp(fixed_config, connect=False)
    async with app.run_test(size=SIZE) as pilot:
        app.set_keymap({"launch.dry_run": "D", "launch.start": "L"})
        await pilot.press("4")
        await pilot.pause()
        await pilot.pause()
        commands = shown(app, "#launch-commands")
        assert "D dry-run every rank" in commands and "L launch ranks 3 → 2 → 1 → 0" in commands, commands
        assert "d dry-run" not in commands
        await pilot.press("L")          # no dry run yet: refused, naming the dry run's key
        await pilot.pause()
        await pilot.pause()
        assert "run the dry run first (D)" in shown(app, "#launch-notice")


async def test_a_dry_run_shown_carries_its_age(fixed_config) -> None:
    """A dry run is what the hosts said when it ran: its lines say how long ago, and which key reads them
    again (a failed dry run stayed on screen, undated, after setup had fixed its cause)."""
    from cockpit.recipe import launch as L

    app = CockpitApp(fixed_config, connect=False)
    async with app.run_test(size=SIZE) as pilot:
        app.set_keymap({"launch.dry_run": "D"})
        await pilot.press("4")
        await pilot.pause()
        pane = app.query_one(LaunchPane)
        now = [1_000.0]
        pane.clock = lambda: now[0]
        runs = {r: L.DryRun(r, "dry", "launch", r != 2, "ok" if r != 2 else "", "" if r != 2 else "no image")
                for r in fixed_config.ranks}
        pane.show_dry_run(runs, [])
        assert shown(app, "#launch-commands").startswith("dry run 0 s ago (D runs it again)")
        now[0] += 300
        pane.refresh_view()
        commands = shown(app, "#launch-commands")
        assert commands.startswith("dry run 5 min ago (D runs it again)"), commands
        assert "dry run FAILED: no image" in commands


async def test_the_timeline_and_setup_name_each_host_as_it_names_itself(fixed_config) -> None:
    """The host column shows the name a host gave itself once it has (every demo host's SSH target is
    127.0.0.1, so the column read 127.0.0.1 four times), else the SSH target; a hostile name is inert."""
    from dataclasses import replace

    app = CockpitApp(fixed_config, connect=False)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("4")
        await pilot.pause()
        pane = app.query_one(LaunchPane)
        rows = lambda: shown(app, "TimelineView").splitlines()  # noqa: E731
        assert rows()[2].split()[:2] == ["1", "spark-1"], rows()
        for rank, name in ((1, "gb10-b"), (2, "x\x1b]0;t\x07")):
            host = app.ctx.fleet[rank]
            host.status = replace(host.status, hostname=name)
            pane.host_changed(host.status)
        await pilot.pause()
        text = shown(app, "TimelineView")
        assert rows()[1].split()[:2] == ["0", "spark-0"] and rows()[2].split()[:2] == ["1", "gb10-b"], rows()
        assert rows()[3].split()[1].startswith("x␛]0;t") and "\x1b" not in text and "\x07" not in text
        await pilot.press("3")              # the Setup pane names them alike (Pane.host_label)
        await pilot.pause()
        from textual.widgets import DataTable

        from cockpit.tui.panes.setup import SetupPane
        table = app.query_one(SetupPane).query_one(DataTable)
        hosts = [str(table.get_row_at(i)[1]) for i in range(table.row_count)]
        assert hosts[:3] == ["spark-0", "gb10-b", "x␛]0;t␇"], hosts


async def test_read_only_hints_leave_out_what_is_refused(fixed_config) -> None:
    app = CockpitApp(fixed_config, connect=False, read_only=True)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("4")
        await pilot.pause()
        commands = shown(app, "#launch-commands")
        assert "d dry-run every rank" in commands and "look again" in commands
        assert "launch ranks" not in commands and "stop (head first)" not in commands
        await pilot.press("3")
        await pilot.pause()
        status = shown(app, "#setup-status")
        assert "j job" in status and "start" not in status and "resume" not in status


async def test_a_failed_launch_is_shown_once_and_the_pane_is_usable_again(fixed_config, monkeypatch) -> None:
    class LockHostGone:
        """The cluster lock's host answering with an error nobody planned for."""

        def __init__(self, *args: object, **kwargs: object) -> None:
            pass

        async def __aenter__(self) -> None:
            raise RuntimeError("the lock host fell over")

        async def __aexit__(self, *exc: object) -> None:
            return None

    monkeypatch.setattr(launch_run_module, "ClusterLock", LockHostGone)
    app = CockpitApp(fixed_config, connect=False)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("4")
        await pilot.pause()
        pane = app.query_one(LaunchPane)
        pane._launch_confirmed(ConfirmResult(), [])
        assert pane.launching and app.busy()
        await until(pilot, lambda: pane.worker_error is not None)
        await pilot.pause()
        assert app.is_running and not pane.launching and app.busy() == ""
        assert "the lock host fell over" in str(pane.query_one("#pane-error").render())
        notes = [n for n in app._notifications if "the lock host fell over" in n.message]
        assert len(notes) == 1 and notes[0].title == "Launch: launch worker failed"
        notice = pane.query_one("#launch-notice")
        assert "fell over" not in str(notice.render()) and "launching" not in str(notice.render())


async def test_a_preflight_that_fails_midway_is_not_left_running(fixed_config, monkeypatch) -> None:
    async def half_a_run(fleet, cfg, **kwargs) -> AsyncIterator[PreflightEvent]:  # type: ignore[no-untyped-def]
        from cockpit.recipe.checks import CheckInfo
        from cockpit.recipe.preflight import CHECKS

        yield PreflightStarted(tuple(CheckInfo(c.id, c.step, c.title, tuple(cfg.ranks)) for c in CHECKS),
                               tuple(cfg.ranks))
        raise RuntimeError("the checks fell over")

    monkeypatch.setattr(preflight_module, "run_preflight", half_a_run)
    app = CockpitApp(fixed_config, connect=False)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("2")
        await pilot.pause()
        pane = app.query_one(PreflightPane)
        await pilot.press("a")
        await until(pilot, lambda: pane.worker_error is not None)
        await pilot.pause()
        assert not pane.running and "running…" not in shown(app, "#preflight-status")
        summary = app.ctx.preflight
        assert summary is not None and not summary.ok      # an unfinished preflight is never a pass
        assert len([n for n in app._notifications if "the checks fell over" in n.message]) == 1


@pytest.mark.parametrize("pane_id", ["preflight", "setup", "launch"])
async def test_a_theme_switch_redraws_the_pane(fixed_config, pane_id: str) -> None:
    app = CockpitApp(fixed_config, connect=False)
    async with app.run_test(size=SIZE) as pilot:
        app.action_show_pane(pane_id)
        await pilot.pause()
        drawn: list[str] = []
        pane = app.pane(pane_id)
        original = pane.refresh_view

        def spy() -> None:
            drawn.append(app.theme)
            original()

        pane.refresh_view = spy  # type: ignore[method-assign]
        app.theme = "cockpit-light"
        await pilot.pause()
        await pilot.pause()
        assert "cockpit-light" in drawn and app.is_running
