"""Asks for a file path: Enter accepts, Esc cancels (dismisses with the path, or None)."""

from __future__ import annotations

from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import Input, Static

from cockpit.tui.keys import hints


class PathPrompt(ModalScreen[str | None]):
    BINDINGS = [Binding("escape", "cancel", "Cancel", id="prompt.cancel")]
    DEFAULT_CSS = """
    PathPrompt { align: center middle; }
    PathPrompt > Vertical { width: 90; max-width: 95%; height: auto; border: round $accent;
                            background: $surface; padding: 0 1; }
    """

    def __init__(self, question: str, default: str):
        super().__init__()
        self.question, self.default = question, default

    def compose(self) -> ComposeResult:
        with Vertical():
            yield Static(self.question, markup=False)
            yield Input(value=self.default, id="prompt-path")
            keys = hints(self, ("cancel",))
            keys.append(" · ")
            keys.append("enter", style="bold")
            keys.append(" accept")
            yield Static(keys, markup=False)

    @on(Input.Submitted)
    def _submitted(self, event: Input.Submitted) -> None:
        self.dismiss(event.value.strip() or None)

    def action_cancel(self) -> None:
        self.dismiss(None)
