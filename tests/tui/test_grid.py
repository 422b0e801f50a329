"""`grid` lays cells out as the Rich table it replaces in the Stats pane (a differential test against
`rich.table.Table` while the cells fit), and when they do not fit the cut columns give way with "…"."""

from __future__ import annotations

import io

from hypothesis import given, settings
from hypothesis import strategies as st
from rich.console import Console, RenderableType
from rich.table import Table
from rich.text import Text

from cockpit.tui.widgets.grid import Column, grid, widths

STYLES = ("", "bold", "red", "dim", "green on black")
CELL = st.builds(Text, st.text(alphabet="ab 0.9–°▁█↑/%", min_size=0, max_size=12),
                 style=st.sampled_from(STYLES))
COLUMNS = st.lists(st.builds(Column, st.text(alphabet="xyz °", min_size=1, max_size=8), st.booleans(),
                             st.integers(0, 6), st.one_of(st.none(), st.integers(6, 14))),
                   min_size=1, max_size=6)


def shown(renderable: RenderableType, width: int) -> str:
    console = Console(width=width, file=io.StringIO(), record=True, color_system="truecolor",
                      force_terminal=True)
    console.print(renderable)
    return console.export_text(styles=True)


def rich_table(columns: list[Column], rows: list[list[Text]]) -> Table:
    table = Table(box=None, padding=(0, 1, 0, 0), pad_edge=False, expand=False, show_edge=False,
                  header_style="bold")
    for c in columns:
        table.add_column(c.header, justify="right" if c.right else "left", no_wrap=True,
                         min_width=c.min_width or None, max_width=c.max_width, overflow="ellipsis")
    for row in rows:
        table.add_row(*row)
    return table


@settings(max_examples=150, deadline=None)
@given(COLUMNS, st.data())
def test_grid_matches_the_rich_table_while_the_cells_fit(columns: list[Column], data: st.DataObject) -> None:
    rows = data.draw(st.lists(st.lists(CELL, min_size=len(columns), max_size=len(columns)), max_size=5))
    assert shown(grid(columns, rows, 200), 200) == shown(rich_table(columns, rows), 200)


def test_a_cell_with_spans_keeps_them() -> None:
    cell = Text.assemble(("▸", "cyan"), ("3", "bold"), ("▶", "red"))
    columns = [Column("rank", min_width=3), Column("W", right=True, min_width=5)]
    rows = [[cell, Text("41.5", style="dim")]]
    assert shown(grid(columns, rows, 80), 80) == shown(rich_table(columns, rows), 80)


def test_too_wide_the_cut_columns_give_way_widest_first() -> None:
    columns = [Column("rank"), Column("memory", cut=True), Column("RDMA", cut=True), Column("W", right=True)]
    rows = [[Text("0"), Text("24.5/120 GiB eng 88.2 unified"), Text("↑24.9 ↓24.1 Gb/s"), Text("41.5")]]
    assert widths(columns, rows, 40) == [4, 14, 15, 4]     # memory (29) gave way first, then both by turns
    lines = grid(columns, rows, 40).plain.splitlines()
    assert [len(line) for line in lines] == [40, 40]
    assert lines[1] == "0    24.5/120 GiB … ↑24.9 ↓24.1 Gb… 41.5"
    assert widths(columns, rows, 12) == [4, 1, 1, 4]        # never below one cell; the others keep whole
