"""A Static for content redrawn every second: what did not change costs nothing, what changed but kept
its height costs a repaint of this widget only.

Textual's `Static.update` lays out the whole screen by default (each widget's height is measured by
rendering it): a pane that redraws its ages and figures every second paid that layout each second for
every block it showed (`perf/watch_cost.py`: the Stats pane at rest spent half its time in
`Screen._refresh_layout`). Here the new content's height at the widget's width is measured first, and
the screen is laid out only when that height differs from the last one, or the width is not known yet.
"""

from __future__ import annotations

from rich.console import Console, Group, RenderableType
from rich.padding import Padding
from rich.table import Table
from rich.text import Text
from textual.visual import VisualType
from textual.widgets import Static


def content_height(console: Console, renderable: RenderableType, width: int) -> int:
    """Lines `renderable` takes at `width` cells, measured as Textual measures a Static's content."""
    if isinstance(renderable, Text):
        return len(Text(renderable.plain).wrap(console, width, no_wrap=renderable.no_wrap,
                                               tab_size=renderable.tab_size or 8))
    options = console.options.update_width(width).update(highlight=False)
    return sum(text.count("\n") for text, _, _ in console.render(renderable, options))


RENDERABLES = (Text, Table, Group, Padding)
"""The Rich renderables the panes show, measured here (anything else is laid out by Textual)."""


class LiveStatic(Static):
    """`update(content)` that skips content equal to what is shown in the same theme (a `Text` or `str`;
    other renderables have no equality and are always drawn), and lays the screen out only when the
    height changes."""

    def __init__(self, content: VisualType = "", **kwargs: object) -> None:
        super().__init__(content, **kwargs)  # type: ignore[arg-type]
        self._live_content: VisualType | None = None
        self._live_size: tuple[int, int] | None = None      # (width, height) of the content shown
        self._live_theme = ""                                # the app's theme when it was set

    def update(self, content: VisualType = "", *, layout: bool | None = None) -> None:
        """Show `content`; `layout` forces (True) or skips (False) the layout, None decides by height."""
        theme = self.app.theme if self.is_attached else ""
        if layout is None and isinstance(content, (str, Text)) and self._live_content is not None \
                and type(content) is type(self._live_content) and content == self._live_content \
                and theme == self._live_theme:
            return                  # (a role's colour is taken when the content is set: a new theme draws)
        width = self.content_size.width
        size: tuple[int, int] | None = None
        # a str may be markup, a Textual Content is not Rich's: measured by Textual's layout
        if layout is None and width > 0 and self.is_mounted and isinstance(content, RENDERABLES):
            size = (width, content_height(self.app.console, content, width))
        relayout = layout if layout is not None else (size is None or size != self._live_size)
        self._live_content = content if isinstance(content, (str, Text)) else None
        self._live_theme = theme
        self._live_size = size
        super().update(content, layout=relayout)
