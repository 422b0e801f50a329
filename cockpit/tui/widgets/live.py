"""A Static for content redrawn every second: what did not change costs nothing, what changed but kept
its height costs a repaint of this widget only.

Textual's `Static.update` lays out the whole screen by default (each widget's height is measured by
rendering it): a pane that redraws its ages and figures every second paid that layout each second for
every block it showed (`perf/watch_cost.py`: the Stats pane at rest spent half its time in
`Screen._refresh_layout`). Here a Rich table or group is rendered once, at the widget's width: when its
lines equal the ones shown nothing is drawn; else the lines are handed to Textual as they are
(`Prerendered`, not rendered a second time), and the screen is laid out only when their number changed.
A `Text` is compared as it is and measured as Textual measures it.
"""

from __future__ import annotations

from collections.abc import Iterator

from rich.console import Console, ConsoleOptions, Group, RenderableType
from rich.measure import Measurement
from rich.padding import Padding
from rich.segment import Segment
from rich.table import Table
from rich.text import Text
from textual.visual import VisualType
from textual.widgets import Static

PRERENDERED = (Table, Group, Padding)
"""The Rich renderables rendered here once per update (a `Text` is compared as it is)."""


class Prerendered:
    """A renderable already rendered at `width`: its segments again, or at another width (a resize
    before the next update) the source rendered anew."""

    def __init__(self, source: RenderableType, segments: list[Segment], width: int) -> None:
        self.source, self.segments, self.width = source, segments, width

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> Iterator[Segment]:
        if options.max_width == self.width:
            yield from self.segments
        else:
            yield from console.render(self.source, options)

    def __rich_measure__(self, console: Console, options: ConsoleOptions) -> Measurement:
        return Measurement(self.width, self.width) if options.max_width == self.width \
            else Measurement.get(console, options, self.source)


def text_height(console: Console, text: Text, width: int) -> int:
    """Lines `text` takes at `width` cells, measured as Textual measures a Static's text."""
    return len(Text(text.plain).wrap(console, width, no_wrap=text.no_wrap, tab_size=text.tab_size or 8))


class LiveStatic(Static):
    """`update(content)` that draws nothing when the content is what is shown (a `Text` or `str` equal
    to it, a table or group whose rendered lines are equal; in the same theme and width), and lays the
    screen out only when the height changes. `layout=True|False` forces Static's own behaviour."""

    def __init__(self, content: VisualType = "", **kwargs: object) -> None:
        super().__init__(content, **kwargs)  # type: ignore[arg-type]
        self._live_key: object = None       # what is shown: the text, or the rendered segments
        self._live_size: tuple[int, int] | None = None      # (width, height) of the content shown
        self._live_theme = ""                               # the app's theme when it was set

    def update(self, content: VisualType = "", *, layout: bool | None = None) -> None:
        """Show `content`; `layout` forces (True) or skips (False) the layout, None decides by height."""
        if layout is not None:
            self._live_key = self._live_size = None
            super().update(content, layout=layout)
            return
        theme = self.app.theme if self.is_attached else ""     # a role's colour is taken when set
        width = self.content_size.width if self.is_mounted else 0
        key: object = content if isinstance(content, (str, Text)) else None
        size: tuple[int, int] | None = None
        shown: VisualType = content
        if width > 0 and isinstance(content, PRERENDERED):
            options = self.app.console_options.update(highlight=False).update_width(width)
            segments = list(self.app.console.render(content, options))
            key, size = segments, (width, sum(seg.text.count("\n") for seg in segments))
            shown = Prerendered(content, segments, width)
        elif width > 0 and isinstance(content, Text):
            size = (width, text_height(self.app.console, content, width))
        if key is not None and key == self._live_key and theme == self._live_theme \
                and (size is None or size == self._live_size):
            return
        # a str may be markup and a Textual Content is not Rich's: their height is Textual's to measure
        relayout = size is None or size != self._live_size
        self._live_key, self._live_size, self._live_theme = key, size, theme
        super().update(shown, layout=relayout)
