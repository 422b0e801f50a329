"""The key map screen (`?`): every active binding with its id, so it can be remapped in config."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import DataTable, Static


class KeyMapScreen(ModalScreen[None]):
    BINDINGS = [Binding("escape,q,question_mark", "dismiss", "Close", id="keys.close")]
    DEFAULT_CSS = """
    KeyMapScreen { align: center middle; }
    KeyMapScreen > Vertical { width: 80; height: auto; max-height: 90%; border: round $accent;
                              background: $surface; padding: 0 1; }
    """

    def __init__(self, rows: list[tuple[str, str, str]]):
        super().__init__()
        self._rows = rows

    def compose(self) -> ComposeResult:
        with Vertical():
            yield Static("Keys — remap with [ui.keymap] in cluster.toml (id = \"key\")", markup=False)
            table: DataTable[str] = DataTable(cursor_type="row")
            table.add_columns("key", "action", "id")
            for row in self._rows:
                table.add_row(*row)
            yield table
