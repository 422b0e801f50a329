"""The key map (`?`): the shown pane's bindings and the app's, with their keys NOW and their ids."""

from __future__ import annotations

from collections.abc import Sequence

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import DataTable, Static

from cockpit.tui.keys import hints


class KeyMapScreen(ModalScreen[None]):
    BINDINGS = [Binding("escape,q,question_mark", "dismiss", "Close", id="keys.close")]
    DEFAULT_CSS = """
    KeyMapScreen { align: center middle; }
    KeyMapScreen > Vertical { width: 96; max-width: 98%; height: auto; max-height: 95%; border: round $accent;
                              background: $surface; padding: 0 1; }
    KeyMapScreen DataTable { height: auto; max-height: 40; }
    """

    def __init__(self, sections: Sequence[tuple[str, Sequence[tuple[str, str, str]]]]):
        """`sections`: (title, rows of (key, action, binding id)) — the shown pane first, then the app."""
        super().__init__()
        self.sections = sections

    def compose(self) -> ComposeResult:
        with Vertical():
            yield Static(Text.assemble(("Keys", "bold"), " — remap one with ", ("[ui.keymap]", "bold"),
                                       " in cluster.toml: ", ("id = \"key\"", "command")), markup=False)
            table: DataTable[Text | str] = DataTable(cursor_type="row", id="keymap-table")
            table.add_columns("key", "action", "id")
            for title, rows in self.sections:
                table.add_row(Text(title, style="accent"), "", "")
                for key, action, ident in rows:
                    table.add_row(Text(key, style="bold"), action, Text(ident, style="muted"))
            yield table
            yield Static(hints(self), markup=False)
