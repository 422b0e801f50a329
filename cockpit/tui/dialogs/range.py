"""Asks for a time range (the Stats pane's chosen history window): from and until, in the times
`r37-cockpit events --since` takes (15m / 2h / 3d ago, HH:MM today, YYYY-MM-DD[ HH:MM[:SS]], epoch
seconds); until empty: now. Enter in "from" moves to "until", Enter in "until" accepts, Esc cancels
(dismisses with (from, until) as typed, or None)."""

from __future__ import annotations

from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import Input, Static

from cockpit.tui.keys import hints

TIMES = "15m / 2h / 3d (ago), HH:MM (today), YYYY-MM-DD[ HH:MM[:SS]]"


class RangePrompt(ModalScreen[tuple[str, str] | None]):
    BINDINGS = [Binding("escape", "cancel", "Cancel", id="range.cancel")]
    DEFAULT_CSS = """
    RangePrompt { align: center middle; }
    RangePrompt > Vertical { width: 80; max-width: 95%; height: auto; border: round $accent;
                             background: $surface; padding: 0 1; }
    """

    def __init__(self, since: str = "1h", until: str = "") -> None:
        super().__init__()
        self.since, self.until = since, until

    def compose(self) -> ComposeResult:
        with Vertical():
            yield Static(f"History range — {TIMES}", markup=False)
            yield Static("from", markup=False)
            yield Input(value=self.since, id="range-from")
            yield Static("until (empty: now)", markup=False)
            yield Input(value=self.until, id="range-until")
            keys = hints(self, ("cancel",))
            keys.append(" · ")
            keys.append("enter", style="bold")
            keys.append(" next / accept")
            yield Static(keys, markup=False)

    @on(Input.Submitted, "#range-from")
    def _from(self) -> None:
        self.query_one("#range-until", Input).focus()

    @on(Input.Submitted, "#range-until")
    def _until(self) -> None:
        since = self.query_one("#range-from", Input).value.strip()
        if not since:
            self.query_one("#range-from", Input).focus()
            return
        self.dismiss((since, self.query_one("#range-until", Input).value.strip()))

    def action_cancel(self) -> None:
        self.dismiss(None)
