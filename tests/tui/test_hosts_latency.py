"""The Hosts pane draws a latency change alone at most once per LATENCY_EVERY, every host's at once (each
change of a cell redraws the whole table: perf/watch_cost.py); any other change of a row is drawn at once,
with the row's latency of the moment."""

from __future__ import annotations

import time

from textual.widgets import DataTable
from tuihelpers import report_status

from cockpit.hosts import HostStatus
from cockpit.hosts.state import HostState
from cockpit.tui.app import CockpitApp
from cockpit.tui.panes.hosts import HostsPane


def _status(rank: int, latency: float, state: HostState = HostState.CONNECTED) -> HostStatus:
    return HostStatus(rank=rank, target=f"spark-{rank}", state=state, latency_ms=latency,
                      hostname=f"spark-{rank}", fingerprint="SHA256:abc", since=time.time())


def _latency(app: CockpitApp, rank: int) -> str:
    return str(app.query_one("#hosts-table", DataTable).get_cell(str(rank), "latency"))


async def test_a_latency_change_alone_waits_for_one_draw_of_all_hosts(fixed_config) -> None:
    app = CockpitApp(fixed_config, connect=False)
    async with app.run_test(size=(130, 30)) as pilot:
        for rank in (0, 1):
            report_status(app, _status(rank, 3.0))
        await pilot.pause()
        assert (_latency(app, 0), _latency(app, 1)) == ("3.0 ms", "3.0 ms")   # a new row: drawn at once
        report_status(app, _status(0, 7.5))
        report_status(app, _status(1, 9.0))
        await pilot.pause()
        assert (_latency(app, 0), _latency(app, 1)) == ("3.0 ms", "3.0 ms")   # held
        app.query_one(HostsPane)._draw_latencies()          # the pane's LATENCY_EVERY timer
        await pilot.pause()
        assert (_latency(app, 0), _latency(app, 1)) == ("7.5 ms", "9.0 ms")


async def test_a_state_change_is_drawn_at_once_with_its_latency(fixed_config) -> None:
    app = CockpitApp(fixed_config, connect=False)
    async with app.run_test(size=(130, 30)) as pilot:
        report_status(app, _status(0, 3.0))
        await pilot.pause()
        report_status(app, _status(0, 4.0))                  # held …
        report_status(app, _status(0, 5.0, HostState.LOST))  # … until the row changes otherwise
        await pilot.pause()
        table = app.query_one("#hosts-table", DataTable)
        assert str(table.get_cell("0", "state")).startswith("lost")
        assert _latency(app, 0) == "5.0 ms"
        assert app.query_one(HostsPane)._latency_held == set()
