"""Cells in aligned columns as plain Rich `Text` lines: a table redrawn every second, at a fraction of
what a Rich `Table` costs to render.

A Rich `Table` measures and renders every cell through a padding and a console pass each time: the
Stats pane's 16-rank table took 8 ms a draw (`perf/watch_cost.py --hosts 16`). `grid` lays the same
cells out as `Table(box=None, padding=(0, 1, 0, 0), pad_edge=False, expand=False)` does while they fit
(each column as wide as its widest cell, within its `min_width`/`max_width`, one space between
columns, the header row bold); when they do not fit, the columns that may be cut (`cut=True`) give way,
the widest first, and a cell longer than its column ends in "…".
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from rich.cells import cell_len
from rich.text import Span, Text


@dataclass(frozen=True, slots=True)
class Column:
    header: str
    right: bool = False          # right-justified (figures)
    min_width: int = 0
    max_width: int | None = None
    cut: bool = False            # gives way first when the row is wider than the screen


def widths(columns: Sequence[Column], rows: Sequence[Sequence[Text]], width: int) -> list[int]:
    """Each column's width: its widest cell (header included) within its bounds, cut to fit `width`."""
    out = []
    for i, col in enumerate(columns):
        w = max(col.min_width, len(col.header), *(row[i].cell_len for row in rows))
        out.append(min(w, col.max_width) if col.max_width is not None else w)
    excess = sum(out) + len(out) - 1 - width
    cuttable = [i for i, col in enumerate(columns) if col.cut]
    while excess > 0 and cuttable:
        widest = max(cuttable, key=lambda i: out[i])
        floor = max(columns[widest].min_width, 1)
        if out[widest] <= floor:
            cuttable.remove(widest)
            continue
        out[widest] -= 1
        excess -= 1
    return out


def grid(columns: Sequence[Column], rows: Sequence[Sequence[Text]], width: int,
         header_style: str = "bold") -> Text:
    """The header and rows as lines of cells padded to their column's width (cells are not changed)."""
    sizes = widths(columns, rows, width)
    lines = [_line([Text(c.header, style=header_style) for c in columns], columns, sizes, header_style)]
    lines.extend(_line(row, columns, sizes) for row in rows)
    out = Text("\n").join(lines)
    out.end = "\n"
    return out


def _line(cells: Sequence[Text], columns: Sequence[Column], sizes: Sequence[int],
          sep_style: str = "") -> Text:
    """One line: its text and spans built directly (a `Text.append` per cell cost twice as much)."""
    parts: list[str] = []
    spans: list[Span] = []
    pos = 0
    last = len(cells) - 1
    for i, (cell, col, size) in enumerate(zip(cells, columns, sizes, strict=True)):
        plain = cell.plain.rstrip() if col.right else cell.plain   # Rich right-justifies a stripped line
        room = size - cell_len(plain)
        inner: Sequence[Span] = ()
        if room >= 0 and not cell.spans:       # most cells: one style, fits: its text padded
            text = " " * room + plain if col.right else plain + " " * room
            style = cell.style
        else:
            cut = cell.copy()
            if col.right:
                cut.rstrip()
            cut.truncate(size, overflow="ellipsis", pad=not col.right)
            if col.right and cut.cell_len < size:
                cut.pad_left(size - cut.cell_len)
            text, style, inner = cut.plain, cut.style, cut.spans
        if style:
            spans.append(Span(pos, pos + len(text), style))
        spans.extend(span.move(pos) for span in inner)
        parts.append(text)
        pos += len(text)
        if i < last:
            if sep_style:
                spans.append(Span(pos, pos + 1, sep_style))
            parts.append(" ")
            pos += 1
    return Text("".join(parts), spans=spans, end="")
