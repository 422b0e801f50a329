"""Stats pane: every rank's GPU, memory and RDMA side by side, rank 0's engine figures, the active
alerts, and one rank in detail (Enter; Escape back). In the detail, `w` moves the history between the
live points and a recorded window of the last 15 min, 1 h or 24 h, or a chosen range (from / until asked
in a dialog, the times `events --since` takes) — the flight recorder's, one point per 1/60 of the window,
each the mean of its samples. In a replay, "now" is the replay clock's (`ctx.now()`).

It renders `ctx.monitor.stats` (the one stats model) and judges nothing itself: the alerts are the
model's. It redraws when the model's version changed or an age it shows would read differently, checked
once a second while shown and on every `StatsChanged`.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from pathlib import Path
from typing import ClassVar

from rich.console import Group
from rich.text import Text
from textual import work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll

from cockpit.recipe.recording import parse_when, path_for
from cockpit.recipe.stuck import stuck_report
from cockpit.safetext import safe
from cockpit.telemetry.cluster_stats import RANK_SERIES, History, stale_after
from cockpit.telemetry.recorder import RecordingUnreadable, read_series
from cockpit.tui.context import CockpitContext
from cockpit.tui.dialogs.range import RangePrompt
from cockpit.tui.pane import Pane
from cockpit.tui.widgets.live import LiveStatic
from cockpit.tui.widgets.stats_view import (
    DETAIL_SPARK,
    age_text,
    alerts_block,
    engine_block,
    gpu_events_block,
    rank_detail,
    rank_table,
    span,
)
from cockpit.tui.widgets.statusline import StatusLine
from cockpit.tui.widgets.stuck_view import StuckView

HINT_LABELS = {"select(-1)": "prev rank", "select(1)": "next rank", "detail": "detail", "back": "back",
               "window": "history window"}
WINDOWS: tuple[tuple[str, float | None], ...] = (("live", None), ("15 min", 900.0), ("1 h", 3600.0),
                                                 ("24 h", 86_400.0), ("chosen range", None))
RANGE = len(WINDOWS) - 1          # the WINDOWS index of the chosen range (from / until asked in a dialog)


class StatsPane(Pane):
    """The cluster view (default) or one rank's detail, with the alerts always listed."""

    TITLE = "Stats"
    HEADLESS = "r37-cockpit stats"
    HINTS = ("select(-1)", "select(1)", "detail", "back")
    can_focus = True

    BINDINGS: ClassVar[list[Binding]] = [  # type: ignore[assignment]
        Binding("up,k", "select(-1)", "Previous rank", id="stats.prev"),
        Binding("down,j", "select(1)", "Next rank", id="stats.next"),
        Binding("enter,d", "detail", "Detail", id="stats.detail"),
        Binding("escape", "back", "Back", id="stats.back"),
        Binding("w", "window", "History window", id="stats.window", show=False),
        Binding("pagedown,space", "scroll(1)", "Page down", id="stats.page_down", show=False),
        Binding("pageup", "scroll(-1)", "Page up", id="stats.page_up", show=False),
    ]
    DEFAULT_CSS = """
    StatsPane #stats-body { height: 1fr; }
    StatsPane #stats-body > Static { height: auto; padding: 0 1; }
    StatsPane #stats-ranks { margin-bottom: 1; }
    StatsPane #stats-alerts { margin-bottom: 1; }
    StatsPane #stats-status { padding: 0 1; }
    """

    def compose(self) -> ComposeResult:
        with VerticalScroll(id="stats-body", can_focus=False):
            yield LiveStatic(id="stats-ranks")
            yield StuckView(id="stats-stuck")
            yield LiveStatic(id="stats-detail")
            yield LiveStatic(id="stats-alerts")
            yield LiveStatic(id="stats-engine")
        yield StatusLine(id="stats-status")

    def __init__(self, ctx: CockpitContext, *, id: str | None = None, classes: str | None = None):
        super().__init__(ctx, id=id, classes=classes)
        ranks = sorted(ctx.monitor.stats.ranks)
        self.selected: int | None = ranks[0] if ranks else None
        self.detail = False
        self._drawn: tuple[object, ...] | None = None
        self._looked = 0.0      # monotonic time of the last redraw (drawn or found unchanged)
        self.window = 0                                 # WINDOWS index: 0 the live history
        self.recorded: History | None = None            # the recorded window read for the selected rank
        self.recorded_note = ""
        self.range: tuple[float, float] | None = None   # the chosen range (since, until), when it is shown

    def on_mount(self) -> None:
        self.set_interval(1.0, self._tick)
        self.refresh_view()

    # ---- keys ---------------------------------------------------------------------------------------

    def action_select(self, step: int) -> None:
        ranks = sorted(self.ctx.monitor.stats.ranks)
        if not ranks:
            return
        at = ranks.index(self.selected) if self.selected in ranks else 0
        self.selected = ranks[(at + step) % len(ranks)]
        if self.detail and self.window:
            self.recorded, self.recorded_note = None, "reading the recording …"
            self._read_window()
        self.redraw()

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        """Detail only from the cluster view, Back only from the detail (the footer shows what works)."""
        if action == "detail":
            return not self.detail
        if action in ("back", "window"):
            return self.detail
        return True

    def action_detail(self) -> None:
        if self.selected is not None:
            self.detail = True
            self.query_one("#stats-body", VerticalScroll).scroll_home(animate=False)
            self.refresh_bindings()
            self.redraw()

    def action_scroll(self, pages: int) -> None:
        body = self.query_one("#stats-body", VerticalScroll)
        (body.scroll_page_down if pages > 0 else body.scroll_page_up)(animate=False)

    def action_back(self) -> None:
        self.detail = False
        self.refresh_bindings()
        self.redraw()

    def action_window(self) -> None:
        """The detail's history: live, then the recorded last 15 min, 1 h, 24 h, a chosen range (asked in
        a dialog: from / until), then live again."""
        window = (self.window + 1) % len(WINDOWS)
        if window == RANGE:
            self.app.push_screen(RangePrompt(), self._range_chosen)
            return
        self.show_window(window)

    def _range_chosen(self, given: tuple[str, str] | None) -> None:
        """The dialog's from / until (None: cancelled, back to live)."""
        if given is None:
            self.show_window(0)
            return
        now = time.time() if self.ctx.replay is None else self.ctx.now()
        try:
            since = parse_when(given[0], now)
            until = parse_when(given[1], now) if given[1].strip() else now
        except ValueError as exc:
            self.app.notify(safe(str(exc), 300), title="history range", severity="warning")
            self.show_window(0)
            return
        if until <= since:
            self.app.notify("the range's end must come after its start", title="history range",
                            severity="warning")
            self.show_window(0)
            return
        self.range = (since, until)
        self.show_window(RANGE)

    def show_window(self, window: int) -> None:
        self.window = window
        if window != RANGE:
            self.range = None
        self.recorded, self.recorded_note = None, "reading the recording …" if self.window else ""
        if self.window:
            self._read_window()
        self.refresh_view()

    def window_span(self) -> tuple[float, float, str] | None:
        """(since, until, label) of the recorded window shown; None: the live history."""
        label, seconds = WINDOWS[self.window]
        if self.window == RANGE and self.range is not None:
            since, until = self.range
            return since, until, f"{_clock(since)} … {_clock(until)}"
        if seconds is None:
            return None
        until = time.time() if self.ctx.replay is None else self.ctx.now()
        return until - seconds, until, f"last {label}"

    @work(exclusive=True, group="stats-window", exit_on_error=False)
    async def _read_window(self) -> None:
        chosen = self.window_span()
        rank = self.selected
        if chosen is None or rank is None:
            return
        since, until, label = chosen
        recording = getattr(self.app, "recording", None)
        flush = recording.recorder.flush if recording is not None else None
        history, note = await asyncio.to_thread(recorded_window, path_for(self.ctx.config), rank,
                                                since, until, label, flush)
        if self.window_span() is not None and self.selected == rank and self.recorded is None:
            self.recorded, self.recorded_note = history, note
            self.refresh_view()

    # ---- drawing ------------------------------------------------------------------------------------

    def _tick(self) -> None:
        """The ages move on when nothing else draws: the monitor's judgement redraws every interval, so
        this only draws when it has not for one and a half (a monitor restarting, say)."""
        if self.shown and time.monotonic() - self._looked >= 1.5 * self.ctx.monitor.interval_s:
            self.redraw()

    def stats_changed(self) -> None:
        """The monitor judged again: redraw if shown (a hidden pane catches up when shown)."""
        if self.shown:
            self.redraw()

    def on_show(self) -> None:
        self.redraw()

    def _signature(self, now: float) -> tuple[object, ...]:
        """What the drawing depends on: the model's version, every age text shown, the layout."""
        stats = self.ctx.monitor.stats
        ages = tuple(age_text(s, stats.interval_s, now)[0] for _, s in sorted(stats.ranks.items()))
        e = stats.engine
        engine_age = None if e is None or now - e.at <= stale_after(stats.interval_s) else span(now - e.at)
        return (stats.version, ages, engine_age, self.size.width, self.selected, self.detail, self.window,
                id(self.recorded), self.recorded_note, self.ctx.watcher.timeline.verdict.state)

    def refresh_view(self) -> None:
        self._drawn = None
        self.redraw()

    def redraw(self) -> None:
        if not self.is_mounted:
            return
        now = time.time() if self.ctx.replay is None else self.ctx.now()
        self._looked = time.monotonic()
        sig = self._signature(now)
        if sig == self._drawn:
            return
        self._drawn = sig
        stats = self.ctx.monitor.stats
        width = max(40, (self.size.width or self.app.size.width) - 2)
        detail = self.detail and self.selected in stats.ranks
        ranks = self.query_one("#stats-ranks", LiveStatic)
        engine = self.query_one("#stats-engine", LiveStatic)
        panel = self.query_one("#stats-detail", LiveStatic)
        ranks.display = engine.display = not detail
        panel.display = detail
        if detail and self.selected is not None:
            sampler = self.ctx.monitor.sampler
            windowed = self.window != 0
            panel.update(rank_detail(stats, self.selected, now, width, sampler.command(self.selected),
                                     sampler.starts.get(self.selected, 0),
                                     (self.recorded or History(DETAIL_SPARK)) if windowed else None,
                                     self.recorded_note if windowed else None))
        stuck = stuck_report(self.ctx.watcher.timeline, stats, None, now)
        self.query_one(StuckView).show(None if detail else stuck, width, ranks=False)
        if not detail:
            table = rank_table(stats, now, width, self.selected, stuck.odd if stuck else ())
            events = gpu_events_block(stats, now, width, self.ctx.config.stats.xid_alert_s)
            ranks.update(table if events is None else Group(table, Text(""), events))
            engine.update(engine_block(stats, now, width))
        self.query_one("#stats-alerts", LiveStatic).update(alerts_block(stats.alerts, width))
        self._show_hints(detail)

    def _show_hints(self, detail: bool) -> None:
        actions = ("back",) if detail else ("select(-1)", "select(1)", "detail")
        parts = [self.key_hints((a,), labels=HINT_LABELS) for a in actions]
        where = Text(f"rank {self.selected} detail" if detail else "cluster view", style="bold")
        if detail and self.window:
            chosen = self.window_span() if self.window == RANGE else None
            where.append(f" · history {chosen[2] if chosen else WINDOWS[self.window][0]} (w)")
        self.query_one("#stats-status", StatusLine).show([([where, *[p for p in parts if p.plain]], " · ")])


def _clock(t: float) -> str:
    return time.strftime("%Y-%m-%d %H:%M", time.localtime(t))


def recorded_window(path: Path, rank: int, since: float, until: float, label: str,
                    flush: Callable[[], object] | None = None) -> tuple[History, str]:
    """The rank's recorded history over [since, until] as DETAIL_SPARK points, each the mean of its slice
    (None where nothing was recorded), and the note the detail shows with it. Runs in a thread."""
    if flush is not None:
        flush()
    step = (until - since) / DETAIL_SPARK
    history = History(DETAIL_SPARK)
    try:
        rows = read_series(path, "samples", since=since, until=until, rank=rank, step=step)
    except FileNotFoundError:
        rows, why = [], "nothing recorded yet"
    except RecordingUnreadable as exc:
        rows, why = [], f"the recording cannot be read: {exc}"
    else:
        why = ""
    slots: dict[int, dict[str, float | None]] = {}
    samples = 0
    for row in rows:
        slot = min(DETAIL_SPARK - 1, max(0, int((row["t"] - since) // step)))
        slots[slot] = {name: row.get(name) for name in RANK_SERIES}
        samples += int(row.get("n") or 0)
    for i in range(DETAIL_SPARK):
        history.add(since + i * step, slots.get(i, dict.fromkeys(RANK_SERIES)))
    if not why and not samples:
        why = f"nothing recorded in the {label}" if label.startswith("last ") else "nothing recorded then"
    note = (f"recorded, {label}: {why}" if why else
            f"recorded, {label}: {samples} samples, one point per {step:g} s (their mean), newest right")
    return history, note
