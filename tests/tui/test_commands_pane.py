"""The Commands pane: live records, the rank and text filters, the selected line and its copy; and the
records of a pane's action naming that pane (on the demo cluster)."""

from __future__ import annotations

import asyncio
import time
from collections import deque

from textual.widgets import DataTable, Input, Static

from cockpit.hosts import CommandRecord
from cockpit.tui.app import CockpitApp
from cockpit.tui.panes.commands import CommandsPane, outcome

T0 = time.time()


def rec(rank: int, line: str, status: int | None = 0, note: str = "", origin: str = "preflight",
        duration: float | None = 0.5) -> CommandRecord:
    return CommandRecord(rank, line, T0, duration, status, note, origin)


def test_outcome_roles() -> None:
    assert outcome(rec(0, "true")) == ("0", "ok.soft")
    assert outcome(rec(0, "false", 1)) == ("1", "fail")
    assert outcome(rec(0, "sleep 99", None, "timeout")) == ("timeout", "warn")
    assert outcome(rec(0, "x", None, "lost")) == ("lost", "fail")
    assert outcome(rec(0, "docker logs -f x", None, "stream", duration=None)) == ("stream", "muted")


async def test_records_filters_and_copy(fixed_config, monkeypatch) -> None:
    app = CockpitApp(fixed_config, connect=False)
    copied: list[str] = []
    monkeypatch.setattr(app, "copy_to_clipboard", copied.append)
    async with app.run_test(size=(140, 36)) as pilot:
        app.action_show_pane("commands")
        await pilot.pause()
        pane = app.query_one(CommandsPane)
        started = CommandRecord(1, "uname -m", T0)          # a run just begun: only its end is listed
        app.fleet._recorded(started)
        for r in (0, 1, 2, 3):
            app.fleet._recorded(rec(r, f"nvidia-smi -i {r}", origin="pane:Preflight"))
        app.fleet._recorded(rec(2, "docker inspect ds41_r37", 1, origin="watcher"))
        app.fleet._recorded(rec(3, "printf 'HF_TOKEN=hf_abcdefghijkl'", 0))
        await pilot.pause()
        table = app.query_one("#commands-table", DataTable)
        assert table.row_count == 6
        assert table.cursor_row == 5                          # follows the newest
        assert "hf_abcdefghijkl" not in str(app.query_one("#commands-line", Static).render())
        await pilot.press("c")
        assert copied == ["printf 'HF_TOKEN=***'"]

        await pilot.press("r", "r", "r")                      # all → 0 → 1 → 2
        assert pane.rank == 2 and [x.rank for x in pane.listed] == [2, 2]
        await pilot.press("slash")
        assert isinstance(app.focused, Input)
        await pilot.press(*"docker", "enter")
        assert [x.command for x in pane.listed] == ["docker inspect ds41_r37"]
        assert app.focused is table
        await pilot.press("escape")
        assert pane.text == "" and len(pane.listed) == 2
        await pilot.press("r", "r", "r")                      # 2 → 3 → all → 0
        assert pane.rank == 0

        await pilot.press("r", "r", "r", "r")                 # 0 → 1 → 2 → 3 → all
        table.move_cursor(row=0)                              # scrolled up: no longer follows
        app.fleet._recorded(rec(0, "echo later"))
        await pilot.pause()
        assert table.row_count == 7
        assert table.cursor_row == 0
        await pilot.press("f")
        assert table.cursor_row == 6


async def test_pane_action_records_name_the_pane(demo_cluster) -> None:
    """Runs the Preflight pane's checks on the demo cluster (about 5 s)."""
    app = CockpitApp(demo_cluster.config, demo_cluster.config_path)
    async with app.run_test(size=(140, 36)) as pilot:
        assert await app.fleet.wait_connected(20)
        app.action_show_pane("preflight")
        await pilot.pause()
        await pilot.press("a")
        for _ in range(300):
            await asyncio.sleep(0.1)
            if any(r.origin == "pane:Preflight" and r.done for r in app.fleet.command_log):
                break
        origins = {r.origin for r in app.fleet.command_log}
        assert "pane:Preflight" in origins
        assert {"watcher", "stats sampler"} <= origins
        assert "" not in origins
        app.action_show_pane("commands")
        await pilot.pause()
        assert any(r.origin == "pane:Preflight" for r in app.query_one(CommandsPane).listed)
        await app.ctx.monitor.close()   # no stats round lands on a screen being torn down


async def test_at_the_cap_the_oldest_row_leaves_and_the_rest_stay(fixed_config) -> None:  # type: ignore[no-untyped-def]
    app = CockpitApp(fixed_config, connect=False)
    async with app.run_test(size=(140, 36)) as pilot:
        app.action_show_pane("commands")
        await pilot.pause()
        pane = app.query_one(CommandsPane)
        pane.records = deque(maxlen=4)
        table = app.query_one("#commands-table", DataTable)
        for i in range(6):
            app.fleet._recorded(rec(i % 4, f"cmd {i}", 1 if i in (0, 4) else 0))
        await pilot.pause()
        assert [r.command for r in pane.listed] == ["cmd 2", "cmd 3", "cmd 4", "cmd 5"]
        assert table.row_count == 4 and table.cursor_row == 3    # still following the newest
        assert pane.failed == 1                                  # cmd 0 failed and left; cmd 4 failed
        table.move_cursor(row=1)                                 # on "cmd 3": no longer following
        app.fleet._recorded(rec(0, "cmd 6"))
        await pilot.pause()
        assert [r.command for r in pane.listed] == ["cmd 3", "cmd 4", "cmd 5", "cmd 6"]
        assert pane.selected() is not None and pane.selected().command == "cmd 3"   # type: ignore[union-attr]
        pane.rebuild()
        assert pane.failed == 1 and table.row_count == 4
