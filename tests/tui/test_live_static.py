"""LiveStatic (cockpit/tui/widgets/live.py): a block redrawn every second costs nothing when it reads the
same, a repaint of itself when it changed but kept its height, and a layout of the screen only when its
height changed; a new theme draws it again (a role's colour is taken when the content is set)."""

from __future__ import annotations

from typing import Any

from rich.table import Table
from rich.text import Text
from textual.app import App, ComposeResult

from cockpit.tui.widgets.live import LiveStatic, Prerendered


class _Spy(LiveStatic):
    def __init__(self) -> None:
        super().__init__(id="live")
        self.calls: list[bool] = []          # layout flag of each refresh the widget asked for

    def refresh(self, *regions: Any, repaint: bool = True, layout: bool = False,
                recompose: bool = False) -> Any:
        self.calls.append(layout)
        return super().refresh(*regions, repaint=repaint, layout=layout, recompose=recompose)


class _App(App[None]):
    def compose(self) -> ComposeResult:
        yield _Spy()


def _table(*rows: tuple[str, str]) -> Table:
    table = Table(box=None)
    table.add_column("rank")
    table.add_column("°C", justify="right")
    for row in rows:
        table.add_row(*row)
    return table


async def test_same_content_draws_nothing_and_a_new_height_lays_out() -> None:
    app = _App()
    async with app.run_test(size=(60, 20)) as pilot:
        live = app.query_one(_Spy)
        live.update(_table(("0", "38")))
        await pilot.pause()
        live.calls.clear()
        live.update(_table(("0", "38")))               # the same lines: nothing
        live.update(Text("x"))                         # a text, then the same text: one draw
        live.update(Text("x"))
        assert live.calls == [True]                    # (one line after two: the height changed)
        live.calls.clear()
        live.update(Text("y"))                         # changed, same height: a repaint only
        assert live.calls == [False]
        live.calls.clear()
        live.update(_table(("0", "38")))               # taller again: a layout
        live.update(_table(("0", "39")))               # a figure changed: a repaint only
        live.update(_table(("0", "39"), ("1", "40")))  # a row more: a layout
        assert live.calls == [True, False, True]
        await pilot.pause()
        assert "40" in app.export_screenshot()


async def test_a_new_theme_draws_the_same_content_again() -> None:
    app = _App()
    async with app.run_test(size=(60, 20)) as pilot:
        live = app.query_one(_Spy)
        live.update(Text("ok", style="bold"))
        await pilot.pause()
        app.theme = "textual-light"
        await pilot.pause()
        live.calls.clear()
        live.update(Text("ok", style="bold"))
        assert live.calls == [False]


def test_prerendered_lines_are_the_tables_at_their_width_and_rendered_anew_at_another() -> None:
    from rich.console import Console
    console = Console(width=40, color_system=None)
    table = _table(("0", "38"))
    options = console.options.update_width(40)
    segments = list(console.render(table, options))
    pre = Prerendered(table, segments, 40)
    assert list(console.render(pre, options)) == segments
    narrow = console.options.update_width(12)
    assert list(console.render(pre, narrow)) == list(console.render(table, narrow))
