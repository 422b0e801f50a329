"""The logs pane inside the app: it never takes the active tab by itself, and digit keys reach the app."""

from __future__ import annotations

from textual.widgets import TabbedContent

from cockpit.telemetry.logline import LogLine
from cockpit.tui.app import CockpitApp
from cockpit.tui.panes.logs import LogsPane
from cockpit.tui.widgets.logview import LogView

T0 = 1_795_993_157_000_000_000


async def test_logs_pane_does_not_steal_the_tab_and_digits_switch_panes(fixed_config) -> None:  # type: ignore[no-untyped-def]
    app = CockpitApp(fixed_config, connect=False)
    async with app.run_test(size=(130, 34)) as pilot:
        await pilot.pause(0.3)
        tabs = app.query_one(TabbedContent)
        assert tabs.active == "hosts"
        assert not isinstance(app.focused, LogView)
        await pilot.press("5")
        await pilot.pause(0.2)
        assert tabs.active == "logs"
        pane = app.query_one(LogsPane)
        assert app.focused is pane.view  # the view has the keys: scrolling works at once
        pane.ingest(0, [LogLine(T0 + i, 0, f"line {i}") for i in range(100)])
        pane.flush(now=True)
        await pilot.pause()
        await pilot.press("1")
        await pilot.pause(0.2)
        assert tabs.active == "hosts"
        assert app.focused is None or pane not in app.focused.ancestors
        await pilot.press("5")
        await pilot.pause(0.2)
        assert tabs.active == "logs" and app.focused is pane.view


async def test_flush_moves_bounded_slices_and_counts_an_overflowing_inbox(fixed_config) -> None:  # type: ignore[no-untyped-def]
    from cockpit.tui.panes.logs import MAX_PER_FLUSH

    app = CockpitApp(fixed_config, connect=False)
    async with app.run_test(size=(130, 34)) as pilot:
        await pilot.press("5")
        pane = app.query_one(LogsPane)
        total = MAX_PER_FLUSH * 2
        for rank in (0, 1):
            pane.ingest(rank, [LogLine(T0 + i * 10 + rank, rank, f"r{rank} {i}") for i in range(total // 2)])
        before = pane.flushed
        pane.flush(now=True)
        assert 0 < pane.flushed - before <= MAX_PER_FLUSH
        while pane.queued:
            pane.flush(now=True)
        merged = list(pane.store.merged)
        assert len(merged) == total and merged == sorted(merged) and pane.store.late_lines == 0
        small = LogsPane(app.ctx, capacity=10, autostart=False)
        small.ingest(2, [LogLine(T0 + i, 2, str(i)) for i in range(25)])
        assert small._incoming[2].lost == 15 and len(small._incoming[2]) == 10


async def test_first_error_is_found_in_the_compact_store_and_marked(fixed_config) -> None:  # type: ignore[no-untyped-def]
    app = CockpitApp(fixed_config, connect=False)
    async with app.run_test(size=(130, 34)) as pilot:
        await pilot.press("5")
        pane = app.query_one(LogsPane)
        for rank in range(4):
            lines = [LogLine(T0 + i * 100 + rank, rank, f"INFO step {i}") for i in range(20_000)]
            if rank == 2:
                lines[12_345] = LogLine(lines[12_345].ts, 2, "NCCL WARN NET/IB : Got completion from peer")
            pane.ingest(rank, lines)
        while pane.queued:
            pane.flush(now=True)
        await pilot.press("e")
        for _ in range(100):
            await pilot.pause(0.05)
            if pane.view.marked is not None:
                break
        marked = pane.view.marked
        assert marked is not None and marked.rank == 2 and "NCCL WARN" in marked.text
        index = pane.store.merged.index(marked)
        assert pane.view.top_index <= index < pane.view.top_index + pane.view.size.height
        assert f"failure at line {index + 1}" in pane.message


PROBE = 'INFO:     127.0.0.1:44562 - "GET /health?r37-cockpit=probe HTTP/1.1" 200 OK'
OWN = 'INFO:     127.0.0.1:44570 - "GET /health HTTP/1.1" 200 OK'


async def test_the_cockpits_probe_lines_are_dropped_unless_asked_for(fixed_config) -> None:  # type: ignore[no-untyped-def]
    app = CockpitApp(fixed_config, connect=False)
    async with app.run_test(size=(160, 40)) as pilot:
        await pilot.press("5")
        pane = app.query_one(LogsPane)
        pane.ingest(0, [LogLine(T0, 0, PROBE), LogLine(T0 + 1, 0, OWN), LogLine(T0 + 2, 0, PROBE)])
        pane.flush(now=True)
        assert [ln.text for ln in pane.store.merged] == [OWN]     # an operator's own /health stays
        assert "cockpit probes hidden" in pane.status_text().plain
        await pilot.press("p")
        assert "cockpit probes shown" in pane.status_text().plain
        assert "kept from now on" in pane.message
        pane.ingest(0, [LogLine(T0 + 3, 0, PROBE)])
        pane.flush(now=True)
        assert [ln.text for ln in pane.store.merged] == [OWN, PROBE]
        await pilot.press("p")
        pane.ingest(0, [LogLine(T0 + 4, 0, PROBE)])
        pane.flush(now=True)
        assert len(pane.store.merged) == 2


async def test_a_quiet_log_pane_sleeps_and_a_line_wakes_it(fixed_config) -> None:  # type: ignore[no-untyped-def]
    app = CockpitApp(fixed_config, connect=False)
    async with app.run_test(size=(160, 40)) as pilot:
        await pilot.press("5")
        pane = app.query_one(LogsPane)
        await pilot.pause(0.3)
        asleep = pane.ticks
        await pilot.pause(0.5)            # ten ticks of 50 ms if the timer ran
        assert pane.ticks == asleep
        pane.ingest(1, [LogLine(T0, 1, "INFO engine up")])
        for _ in range(40):
            await pilot.pause(0.05)
            if len(pane.view.source):
                break
        assert [ln.text for ln in pane.store.merged] == ["INFO engine up"] and len(pane.view.source) == 1
        await pilot.pause(0.5)            # shown, status drawn: asleep again
        woke = pane.ticks
        await pilot.pause(0.5)
        assert pane.ticks == woke and "merged: 1 line" in pane.status_text().plain
