"""A status line of parts packed to its width: a part (a key hint, a counter) never breaks across lines.

A pane's status gives rows of parts with a separator each; at 160 columns a row is one line, at 80 it
flows onto as many as it needs, and the widget takes that height. It repaints without a layout (a
Static's update lays out the whole screen, too costly while a log streams) unless the number of lines
it needs changes.
"""

from __future__ import annotations

from collections.abc import Sequence

from rich.text import Text
from textual.widget import Widget

Row = tuple[Sequence[Text], str]
"""The parts of a row and the separator between them ("  ", " · ")."""


def pack(parts: Sequence[Text], separator: str, width: int) -> list[Text]:
    """`parts` joined by `separator` (muted) into lines of at most `width` cells, never breaking a part
    (one wider than a line stands on its own, and wraps)."""
    lines: list[Text] = []
    line: Text | None = None
    for part in parts:
        if not part.plain:
            continue
        if line is not None and line.cell_len + len(separator) + part.cell_len <= width:
            line.append(separator, style="muted")
            line.append_text(part)
            continue
        if line is not None:
            lines.append(line)
        line = part.copy()
    if line is not None:
        lines.append(line)
    return lines


class StatusLine(Widget):
    """Rows of parts, packed to the width; as high as the packed lines."""

    DEFAULT_CSS = "StatusLine { height: 1; }"

    def __init__(self, *, id: str | None = None, classes: str | None = None):
        super().__init__(id=id, classes=classes)
        self._rows: list[Row] = []
        self._text = Text()
        self._width = 0
        self.lines = 1

    @property
    def text(self) -> Text:
        """What the line shows now (its packed lines)."""
        return self._text

    def show(self, rows: Sequence[Row]) -> None:
        self._rows = list(rows)
        self._pack()

    def _pack(self) -> None:
        width = self.content_size.width or max(self.app.size.width - 2, 20)
        lines = [line for parts, sep in self._rows for line in pack(parts, sep, width)]
        text = Text("\n").join(lines)
        if text == self._text and width == self._width:
            return                          # the same line again (each second, on most panes): no repaint
        self._text, self._width = text, width
        needed = max(1, len(self._text.wrap(self.app.console, width)))
        if needed != self.lines:
            self.lines = needed
            self.styles.height = needed
        self.refresh()

    def on_resize(self) -> None:
        self._pack()

    def render(self) -> Text:
        return self._text
