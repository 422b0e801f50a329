"""Saving a log view from the Logs pane goes to the state directory (`<state>/logs/<time>-<view>.log`)
unless the operator names another file, and the message says where it went."""

from __future__ import annotations

from pathlib import Path

import pytest

from cockpit.locations import logs_save_dir
from cockpit.telemetry.logline import LogLine
from cockpit.tui.app import CockpitApp
from cockpit.tui.panes.logs import LogsPane


async def test_the_default_file_is_in_the_state_directory(fixed_config, tmp_path: Path,  # type: ignore[no-untyped-def]
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    from textual.widgets import Input, Tabs

    from cockpit.tui.dialogs import PathPrompt

    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    monkeypatch.chdir(tmp_path)
    app = CockpitApp(fixed_config, connect=False)
    async with app.run_test(size=(120, 30)) as pilot:
        app.action_show_pane("logs")
        await pilot.pause()
        pane = app.query_one(LogsPane)
        pane.ingest(0, [LogLine(1_795_993_157_000_000_000 + i, 0, f"INFO step {i}") for i in range(5)])
        pane.flush(now=True)
        pane.query_one("#logs-tabs", Tabs).active = "r0"
        await pilot.pause()
        await pilot.press("s")
        await pilot.pause()
        assert isinstance(app.screen, PathPrompt)
        default = Path(app.screen.query_one(Input).value)
        assert default.parent == logs_save_dir() == tmp_path / "state" / "r37-cockpit" / "logs"
        assert default.name.endswith("-rank0.log") and not logs_save_dir().exists()
        await pilot.press("enter")
        for _ in range(100):
            if "saved" in pane.message:
                break
            await pilot.pause(0.02)
        assert pane.message == f"saved 5 lines to {default}"
        assert default.read_text().count("\n") == 5 and list(tmp_path.glob("*.log")) == []
        assert logs_save_dir().stat().st_mode & 0o777 == 0o700
