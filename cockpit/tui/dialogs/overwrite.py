"""The one overwrite dialog: `PATH exists. Overwrite it …?` — `y` overwrites, Esc or `n` keeps the file."""

from __future__ import annotations

from pathlib import Path

from textual.binding import Binding

from cockpit.safetext import safe
from cockpit.tui.dialogs.confirm import Confirm


class ConfirmOverwrite(Confirm):
    """Asks before a save replaces an existing file; dismisses with True to overwrite."""

    BINDINGS = [
        Binding("y", "answer(True)", "Overwrite", id="overwrite.yes"),
        Binding("escape,n", "answer(False)", "Keep", id="overwrite.no"),
    ]

    def __init__(self, path: str | Path, what: str = ""):
        question = f"{safe(str(path), 500)} exists. Overwrite it" + (f" with {what}?" if what else "?")
        super().__init__(question, yes="overwrite it", no="keep it")
        self.path = path
