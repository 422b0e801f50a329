"""A scrollable text in a modal (a check's detail: commands, raw output, remedy); Esc, Enter or `q` close."""

from __future__ import annotations

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Static


class Detail(ModalScreen[None]):
    BINDINGS = [Binding("escape,enter,q", "dismiss", "Close", id="detail.close")]
    DEFAULT_CSS = """
    Detail { align: center middle; }
    Detail > VerticalScroll { width: 90%; height: 85%; border: round $accent; background: $surface;
                              padding: 0 1; }
    """

    def __init__(self, text: Text, *, id: str | None = None):
        super().__init__(id=id)
        self.text = text

    def compose(self) -> ComposeResult:
        with VerticalScroll():
            yield Static(self.text, id="detail-text", markup=False)
