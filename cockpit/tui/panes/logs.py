"""Logs pane: every rank's container log, followed live; per-rank tabs and a merged view.

Readers (one worker per rank following `docker logs -f -t` over SSH) only append to bounded inboxes
(timestamp and text columns); a 50 ms timer moves at most MAX_PER_FLUSH lines per tick into the store
and tells the view how many entries arrived, so the cost is per frame, not per line. Any scroll away
from the bottom pauses following (a counter shows the new lines); `f`/`end` resumes. `/` filters
(regex, `!` inverts) with context lines; failure signatures and phase lines are highlighted; text is
shown as plain text with control characters neutralised.
"""

from __future__ import annotations

import os
import time
from bisect import bisect_right
from collections import deque
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.message import Message
from textual.screen import ModalScreen
from textual.widget import Widget
from textual.widgets import Input, Static, Tab, Tabs

from cockpit.telemetry.logfilter import FilteredView, FilterError, LineFilter, Signatures
from cockpit.telemetry.logs import (
    DEFAULT_CAPACITY,
    NO_CONTAINER,
    FollowEvent,
    LogLine,
    LogStore,
    follow,
    save_lines,
)
from cockpit.tui.context import CockpitContext
from cockpit.tui.pane import Pane
from cockpit.tui.widgets.logview import PLAIN, FollowPaused, LogView

FLUSH_EVERY = 0.05
MAX_PER_FLUSH = 12_000  # lines moved into the store per tick at most (240 000 lines/s): a tick stays short
RENDER_EVERY = 0.1  # the view takes new lines (one frame) at most this often while lines stream
STATUS_EVERY = 0.25  # the status line's counters refresh at most this often while lines stream
REJOIN_EVERY = 5.0
CONTEXT_STEPS = (0, 2, 5, 10)
MERGED = "merged"


class _BufferSource:
    """A view over the merged deque or one rank's ring buffer (looked up each time: they get replaced)."""

    def __init__(self, store: LogStore, rank: int | None):
        self.store, self.rank = store, rank

    @property
    def lines(self) -> Sequence[LogLine]:
        return self.store.merged if self.rank is None else self.store.rank(self.rank).lines

    def __len__(self) -> int:
        return len(self.store.merged) if self.rank is None else len(self.store.rank(self.rank))

    def snapshot(self) -> Sequence[LogLine]:
        """The lines as they are now, unchanged by later additions (for a thread to read)."""
        return self.lines.snapshot()  # type: ignore[attr-defined]

    def entry(self, index: int) -> tuple[LogLine | None, int]:
        return self.lines[index], PLAIN


class _FilteredSource:
    def __init__(self, view: FilteredView):
        self.view = view

    @property
    def lines(self) -> deque[LogLine | None]:
        return self.view.lines

    def __len__(self) -> int:
        return len(self.view.lines)

    def snapshot(self) -> Sequence[LogLine | None]:
        return list(self.view.lines)

    def entry(self, index: int) -> tuple[LogLine | None, int]:
        return self.view.lines[index], self.view.kinds[index]


class Inbox:
    """One reader's lines waiting for the next flush, as columns (no object per line lives on: a queue
    of tuples kept the garbage collector busy); bounded, the oldest lines go first (counted in `lost`)."""

    __slots__ = ("capacity", "lost", "stamps", "texts")

    def __init__(self, capacity: int):
        self.capacity = capacity
        self.stamps: list[int] = []
        self.texts: list[str] = []
        self.lost = 0

    def __len__(self) -> int:
        return len(self.texts)

    def push(self, ts: int, text: str) -> None:
        self.stamps.append(ts)
        self.texts.append(text)
        if len(self.texts) > self.capacity + 1024:
            self._bound()

    def extend(self, lines: Sequence[LogLine]) -> None:
        self.stamps.extend(line.ts for line in lines)
        self.texts.extend(line.text for line in lines)
        if len(self.texts) > self.capacity:
            self._bound()

    def _bound(self) -> None:
        extra = len(self.texts) - self.capacity
        del self.stamps[:extra], self.texts[:extra]
        self.lost += extra

    def take(self, count: int) -> tuple[list[int], list[str]]:
        """The oldest `count` lines, removed."""
        if count >= len(self.texts):
            out = (self.stamps, self.texts)
            self.stamps, self.texts = [], []
            return out
        out = (self.stamps[:count], self.texts[:count])
        del self.stamps[:count], self.texts[:count]
        return out


def take_slice(inboxes: dict[int, Inbox], limit: int) -> dict[int, tuple[list[int], list[str]]]:
    """At most about `limit` lines from the inboxes, the same stretch of time from each (so a backlog
    does not turn into lines that arrive late for the merged view)."""
    waiting = {rank: inbox for rank, inbox in inboxes.items() if inbox}
    if not waiting:
        return {}
    share = max(1, limit // len(waiting))
    cut = min((inbox.stamps[share - 1] for inbox in waiting.values() if len(inbox) > share), default=None)
    out = {}
    for rank, inbox in waiting.items():
        count = len(inbox) if cut is None else min(bisect_right(inbox.stamps, cut), limit)
        if count:
            out[rank] = inbox.take(count)
    return out


@dataclass
class ErrorFound(Message):
    """The failure search (a thread) found a line, or none."""

    line: LogLine | None
    index: int
    generation: int


class LogsPane(Pane):
    """Tabs (merged, r0…rN), the log view, a filter line and a status line."""

    TITLE = "Logs"
    HEADLESS = "r37-cockpit logs"

    FOCUS = "#logs-view"  # the app focuses the log view when this pane is shown (its keys work at once)

    DEFAULT_CSS = """
    LogsPane { height: 1fr; }
    LogsPane #logs-tabs { height: 2; }
    LogsPane #logs-filter { display: none; height: 3; }
    LogsPane #logs-filter.shown { display: block; }
    LogsPane #logs-status { height: 2; padding: 0 1; background: $panel; }
    """

    BINDINGS = [
        Binding("slash", "filter", "Filter", id="logs.filter", key_display="/"),
        Binding("escape", "clear_filter", "Clear filter", id="logs.clear_filter", show=False),
        Binding("f,end", "resume", "Follow", id="logs.follow"),
        Binding("left_square_bracket", "tab(-1)", "Prev tab", id="logs.prev_tab", key_display="["),
        Binding("right_square_bracket", "tab(1)", "Next tab", id="logs.next_tab", key_display="]"),
        Binding("m", "show_tab('merged')", "Merged", id="logs.merged", show=False),
        Binding("t", "toggle_timestamps", "Timestamps", id="logs.timestamps"),
        Binding("w", "toggle_wrap", "Wrap", id="logs.wrap"),
        Binding("c", "cycle_context", "Context", id="logs.context", show=False),
        Binding("e", "first_error", "First error", id="logs.first_error"),
        Binding("n", "next_error", "Next error", id="logs.next_error", show=False),
        Binding("s", "save(False)", "Save view", id="logs.save_view"),
        Binding("S", "save(True)", "Save all", id="logs.save_all", show=False),
    ]

    def __init__(self, ctx: CockpitContext, *, capacity: int | None = None, autostart: bool = True,
                 flush_every: float = FLUSH_EVERY, id: str | None = None,
                 classes: str | None = None):
        super().__init__(ctx, id=id, classes=classes)
        self.ranks: list[int] = list(ctx.config.ranks)
        configured = getattr(getattr(ctx.config, "ui", None), "log_buffer_lines", None)
        cap = capacity or int(configured or DEFAULT_CAPACITY)
        self.store = LogStore(self.ranks, cap)
        self.signatures = Signatures.load()
        self.autostart = autostart
        self.flush_every = flush_every
        self.container = ctx.config.cluster.container_name
        self._incoming: dict[int, Inbox] = {r: Inbox(cap) for r in self.ranks}
        self.states: dict[int, FollowEvent] = {r: FollowEvent(r, "starting") for r in self.ranks}
        self.tab: str = MERGED
        self.filter: LineFilter | None = None
        self.context = CONTEXT_STEPS[1]
        self.filtered: FilteredView | None = None
        self.flushed = 0          # lines moved from the readers into the store (the benchmark's figure)
        self.message = ""
        self._status_text = ""
        self._status_at = 0.0
        self._render_at = 0.0
        self._pend_added = self._pend_shift = self._pend_longest = 0
        self._generation = 0
        self._error_at = 0
        self._max_text = 0

    def compose(self) -> ComposeResult:
        yield Tabs(Tab("merged", id=MERGED), *(Tab(f"r{r}", id=f"r{r}") for r in self.ranks), id="logs-tabs")
        yield LogView(signatures=self.signatures, id="logs-view")
        yield Input(placeholder="regex — !regex keeps the lines that do not match; Enter applies, Esc closes",
                    id="logs-filter")
        yield StatusLine(id="logs-status")

    @property
    def view(self) -> LogView:
        return self.query_one(LogView)

    def on_mount(self) -> None:
        self.view.set_source(_BufferSource(self.store, None))
        self.set_interval(self.flush_every, self.flush)
        if self.autostart:
            for rank in self.ranks:
                self.run_worker(self._follow(rank), group="logs-follow", name=f"logs-r{rank}")
        self._show_status()

    # ---- ingestion ---------------------------------------------------------------------------------

    async def _follow(self, rank: int) -> None:
        inbox = self._incoming[rank]
        async for item in follow(self.ctx.fleet[rank], self.container, rejoin=REJOIN_EVERY):
            if isinstance(item, LogLine):
                inbox.push(item.ts, item.text)
            else:
                self.states[rank] = item

    def ingest(self, rank: int, lines: Sequence[LogLine]) -> None:
        """Hand lines to the pane (what a reader does); they show at the next flush."""
        inbox = self._incoming.get(rank)
        if inbox is None:
            inbox = self._incoming[rank] = Inbox(self.store.capacity)
        inbox.extend(lines)

    @property
    def queued(self) -> int:
        """Lines the readers handed over that are not in the store yet."""
        return sum(len(inbox) for inbox in self._incoming.values())

    def note(self, event: FollowEvent) -> None:
        self.states[event.rank] = event

    def flush(self, *, now: bool = False) -> None:
        """Move what the readers queued into the store and the view (the 50 ms timer); `now`: render
        at once rather than at the next RENDER_EVERY tick."""
        # bounded per tick; a backlog (a long history dumped at start) drains in a few ticks, not lost
        batches = take_slice(self._incoming, max(MAX_PER_FLUSH, self.queued // 4))
        for rank, inbox in self._incoming.items():
            if inbox.lost:  # the reader outran the pane: the oldest queued lines were dropped
                self.store.rank(rank).note_skipped(inbox.lost)
                inbox.lost = 0
        if batches:
            self._apply(batches)
        self._render_view(force=now)
        self._show_status(throttle=not now)

    def _apply(self, batches: dict[int, tuple[list[int], list[str]]]) -> None:
        view = self.view
        rank = None if self.tab == MERGED else int(self.tab[1:])
        paused_top = None if view.following else view.top_index
        dropped_before = self.store.rank(rank).dropped if rank is not None else 0
        anchor = paused_top if rank is None and self.filtered is None else None
        result = self.store.add_columns(batches, anchor=anchor,
                                        with_lines=self.filtered is not None and rank is None)
        self.flushed += result.added
        longest = max(max(map(len, texts)) for _, texts in batches.values())
        self._max_text = max(self._max_text, longest)
        if self.filtered is not None:
            if rank is None and result.moved_from is not None:
                self._rebuild_filter()
                return
            new_count = len(batches[rank][1]) if rank in batches else 0
            new = result.lines if rank is None else self.store.rank(rank).newest(new_count)
            fed = self.filtered.feed(new)
            trimmed = self.filtered.trim(self._holds)
            self._notify_view(fed, -trimmed, longest)
        elif rank is None:
            self._notify_view(result.added, result.anchor_shift, longest)
        else:
            new = len(batches[rank][1]) if rank in batches else 0
            if new:
                shift = -(self.store.rank(rank).dropped - dropped_before)
                self._notify_view(new, shift, longest)

    def _notify_view(self, added: int, shift: int, longest: int) -> None:
        """Tell the view what arrived, at most every RENDER_EVERY s (a frame costs the same for 1 or
        10 000 new lines; the store itself is updated on every flush)."""
        self._pend_added += added
        self._pend_shift += shift
        self._pend_longest = max(self._pend_longest, longest)

    def _render_view(self, force: bool = False) -> None:
        now = time.monotonic()
        if not (self._pend_added or self._pend_shift) or (not force and now - self._render_at < RENDER_EVERY):
            return
        self._render_at = now
        added, shift, longest = self._pend_added, self._pend_shift, self._pend_longest
        self._pend_added = self._pend_shift = self._pend_longest = 0
        self.view.lines_added(added, anchor_shift=shift, max_text=longest)

    def _holds(self, line: LogLine) -> bool:
        return self.store.rank(line.rank).holds(line)

    # ---- view choice -------------------------------------------------------------------------------

    def _source_lines(self) -> Iterable[LogLine]:
        return self.store.merged if self.tab == MERGED else self.store.rank(int(self.tab[1:])).lines

    def _show_view(self) -> None:
        view = self.view
        self._pend_added = self._pend_shift = 0
        if self.filter is None:
            self.filtered = None
            view.highlight = None
            view.set_source(_BufferSource(self.store, None if self.tab == MERGED else int(self.tab[1:])),
                            max_text=self._max_text)
        else:
            self._rebuild_filter()
        view.set_options(rank=self.tab == MERGED)
        self._show_status()

    def _rebuild_filter(self) -> None:
        assert self.filter is not None
        self._pend_added = self._pend_shift = 0
        self.filtered = FilteredView(self.filter, self.context)
        self.filtered.rebuild(self._source_lines())
        self.view.highlight = self.filter
        self.view.set_source(_FilteredSource(self.filtered), max_text=self._max_text)

    @on(Tabs.TabActivated, "#logs-tabs")
    def _tab_activated(self, event: Tabs.TabActivated) -> None:
        event.stop()
        tab_id = event.tab.id or MERGED
        if tab_id != self.tab:
            self.tab = tab_id
            self._show_view()
        if self.shown:
            self.view.focus()

    def action_tab(self, step: int) -> None:
        ids = [MERGED, *(f"r{r}" for r in self.ranks)]
        self.action_show_tab(ids[(ids.index(self.tab) + step) % len(ids)])

    def action_show_tab(self, tab_id: str) -> None:
        self.query_one(Tabs).active = tab_id

    # ---- keys --------------------------------------------------------------------------------------

    def action_resume(self) -> None:
        self.view.resume()
        self._show_status()

    def action_toggle_timestamps(self) -> None:
        self.view.set_options(timestamps=not self.view.show_timestamps)
        self._show_status()

    def action_toggle_wrap(self) -> None:
        self.view.set_options(wrap=not self.view.wrap)
        self._show_status()

    def action_cycle_context(self) -> None:
        i = CONTEXT_STEPS.index(self.context) if self.context in CONTEXT_STEPS else 0
        self.context = CONTEXT_STEPS[(i + 1) % len(CONTEXT_STEPS)]
        if self.filter is not None:
            self._rebuild_filter()
        self._show_status()

    def action_filter(self) -> None:
        box = self.query_one("#logs-filter", Input)
        box.add_class("shown")
        box.value = self.filter.text if self.filter else ""
        box.focus()

    def action_clear_filter(self) -> None:
        box = self.query_one("#logs-filter", Input)
        if box.has_class("shown"):
            box.remove_class("shown")
            self.view.focus()
            return
        if self.filter is not None:
            self.apply_filter("")

    @on(Input.Submitted, "#logs-filter")
    def _filter_submitted(self, event: Input.Submitted) -> None:
        event.stop()
        if self.apply_filter(event.value):
            event.input.remove_class("shown")
            self.view.focus()

    def apply_filter(self, text: str) -> bool:
        """Filter the view by `text` (empty clears); False with a message if it does not compile."""
        text = text.strip()
        if not text:
            self.filter = None
            self.message = "filter cleared"
        else:
            try:
                self.filter = LineFilter.parse(text)
            except FilterError as exc:
                self.message = str(exc)
                self._show_status()
                return False
            self.message = ""
        self._show_view()
        return True

    def on_follow_paused(self, _message: FollowPaused) -> None:
        self._show_status()

    # ---- errors ------------------------------------------------------------------------------------

    def action_first_error(self) -> None:
        self._find_error(0)

    def action_next_error(self) -> None:
        view = self.view
        at = None
        if view.marked is not None:
            at = _locate(view.source.lines, view.marked, self._error_at)  # type: ignore[attr-defined]
        self._find_error(at + 1 if at is not None else view.top_index)

    def _find_error(self, start: int) -> None:
        lines = self.view.source.snapshot()  # type: ignore[attr-defined]
        self._generation += 1
        self.message = "searching for the first error…" if start == 0 else "searching for the next error…"
        self._show_status()
        self._search(lines, start, self._generation)

    @work(thread=True, exclusive=True, group="logs-search")
    def _search(self, lines: Sequence[LogLine | None], start: int, generation: int) -> None:
        index = self.signatures.first_failure(lines, start)
        self.post_message(ErrorFound(lines[index] if index is not None else None, index or 0, generation))

    def on_error_found(self, found: ErrorFound) -> None:
        if found.generation != self._generation:
            return
        if found.line is None:
            self.message = "no failure signature in this view" + (" below" if found.index else "")
            self._show_status()
            return
        index = _locate(self.view.source.lines, found.line, found.index)  # type: ignore[attr-defined]
        if index is None:
            self.message = "that error line has left the buffer"
        else:
            self._error_at = index
            self.view.jump_to(index, mark=True)
            self.message = f"failure at line {index + 1}: n for the next one"
        self._show_status()

    # ---- saving ------------------------------------------------------------------------------------

    def action_save(self, full: bool) -> None:
        what = "all" if full else (self.tab if self.filter is None else f"{self.tab}-filtered")
        default = f"r37-logs-{what}-{time.strftime('%Y%m%d-%H%M%S')}.log"
        lines: Sequence[LogLine | None] = (self.store.merged.snapshot() if full
                                           else self.view.source.snapshot())  # type: ignore[attr-defined]

        def chosen(path: str | None) -> None:
            if not path:
                return
            target = Path(path).expanduser()
            if target.exists():
                self.app.push_screen(ConfirmOverwrite(str(target)),
                                     lambda yes: self._save(lines, str(target), True) if yes else None)
            else:
                self._save(lines, str(target), False)

        self.app.push_screen(SavePrompt(default, len(lines), full), chosen)

    @work(thread=True, group="logs-save")
    def _save(self, lines: Sequence[LogLine | None], path: str, overwrite: bool) -> None:
        try:
            n = save_lines(path, lines, overwrite=overwrite)
        except FileExistsError:
            msg = f"not saved: {path} exists"
        except OSError as exc:
            msg = f"not saved: {exc.strerror or exc} ({path})"
        else:
            msg = f"saved {n} lines to {path}"
        self.app.call_from_thread(self._set_message, msg)

    def _set_message(self, text: str) -> None:
        self.message = text
        self._show_status()

    # ---- status ------------------------------------------------------------------------------------

    def status_text(self) -> Text:
        view = self.view
        out = Text()
        if view.following:
            out.append("● following", style="bold green")
        else:
            plural = "" if view.new_lines == 1 else "s"
            out.append(f"⏸ paused — {view.new_lines:,} new line{plural} (f to follow)", style="bold yellow")
        out.append(f"  {self.tab}: {len(self.view.source):,} lines")
        drops = [(r, b.dropped) for r, b in sorted(self.store.ranks.items()) if b.dropped]
        if drops:
            out.append("  dropped " + ", ".join(f"r{r} {d:,}" for r, d in drops), style="red")
        if self.filter is not None and self.filtered is not None:
            out.append(f"  filter {self.filter.text!r} ±{self.context}: {self.filtered.matches:,} matches",
                       style="bold")
        out.append(f"  ts {'on' if view.show_timestamps else 'off'} · wrap {'on' if view.wrap else 'off'}",
                   style="dim")
        if self.message:
            out.append(f"  {self.message}", style="italic")
        out.append("\n")
        states = [(r, self.states.get(r) or FollowEvent(r, "-")) for r in self.ranks]
        if len({(ev.state, ev.detail) for _, ev in states}) == 1 and len(states) > 1:
            states = states[:1]
            out.append("all ranks ", style="bold")
        for rank, ev in states:
            style = {"following": "green", "resumed": "green", "lost": "bold red", "error": "red",
                     "ended": "yellow", "waiting": "yellow"}.get(ev.state, "dim")
            if not out.plain.endswith("all ranks "):
                out.append(f"r{rank} ", style="bold")
            out.append(ev.state, style=style)
            if ev.detail and ev.state in ("lost", "error", "waiting", "ended"):
                detail = "no container" if NO_CONTAINER in ev.detail else ev.detail
                out.append(f": {detail[:40]}", style="dim")
            out.append("   ")
        return out

    def _show_status(self, *, throttle: bool = False) -> None:
        now = time.monotonic()
        if throttle and now - self._status_at < STATUS_EVERY:
            return
        self._status_at = now
        text = self.status_text()
        if text.plain != self._status_text:
            self._status_text = text.plain
            self.query_one(StatusLine).show(text)


class StatusLine(Widget):
    """Plain text that repaints without a layout (a Static's update lays out the whole screen)."""

    DEFAULT_CSS = "StatusLine { height: 2; }"

    def __init__(self, **kwargs: object):
        super().__init__(**kwargs)  # type: ignore[arg-type]
        self._text = Text()

    def show(self, text: Text) -> None:
        self._text = text
        self.refresh()

    def render(self) -> Text:
        return self._text


def _locate(lines: Sequence[LogLine | None], line: LogLine, hint: int) -> int | None:
    """Where `line` (an equal line) is now: near `hint`, moved by lines added or dropped since."""
    n = len(lines)
    if 0 <= hint < n and lines[hint] == line:
        return hint
    for i in range(min(hint, n - 1), -1, -1):
        if lines[i] == line:
            return i
    for i in range(min(hint, n - 1) + 1, n):
        if lines[i] == line:
            return i
    return None


class SavePrompt(ModalScreen[str | None]):
    """Asks for the file name; Enter saves, Esc cancels."""

    BINDINGS = [Binding("escape", "cancel", "Cancel", id="logs.save_cancel")]
    DEFAULT_CSS = """
    SavePrompt { align: center middle; }
    SavePrompt > Vertical { width: 90; height: auto; border: round $accent; background: $surface;
                            padding: 0 1; }
    """

    def __init__(self, default: str, count: int, full: bool):
        super().__init__()
        self.default, self.count, self.full = default, count, full

    def compose(self) -> ComposeResult:
        with Vertical():
            what = "the full buffer (all ranks, merged)" if self.full else "this view"
            yield Static(f"Save {what}: {self.count:,} lines. File name (Enter saves, Esc cancels):",
                         markup=False)
            yield Input(value=os.path.join(os.getcwd(), self.default), id="save-path")

    @on(Input.Submitted)
    def _submitted(self, event: Input.Submitted) -> None:
        self.dismiss(event.value.strip() or None)

    def action_cancel(self) -> None:
        self.dismiss(None)


class ConfirmOverwrite(ModalScreen[bool]):
    """`PATH exists: overwrite?` y / n."""

    BINDINGS = [Binding("y", "answer(True)", "Overwrite", id="logs.overwrite_yes"),
                Binding("n,escape", "answer(False)", "Keep", id="logs.overwrite_no")]
    DEFAULT_CSS = """
    ConfirmOverwrite { align: center middle; }
    ConfirmOverwrite > Static { width: 90; height: auto; border: round $warning; background: $surface;
                                padding: 0 1; }
    """

    def __init__(self, path: str):
        super().__init__()
        self.path = path

    def compose(self) -> ComposeResult:
        yield Static(f"{self.path} exists. Overwrite it? y = overwrite, n = keep it", markup=False)

    def action_answer(self, yes: bool) -> None:
        self.dismiss(yes)
