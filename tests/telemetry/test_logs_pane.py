"""The logs pane inside the app: it never takes the active tab by itself, and digit keys reach the app."""

from __future__ import annotations

from textual.widgets import TabbedContent

from cockpit.telemetry.logs import LogLine
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
