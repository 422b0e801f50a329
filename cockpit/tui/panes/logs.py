"""Logs pane: every rank's container log, followed live; per-rank tabs and a merged view.

Readers (one worker per rank following `docker logs -f -t` over SSH) only append to bounded inboxes
(timestamp and text columns); a 50 ms timer moves at most MAX_PER_FLUSH lines per tick into the store
and tells the view how many entries arrived, so the cost is per frame, not per line. The timer sleeps
while nothing waits (a quiet log costs no wakeups) and a reader's line wakes it. The engine's
access-log lines of the cockpit's own probes (`is_probe_line`) are not kept unless the probes key asks
for them. Any scroll away from the bottom pauses following (a counter shows the new lines); the
follow key resumes. The filter key filters (regex, `!` inverts) with context lines; the recipe's
failure signatures and phase lines (`cockpit.recipe.phases`) are highlighted; text is shown as plain
text with control characters neutralised. The status line packs its parts to the pane's width
(nothing is cut at 80 columns) and takes its keys from the bindings, so a remapped key shows remapped.
"""

from __future__ import annotations

import asyncio
import time
from collections import deque
from collections.abc import Iterable, Sequence
from pathlib import Path

from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.timer import Timer
from textual.widgets import Input, Tab, Tabs

from cockpit.locations import logs_save_dir
from cockpit.recipe.containers import worth_following
from cockpit.telemetry.logfilter import FilteredView, FilterError, LineFilter, is_probe_line
from cockpit.telemetry.logfollow import NO_CONTAINER, FollowEvent, follow
from cockpit.telemetry.loginbox import Inbox, take_slice
from cockpit.telemetry.logline import LogLine, save_lines
from cockpit.telemetry.logstore import DEFAULT_CAPACITY, LogStore
from cockpit.tui.context import CockpitContext
from cockpit.tui.dialogs import ConfirmOverwrite, PathPrompt
from cockpit.tui.keys import key_for
from cockpit.tui.messages import ErrorFound, FollowPaused
from cockpit.tui.pane import Pane
from cockpit.tui.widgets.logview import PLAIN, LogView, recipe_signatures
from cockpit.tui.widgets.statusline import Row, StatusLine

FLUSH_EVERY = 0.05
MAX_PER_FLUSH = 12_000  # lines moved into the store per tick at most (240 000 lines/s): a tick stays short
RENDER_EVERY = 0.1  # the view takes new lines (one frame) at most this often while lines stream
STATUS_EVERY = 0.25  # the status line's counters refresh at most this often while lines stream
REJOIN_EVERY = 5.0   # s at least between two follows of a rank whose container ended or is missing
REJOIN_POLL = 1.0    # s between looks at the live model meanwhile (in memory: no SSH)
REJOIN_MAX = 60.0    # s at most before docker is asked again anyway
CONTEXT_STEPS = (0, 2, 5, 10)
MERGED = "merged"
FOLLOWER_STYLE = {"following": "ok.soft", "resumed": "ok.soft", "lost": "fail", "error": "fail",
                  "ended": "warn.soft", "waiting": "warn.soft"}  # any other state (starting, -): muted
HINT_LABELS = {"filter": "filter", "resume": "follow", "tab(-1)": "prev tab", "tab(1)": "next tab",
               "show_tab": "merged", "toggle_timestamps": "time", "toggle_wrap": "wrap",
               "cycle_context": "context", "first_error": "first error", "next_error": "next error",
               "save(False)": "save", "save(True)": "save all", "toggle_probes": "probes"}


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


class LogsPane(Pane):
    """Tabs (merged, r0…rN), the log view, a filter line and a status line."""

    TITLE = "Logs"
    HEADLESS = "r37-cockpit logs"

    FOCUS = "#logs-view"  # the app focuses the log view when this pane is shown (its keys work at once)
    HINTS = ("filter", "resume", "tab(-1)", "tab(1)", "show_tab", "toggle_timestamps", "toggle_wrap",
             "cycle_context", "first_error", "next_error", "save(False)", "save(True)", "toggle_probes")

    DEFAULT_CSS = """
    LogsPane { height: 1fr; }
    LogsPane #logs-tabs { height: 2; }
    LogsPane #logs-filter { display: none; height: 3; }
    LogsPane #logs-filter.shown { display: block; }
    LogsPane #logs-status { height: 3; padding: 0 1; background: $panel; }
    LogsPane.-short #logs-tabs { height: 1; }
    LogsPane.-short #logs-tabs Underline { display: none; }
    LogsPane.-short #logs-tabs Tab.-active { text-style: bold reverse; }
    """
    SHORT = 30  # a pane lower than this (an 80×24 terminal) spends no line on the tabs' underline

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
        Binding("p", "toggle_probes", "Probe lines", id="logs.probes", show=False),
    ]

    def __init__(self, ctx: CockpitContext, *, capacity: int | None = None, autostart: bool = True,
                 flush_every: float = FLUSH_EVERY, id: str | None = None,
                 classes: str | None = None):
        super().__init__(ctx, id=id, classes=classes)
        self.ranks: list[int] = list(ctx.config.ranks)
        configured = getattr(getattr(ctx.config, "ui", None), "log_buffer_lines", None)
        cap = capacity or int(configured or DEFAULT_CAPACITY)
        self.store = LogStore(self.ranks, cap)
        self.signatures = recipe_signatures()
        self.autostart = autostart
        self.flush_every = flush_every
        self.container = ctx.config.cluster.container_name
        self._incoming: dict[int, Inbox] = {r: Inbox(cap) for r in self.ranks}
        self.states: dict[int, FollowEvent] = {r: FollowEvent(r, "starting") for r in self.ranks}
        self.tab: str = MERGED
        self.filter: LineFilter | None = None
        self.context = CONTEXT_STEPS[1]
        self.filtered: FilteredView | None = None
        self.source: _BufferSource | _FilteredSource = _BufferSource(self.store, None)  # what the view shows
        self.flushed = 0          # lines moved from the readers into the store (the benchmark's figure)
        self.ticks = 0            # flushes run (a quiet log runs none: the timer sleeps)
        self.message = ""
        self._status_text = ""
        self._status_at = 0.0
        self._render_at = 0.0
        self._pend_added = self._pend_shift = self._pend_longest = 0
        self._generation = 0
        self._error_at = 0
        self._max_text = 0
        self._hints: list[Text] | None = None  # one chunk per key hint (the keymap's keys), built once
        self.hide_probes = True   # the cockpit's own probe lines are dropped on arrival (`p` keeps them)
        self._status_due = False  # a status change the throttle held back: the timer stays awake for it
        self._asleep = False
        self._flush_timer: Timer | None = None

    def compose(self) -> ComposeResult:
        yield Tabs(Tab("merged", id=MERGED), *(Tab(f"r{r}", id=f"r{r}") for r in self.ranks), id="logs-tabs")
        yield LogView(signatures=self.signatures, id="logs-view")
        yield Input(id="logs-filter")
        yield StatusLine(id="logs-status")

    @property
    def view(self) -> LogView:
        return self.query_one(LogView)

    def on_mount(self) -> None:
        self._show_source(_BufferSource(self.store, None))
        self._flush_timer = self.set_interval(self.flush_every, self.flush)
        if self.autostart:
            for rank in self.ranks:
                self.run_worker(self._follow(rank), group="logs-follow", name=f"follow rank {rank}'s log",
                                exit_on_error=False)
        self._show_placeholder()
        self._show_status()

    def on_resize(self) -> None:
        self.set_class(self.size.height < self.SHORT, "-short")

    def refresh_view(self) -> None:
        """Theme or keymap changed: rows recoloured, hints and the filter's placeholder with the keys now."""
        self._hints = None
        self.view.restyle()
        self._show_placeholder()
        self._show_status(force=True)

    def _show_placeholder(self) -> None:
        box = self.query_one("#logs-filter", Input)
        enter, close = key_for(box, "submit"), self.key_for("clear_filter")
        box.placeholder = ("regex — !regex keeps the lines that do not match"
                           + (f"; {enter} applies" if enter else "") + (f", {close} closes" if close else ""))

    # ---- ingestion ---------------------------------------------------------------------------------

    async def _follow(self, rank: int) -> None:
        inbox = self._incoming[rank]
        async for item in follow(self.ctx.fleet[rank], self.container, rejoin=lambda: self._rejoin(rank)):
            if isinstance(item, LogLine):
                if self.hide_probes and is_probe_line(item.text):
                    continue
                inbox.push(item.ts, item.text)
            else:
                self.states[rank] = item
                self._status_due = True
            self._wake()

    def _wake(self) -> None:
        """Something arrived: the flush timer runs again (it sleeps while nothing waits)."""
        if self._asleep and self._flush_timer is not None:
            self._asleep = False
            self._flush_timer.resume()

    async def _rejoin(self, rank: int) -> None:
        """Wait before following rank's log again until the live model shows a container worth it (see
        :func:`worth_following`): asking docker every few seconds for a container that is not there
        filled the command log with one `docker logs -f` per rank every 5 s."""
        before = self.ctx.watcher.timeline[rank].container
        await asyncio.sleep(REJOIN_EVERY)
        deadline = time.monotonic() + REJOIN_MAX - REJOIN_EVERY
        while (not worth_following(before, self.ctx.watcher.timeline[rank].container)
               and time.monotonic() < deadline):
            await asyncio.sleep(REJOIN_POLL)

    def ingest(self, rank: int, lines: Sequence[LogLine]) -> None:
        """Hand lines to the pane (what a reader does); they show at the next flush."""
        inbox = self._incoming.get(rank)
        if inbox is None:
            inbox = self._incoming[rank] = Inbox(self.store.capacity)
        inbox.extend([ln for ln in lines if not is_probe_line(ln.text)] if self.hide_probes else lines)
        self._wake()

    @property
    def queued(self) -> int:
        """Lines the readers handed over that are not in the store yet."""
        return sum(len(inbox) for inbox in self._incoming.values())

    def note(self, event: FollowEvent) -> None:
        self.states[event.rank] = event
        self._status_due = True
        self._wake()

    def flush(self, *, now: bool = False) -> None:
        """Move what the readers queued into the store and the view (the 50 ms timer); `now`: render
        at once rather than at the next RENDER_EVERY tick."""
        self.ticks += 1
        # bounded per tick; a backlog (a long history dumped at start) drains in a few ticks, not lost
        batches = take_slice(self._incoming, max(MAX_PER_FLUSH, self.queued // 4))
        for rank, inbox in self._incoming.items():
            if inbox.lost:  # the reader outran the pane: the oldest queued lines were dropped
                self.store.rank(rank).note_skipped(inbox.lost)
                inbox.lost = 0
        if batches:
            self._apply(batches)
        if now or self.shown:     # hidden: the store keeps every line; the view and status catch up on show
            self._render_view(force=now)
            self._show_status(throttle=not now)
        waiting = self.shown and (self._pend_added or self._pend_shift or self._status_due)
        if not (self.queued or waiting) and self._flush_timer is not None:
            self._asleep = True   # nothing waits: no tick until a reader's line or state wakes the timer
            self._flush_timer.pause()

    def on_show(self) -> None:
        super().on_show()
        self.flush(now=True)

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
            count = len(batches[rank][1]) if rank in batches else 0
            if count:
                shift = -(self.store.rank(rank).dropped - dropped_before)
                self._notify_view(count, shift, longest)

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
            self._show_source(_BufferSource(self.store, None if self.tab == MERGED else int(self.tab[1:])))
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
        self._show_source(_FilteredSource(self.filtered))

    def _show_source(self, source: _BufferSource | _FilteredSource) -> None:
        self.source = source
        self.view.set_source(source, max_text=self._max_text)

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

    def action_toggle_probes(self) -> None:
        self.hide_probes = not self.hide_probes
        self.message = ("the cockpit's probe lines are dropped as they come" if self.hide_probes
                        else "the cockpit's probe lines are kept from now on (those dropped before are gone)")
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
            at = _locate(self.source.lines, view.marked, self._error_at)
        self._find_error(at + 1 if at is not None else view.top_index)

    def _find_error(self, start: int) -> None:
        lines = self.source.snapshot()
        self._generation += 1
        self.message = "searching for the first error…" if start == 0 else "searching for the next error…"
        self._show_status()
        self._search(lines, start, self._generation)

    @work(thread=True, exclusive=True, group="logs-search", name="search for a failure",
          exit_on_error=False)
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
        index = _locate(self.source.lines, found.line, found.index)
        if index is None:
            self.message = "that error line has left the buffer"
        else:
            self._error_at = index
            self.view.jump_to(index, mark=True)
            key = self.key_for("next_error")
            self.message = f"failure at line {index + 1}" + (f": {key} for the next one" if key else "")
        self._show_status()

    # ---- saving ------------------------------------------------------------------------------------

    def action_save(self, full: bool) -> None:
        view = "merged" if self.tab == MERGED else f"rank{self.tab[1:]}"
        what = "all" if full else (view if self.filter is None else f"{view}-filtered")
        default = logs_save_dir() / f"{time.strftime('%Y%m%d-%H%M%S')}-{what}.log"
        lines: Sequence[LogLine | None] = (self.store.merged.snapshot() if full
                                           else self.source.snapshot())
        count = sum(line is not None for line in lines)
        shown = "the full buffer (all ranks, merged)" if full else "this view"

        def chosen(path: str | None) -> None:
            if not path:
                return
            target = Path(path).expanduser()

            def answered(yes: bool | None) -> None:
                if yes:
                    self._save(lines, str(target), True)
                else:
                    self._set_message(f"not saved: {target} kept as it was")

            if target.exists():
                self.app.push_screen(ConfirmOverwrite(target, f"{count:,} log lines"), answered)
            else:
                self._save(lines, str(target), False)

        self.app.push_screen(PathPrompt(f"Save {shown}: {count:,} lines. File name:",
                                        str(default)), chosen)

    @work(thread=True, group="logs-save", name="save the log", exit_on_error=False)
    def _save(self, lines: Sequence[LogLine | None], path: str, overwrite: bool) -> None:
        try:
            if Path(path).parent == logs_save_dir():   # the default place: made on first use
                logs_save_dir().mkdir(mode=0o700, parents=True, exist_ok=True)
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

    def status_rows(self) -> list[Row]:
        """The status line's rows as (parts, separator): the view's state, each follower's, the keys.
        A part never breaks across lines when the row is packed to the width."""
        view = self.view
        state: list[Text] = []
        if view.following:
            state.append(Text("● following", style="ok.soft"))
        else:
            plural = "" if view.new_lines == 1 else "s"
            key = self.key_for("resume")
            state.append(Text(f"⏸ paused — {view.new_lines:,} new line{plural}"
                              + (f" ({key} to follow)" if key else ""), style="warn"))
        state.append(Text(f"{self.tab}: {len(view.source):,} lines"))
        drops = [(r, b.dropped) for r, b in sorted(self.store.ranks.items()) if b.dropped]
        if drops:
            state.append(Text("dropped " + ", ".join(f"r{r} {d:,}" for r, d in drops), style="fail.soft"))
        if self.filter is not None and self.filtered is not None:
            flt, matches = self.filter.text, self.filtered.matches
            state.append(Text(f"filter {flt!r} ±{self.context}: {matches:,} matches", style="bold"))
        on_off = {True: "on", False: "off"}
        state.append(Text(f"ts {on_off[view.show_timestamps]} · wrap {on_off[view.wrap]} · cockpit probes "
                          + ("hidden" if self.hide_probes else "shown"), style="muted"))
        if self.message:
            state.append(Text(self.message, style="italic"))
        followers: list[Text] = []
        states = [(r, self.states.get(r) or FollowEvent(r, "-")) for r in self.ranks]
        same = len({(ev.state, ev.detail) for _, ev in states}) == 1 and len(states) > 1
        for rank, ev in states[:1] if same else states:
            part = Text("all ranks " if same else f"r{rank} ", style="bold")
            part.append(ev.state, style=FOLLOWER_STYLE.get(ev.state, "muted"))
            if ev.detail and ev.state in ("lost", "error", "waiting", "ended"):
                detail = "no container" if NO_CONTAINER in ev.detail else ev.detail
                part.append(f": {detail[:40]}", style="muted")
            followers.append(part)
        return [(state, "  "), (followers, "   "), (self.hint_parts(), " · ")]

    def hint_parts(self) -> list[Text]:
        """The key hints, one part each (from the bindings with the keymap applied)."""
        if self._hints is None:
            self._hints = self.key_hint_parts(HINT_LABELS)
        return self._hints

    def status_text(self) -> Text:
        """The status line as one text (its rows, each on a line of its own, unpacked)."""
        return Text("\n").join(Text(sep).join(parts) for parts, sep in self.status_rows())

    def _show_status(self, *, throttle: bool = False, force: bool = False) -> None:
        now = time.monotonic()
        if throttle and now - self._status_at < STATUS_EVERY:
            self._status_due = True
            return
        self._status_at, self._status_due = now, False
        rows = self.status_rows()
        plain = "\n".join(sep.join(p.plain for p in parts) for parts, sep in rows)
        if force or plain != self._status_text:
            self._status_text = plain
            self.query_one(StatusLine).show(rows)


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
