"""Snapshot hygiene: no blinking cursor (a blink is caught on or off at random), and each snapshot in a
theme it names, never the one a developer picked last."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from textual.widgets import Input, TextArea


@pytest.fixture(autouse=True)
def own_ui_state(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    """A theme one snapshot switches to is remembered (ui.json): never by the next snapshot's app."""
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path_factory.mktemp("snap-state")))


@pytest.fixture(autouse=True)
def frozen_cursor(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Every Input and TextArea is created with its cursor steady."""
    for cls in (Input, TextArea):
        original = cls.__init__

        def steady(self, *args, __original=original, **kwargs) -> None:  # type: ignore[no-untyped-def]
            __original(self, *args, **kwargs)
            self.cursor_blink = False

        monkeypatch.setattr(cls, "__init__", steady)
    yield
