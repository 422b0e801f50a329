"""A virtualised log view: renders only the rows on screen from a (very long) line source.

The source is anything with `__len__` and `entry(i) -> (LogLine | None, kind)`; a frame renders the
visible window only, so the cost is per frame, not per line. Scrolling is in source lines (also when
wrapping: the top line is wrapped downwards, or, when following, the last lines upwards). Any scroll that
leaves the bottom pauses following; `new_lines` counts what arrived since.
"""

from __future__ import annotations

from typing import Protocol

from rich.segment import Segment
from rich.style import Style
from textual.geometry import Size
from textual.message import Message
from textual.scroll_view import ScrollView
from textual.strip import Strip

from cockpit.telemetry.logfilter import CONTEXT, MATCH, SEPARATOR, LineFilter, Signatures
from cockpit.telemetry.logs import LogLine, short_timestamp

PLAIN = 0
RANK_STYLES = [Style(color=c, bold=True) for c in ("cyan", "magenta", "yellow", "green", "blue", "red")]
TS_STYLE = Style(dim=True)
FAILURE_STYLE = Style(color="red", bold=True)
PHASE_STYLE = Style(color="bright_cyan")
CONTEXT_STYLE = Style(dim=True)
MATCH_STYLE = Style(reverse=True)
SEPARATOR_STYLE = Style(dim=True)
MARK_STYLE = Style(bgcolor="grey23")


class LineSource(Protocol):
    def __len__(self) -> int: ...

    def entry(self, index: int) -> tuple[LogLine | None, int]: ...


class EmptySource:
    def __len__(self) -> int:
        return 0

    def entry(self, index: int) -> tuple[LogLine | None, int]:
        raise IndexError(index)


class LogView(ScrollView, can_focus=True):
    """Rows of `rank  HH:MM:SS.ffffff  text`, plain text only (never markup)."""

    DEFAULT_CSS = """
    LogView { height: 1fr; background: $surface; }
    """

    def __init__(self, *, signatures: Signatures | None = None, **kwargs: object):
        super().__init__(**kwargs)  # type: ignore[arg-type]
        self.source: LineSource = EmptySource()
        self.signatures = signatures or Signatures()
        self.show_rank = True
        self.show_timestamps = True
        self.wrap = False
        self.highlight: LineFilter | None = None
        self.following = True
        self.new_lines = 0
        self.marked: LogLine | None = None
        self._auto = False
        self._max_text = 0
        self._cache_key: tuple[object, ...] | None = None
        self._rows: list[Strip] = []
        self._version = 0
        self.frames = 0  # windows rendered (a frame of this widget), for the benchmark
        self.drawn_version = -1  # the content version the last rendered window showed

    @property
    def version(self) -> int:
        """Bumped by every change of content or options (a frame showing it has drawn_version >= it)."""
        return self._version

    # ---- content -----------------------------------------------------------------------------------

    def set_source(self, source: LineSource, *, max_text: int | None = None) -> None:
        """Show another source (a tab, a filter); keeps following if it was."""
        self.source = source
        self.new_lines = 0
        if max_text is not None:
            self._max_text = max_text
        self._changed()
        if self.following:
            self._to_end()
        else:
            self._scroll_quietly(min(self.scroll_y, self.max_scroll_y))

    def lines_added(self, added: int, *, anchor_shift: int = 0, max_text: int = 0) -> None:
        """New entries arrived (`anchor_shift`: how far the paused top line moved)."""
        self._max_text = max(self._max_text, max_text)
        self._changed()
        if self.following:
            self._to_end()
        else:
            self.new_lines += added
            if anchor_shift:
                self._scroll_quietly(max(0, self.scroll_y + anchor_shift))

    def _changed(self) -> None:
        self._version += 1
        self._update_virtual_size()
        self.refresh()

    def _prefix_width(self) -> int:
        return (4 if self.show_rank else 0) + (16 if self.show_timestamps else 0)

    def _update_virtual_size(self) -> None:
        """New content size without a layout of the whole screen (Textual's reactive would do one per
        batch); only a scrollbar appearing or going triggers a layout."""
        width = self.scrollable_content_region.width if self.wrap else self._prefix_width() + self._max_text
        size = Size(max(width, 1), len(self.source) + (1 if self.wrap else 0))
        if size == self.virtual_size:
            return
        self.set_reactive(LogView.virtual_size, size)
        self._scroll_update(size)

    def set_options(self, *, timestamps: bool | None = None, wrap: bool | None = None,
                    rank: bool | None = None) -> None:
        if timestamps is not None:
            self.show_timestamps = timestamps
        if wrap is not None:
            self.wrap = wrap
            if wrap:
                self._scroll_quietly(None, x=0)
        if rank is not None:
            self.show_rank = rank
        self._changed()
        if self.following:
            self._to_end()

    # ---- following ---------------------------------------------------------------------------------

    def resume(self) -> None:
        self.following = True
        self.new_lines = 0
        self._to_end()
        self.refresh()

    def pause(self) -> None:
        self.following = False

    def _to_end(self) -> None:
        self._scroll_quietly(self.max_scroll_y)

    def _scroll_quietly(self, y: float | None, x: float | None = None) -> None:
        self._auto = True
        try:
            self.scroll_to(x=x, y=y, animate=False, force=True, immediate=True)
        finally:
            self._auto = False

    def jump_to(self, index: int, *, mark: bool = False) -> None:
        """Show entry `index` a third down the screen, with the lines before it (pauses following)."""
        self.following = False
        if mark:
            self.marked = self.source.entry(index)[0]
            self._version += 1
        top = index - max(0, self.size.height // 3)
        self._scroll_quietly(max(0, min(top, self.max_scroll_y)))
        self.refresh()

    @property
    def top_index(self) -> int:
        return int(self.scroll_y)

    def watch_scroll_y(self, old_value: float, new_value: float) -> None:
        super().watch_scroll_y(old_value, new_value)
        # a clamp to the new bottom after a resize is not the operator scrolling
        if not self._auto and self.following and new_value < old_value and new_value < self.max_scroll_y:
            self.following = False
            self.post_message(FollowPaused())

    def on_resize(self) -> None:
        self._changed()
        if self.following:
            self.call_after_refresh(self._to_end)

    # ---- rendering ---------------------------------------------------------------------------------

    def render_line(self, y: int) -> Strip:
        width = self.scrollable_content_region.width
        key = (self._version, int(self.scroll_y), int(self.scroll_x), width, self.size.height,
               self.following, self.show_rank, self.show_timestamps, self.wrap, self.highlight)
        if key != self._cache_key:
            self._rows = self._render_rows(width, self.size.height)
            self._cache_key = key
            self.drawn_version = self._version
        return self._rows[y] if y < len(self._rows) else Strip.blank(width)

    def _render_rows(self, width: int, height: int) -> list[Strip]:
        self.frames += 1
        n = len(self.source)
        if n == 0 or width <= 0:
            return []
        if not self.wrap:
            top, x = int(self.scroll_y), int(self.scroll_x)
            return [self.line_strip(i).crop_extend(x, x + width, None)
                    for i in range(top, min(n, top + height))]
        if self.following:  # bottom-anchored: the last lines, wrapped, fill the screen upwards
            rows: list[Strip] = []
            i = n - 1
            while i >= 0 and len(rows) < height:
                rows[:0] = self._wrapped(i, width)
                i -= 1
            return rows[-height:]
        rows = []
        i = int(self.scroll_y)
        while i < n and len(rows) < height:
            rows.extend(self._wrapped(i, width))
            i += 1
        return rows[:height]

    def _wrapped(self, index: int, width: int) -> list[Strip]:
        strip = self.line_strip(index)
        if strip.cell_length <= width:
            return [strip.extend_cell_length(width)]
        cuts = [*range(width, strip.cell_length, width), strip.cell_length]
        return [part.extend_cell_length(width) for part in strip.divide(cuts)]

    def line_strip(self, index: int) -> Strip:
        """One entry as a strip: rank column, timestamp column, text styled by what the line is."""
        line, kind = self.source.entry(index)
        if line is None or kind == SEPARATOR:
            return Strip([Segment("--", SEPARATOR_STYLE)], 2)
        segments: list[Segment] = []
        if self.show_rank:
            segments.append(Segment(f"r{line.rank:<3}", RANK_STYLES[line.rank % len(RANK_STYLES)]))
        if self.show_timestamps:
            segments.append(Segment(short_timestamp(line.ts) + " ", TS_STYLE))
        text = line.text
        what = self.signatures.classify(text, line.rank)
        style = FAILURE_STYLE if what == "failure" else PHASE_STYLE if what == "phase" else None
        if kind == CONTEXT:
            style = CONTEXT_STYLE + style if style else CONTEXT_STYLE
        if kind == MATCH and self.highlight is not None and not self.highlight.inverse:
            segments.extend(_highlighted(text, self.highlight, style))
        else:
            segments.append(Segment(text, style))
        strip = Strip(segments)
        return strip.apply_style(MARK_STYLE) if line == self.marked else strip


def _highlighted(text: str, flt: LineFilter, style: Style | None) -> list[Segment]:
    out: list[Segment] = []
    pos = 0
    for m in flt.regex.finditer(text):
        if m.end() == m.start():
            continue
        if m.start() > pos:
            out.append(Segment(text[pos:m.start()], style))
        out.append(Segment(m.group(), style + MATCH_STYLE if style else MATCH_STYLE))
        pos = m.end()
    if pos < len(text):
        out.append(Segment(text[pos:], style))
    return out


class FollowPaused(Message):
    """Posted when a scroll paused following."""
