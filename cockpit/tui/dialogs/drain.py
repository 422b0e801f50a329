"""The drain countdown before a stop: rank 0's requests under way and the seconds left of the wait.

The Launch pane runs the wait (`cockpit.recipe.stop.drain`) and feeds this dialog its figures
(`show`); the operator may cut the wait short (`s`/Enter: stop now, the answers under way are cut) or
cancel the stop (Esc: nothing is stopped). The pane dismisses it with the wait's end when the requests
finished or the limit ran out. Dismissed with "cut", "cancel", or the drain outcome the pane passes.
"""

from __future__ import annotations

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import Static

from cockpit.recipe.stop import InFlight
from cockpit.tui.keys import hints


class DrainDialog(ModalScreen[str]):
    """"Waiting for rank 0's requests to finish before stopping": the requests, a countdown bar."""

    BINDINGS = [
        Binding("enter,s", "stop_now", "Stop now (cut the answers)", id="drain.stop_now"),
        Binding("escape", "cancel", "Cancel the stop", id="drain.cancel"),
    ]
    DEFAULT_CSS = """
    DrainDialog { align: center middle; }
    DrainDialog > Vertical { width: 90; max-width: 95%; height: auto; border: thick $warning;
                             background: $surface; padding: 0 1; }
    DrainDialog .drain-title { text-style: bold; padding-bottom: 1; }
    DrainDialog #drain-then { padding-top: 1; }
    DrainDialog #drain-keys { padding-top: 1; }
    """

    def __init__(self, limit_s: float, first: InFlight, commands: list[tuple[str, str]]) -> None:
        super().__init__()
        self.limit_s = max(1e-9, limit_s)
        self.left_s = limit_s
        self.requests = first
        self.commands = commands

    def compose(self) -> ComposeResult:
        with Vertical():
            yield Static(Text("Waiting for rank 0's requests to finish before stopping"),
                         classes="drain-title")
            yield Static(self._state_text(), id="drain-state", markup=False)
            then = "then: " + "; ".join(line for _, line in self.commands)
            yield Static(Text(then, style="muted"), id="drain-then", markup=False)
            yield Static(hints(self, ("stop_now", "cancel")), id="drain-keys", markup=False)

    def _state_text(self) -> Text:
        return Text.assemble(("requests under way: ", "muted"), (self.requests.text(), "bold"),
                             ("   time left: ", "muted"), (f"{self.left_s:.0f} s", "warn.soft"),
                             (f" of {self.limit_s:g} s", "muted"))

    def show(self, left_s: float, requests: InFlight) -> None:
        """The wait's latest figures (the pane calls this after every /metrics read)."""
        self.left_s, self.requests = max(0.0, left_s), requests
        if self.is_mounted:
            self.query_one("#drain-state", Static).update(self._state_text())

    def action_stop_now(self) -> None:
        self.dismiss("cut")

    def action_cancel(self) -> None:
        self.dismiss("cancel")
