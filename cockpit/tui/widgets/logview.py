"""A virtualised log view: renders only the rows on screen from a (very long) line source.

The source is anything with `__len__` and `entry(i) -> (LogLine | None, kind)`; a frame renders the
visible window only, so the cost is per frame, not per line. Scrolling is in source lines (also when
wrapping: the top line is wrapped downwards, or, when following, the last lines upwards). Any scroll that
leaves the bottom pauses following; `new_lines` counts what arrived since.

Failure and phase lines are told apart by the :class:`Signatures` the caller gives (the pane passes the
recipe's, :func:`recipe_signatures`). Colours are the theme's semantic roles (`cockpit.tui.styles`),
resolved on the app's console when a frame renders and kept per theme, so a theme switch recolours.
"""

from __future__ import annotations

from typing import Protocol

from rich.errors import MissingStyle
from rich.segment import Segment
from rich.style import Style
from textual.geometry import Size
from textual.scroll_view import ScrollView
from textual.strip import Strip

from cockpit.recipe.phases import match_failure, match_phase
from cockpit.telemetry.logfilter import CONTEXT, MATCH, SEPARATOR, LineFilter, Signatures
from cockpit.telemetry.logline import LogLine, short_timestamp
from cockpit.tui.messages import FollowPaused
from cockpit.tui.styles import rank_role

PLAIN = 0
# what a part of a row is → its role (the rank column: `rank_role(rank)`)
TS_ROLE = "muted"
FAILURE_ROLE = "fail"
PHASE_ROLE = "highlight"
CONTEXT_ROLE = "muted"            # a context line around a filter's match
CONTEXT_FAILURE_ROLE = "fail.soft"  # … that is a failure line itself
SEPARATOR_ROLE = "muted"
MARK_ROLE = "marked"              # the background of the line `e`/`n` jumped to
MATCH_STYLE = Style(reverse=True)  # the filter's match inside a line (colourless: reversed)


def recipe_signatures() -> Signatures:
    """The recipe's failure and phase rules (`cockpit.recipe.phases`), as a log view tells lines apart."""
    return Signatures(match_failure, match_phase)


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

    def __init__(self, *, signatures: Signatures, name: str | None = None, id: str | None = None,
                 classes: str | None = None):
        super().__init__(name=name, id=id, classes=classes)
        self.source: LineSource = EmptySource()
        self.signatures = signatures
        self.show_rank = True
        self.show_timestamps = True
        self.wrap = False
        self.highlight: LineFilter | None = None
        self.following = True
        self.new_lines = 0
        self.marked: LogLine | None = None
        self._jumped: int | None = None  # the entry a jump put a third down, until the operator scrolls
        self._auto = False
        self._max_text = 0
        self._cache_key: tuple[object, ...] | None = None
        self._rows: list[Strip] = []
        self._styles: dict[str, Style] = {}
        self._styles_theme: str | None = None
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
        self._jumped = None
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
                if self._jumped is not None:
                    self._jumped = self._jumped + anchor_shift if self._jumped + anchor_shift >= 0 else None

    def restyle(self) -> None:
        """The theme changed: resolve the roles again and redraw."""
        self._styles_theme = None
        self._changed()

    def style(self, role: str) -> Style:
        """A role as the active theme has it (cached per theme); plain outside a cockpit app."""
        theme = self.app.theme
        if theme != self._styles_theme:
            self._styles, self._styles_theme = {}, theme
        found = self._styles.get(role)
        if found is None:
            try:
                found = self.app.console.get_style(role)
            except MissingStyle:  # an app that pushed no roles (a widget test): plain text
                found = Style.null()
            self._styles[role] = found
        return found

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
        self._jumped = None
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
        self._jumped = index
        self._place_jumped()
        self.refresh()

    def _place_jumped(self) -> None:
        if self._jumped is None or self.following:
            return
        top = self._jumped - max(0, self.size.height // 3)
        self._scroll_quietly(max(0, min(top, self.max_scroll_y)))

    @property
    def top_index(self) -> int:
        return int(self.scroll_y)

    def watch_scroll_y(self, old_value: float, new_value: float) -> None:
        super().watch_scroll_y(old_value, new_value)
        clamped = new_value < old_value and new_value >= self.max_scroll_y  # the view got shorter content
        if not self._auto and not clamped:
            self._jumped = None  # the operator scrolled: the jump's place is theirs now
        # a clamp to the new bottom after a resize is not the operator scrolling
        if not self._auto and self.following and new_value < old_value and new_value < self.max_scroll_y:
            self.following = False
            self.post_message(FollowPaused())

    def on_resize(self) -> None:
        self._changed()
        if self.following or self._jumped is not None:
            self.call_after_refresh(self._settle_after_resize)

    def _settle_after_resize(self) -> None:
        """After a resize's refresh (the status line grew or shrank): at the end if still following, else a
        jumped-to line a third down again. Decided then, not at the resize: a jump made meanwhile keeps its
        place (an end scheduled before it once threw it away)."""
        if self.following:
            self._to_end()
        else:
            self._place_jumped()

    # ---- rendering ---------------------------------------------------------------------------------

    def render_line(self, y: int) -> Strip:
        width = self.scrollable_content_region.width
        key = (self._version, int(self.scroll_y), int(self.scroll_x), width, self.size.height,
               self.following, self.show_rank, self.show_timestamps, self.wrap, self.highlight,
               self.app.theme)
        if key != self._cache_key:
            base = self.rich_style    # the theme's text colour under every row (a plain log line has none)
            self._rows = [row.apply_style(base) for row in self._render_rows(width, self.size.height)]
            self._cache_key = key
            self.drawn_version = self._version
        return self._rows[y] if y < len(self._rows) else Strip.blank(width, self.rich_style)

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
            return Strip([Segment("--", self.style(SEPARATOR_ROLE))], 2)
        segments: list[Segment] = []
        if self.show_rank:
            segments.append(Segment(f"r{line.rank:<3}", self.style(rank_role(line.rank))))
        if self.show_timestamps:
            segments.append(Segment(short_timestamp(line.ts) + " ", self.style(TS_ROLE)))
        text = line.text
        what = self.signatures.classify(text, line.rank)
        if kind == CONTEXT:
            role: str | None = CONTEXT_FAILURE_ROLE if what == "failure" else CONTEXT_ROLE
        else:
            role = FAILURE_ROLE if what == "failure" else PHASE_ROLE if what == "phase" else None
        style = self.style(role) if role is not None else None
        if kind == MATCH and self.highlight is not None and not self.highlight.inverse:
            segments.extend(_highlighted(text, self.highlight, style))
        else:
            segments.append(Segment(text, style))
        strip = Strip(segments)
        return strip.apply_style(self.style(MARK_ROLE)) if line == self.marked else strip


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
