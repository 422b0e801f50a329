"""TUI tests: a theme one test switches to is remembered in ui.json, never by the next test's app."""

from __future__ import annotations

import pytest


@pytest.fixture(autouse=True)
def own_ui_state(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path_factory.mktemp("tui-state")))
