"""The launch timeline: a row per rank, time across, a coloured segment per phase; durations below.

Colours are the theme's phase roles (`cockpit.tui.styles.phase_role`). Every line is cut at the widget's
width, never wrapped: the bar shrinks first, then a long status ends in "…" (the failure box below the
timeline says it in full). `compact` (a short terminal) drops the blank line between the two tables.
"""

from __future__ import annotations

from rich.text import Text
from textual import events

from cockpit.recipe.phases import PHASE_SHORT, PHASES, Phase
from cockpit.recipe.timeline import ClusterTimeline, RankTimeline
from cockpit.tui.styles import phase_role
from cockpit.tui.widgets.live import LiveStatic

PHASE_STYLE = {p: phase_role(p) for p in PHASES}
BAR_PHASES = [p for p in PHASES if p not in (Phase.PENDING, Phase.READY)]
MARKS = "✔ ready  ✖ failed  ? host lost"
BAR_MIN, BAR_MAX = 12, 48
STATUS_ROOM = 38        # what a row keeps for "  <status>  <total>" before the bar takes the rest


def fmt_secs(s: float) -> str:
    s = max(0.0, s)
    if s < 60:
        return f"{s:.1f}s"
    m, sec = divmod(int(s), 60)
    return f"{m}m{sec:02d}s" if m < 60 else f"{m // 60}h{m % 60:02d}m"


def current_text(tl: RankTimeline) -> Text:
    """The phase a rank is in now, with progress, or why it failed."""
    cond = tl.condition
    if tl.failure is not None:
        word = "followed" if cond == "followed" else "FAILED"
        return Text(f"{word} in {tl.phase.value}: {tl.failure.label}",
                    style="fail.soft" if cond == "followed" else "fail")
    if cond == "unknown":
        return Text(f"UNKNOWN: {tl.unknown or tl.pending}", style="unknown")
    if tl.host_lost_since is not None:
        return Text(f"HOST LOST in {tl.phase.value}", style="fail")
    if cond == "stopped":
        code = tl.container.exit_code if tl.container is not None else None
        return Text("stopped" + (f" (exit {code})" if code is not None else ""), style="bold")
    if cond == "stopping":
        return Text("stopping …", style="warn.soft")
    if tl.container is not None and tl.owner == "by hand":
        return Text(f"{tl.phase.value} (started by hand)", style=PHASE_STYLE[tl.phase])
    label = tl.phase.value if tl.phase_known else tl.phase_text
    if tl.ready and not tl.boot_seen:
        label = "ready (boot before the log read)"
    if tl.phase is Phase.LOADING and tl.progress:
        label += f" {tl.progress[0]}/{tl.progress[1]}"
    return Text(label, style=PHASE_STYLE[tl.phase])


def bar(tl: RankTimeline, t0: float, span_s: float, width: int, now: float) -> Text:
    """Columns of the rank's phases on a common time axis [t0, t0 + span_s]."""
    out = Text()
    if not tl.spans or span_s <= 0:
        return Text("·" * width, style="muted")
    cells: list[tuple[str, str]] = [("·", "muted")] * width
    stop = tl.end_at(now)

    def col(t: float) -> int:  # the last column is kept for the ready mark
        return min(width - 1, max(0, round((t - t0) / span_s * (width - 1))))

    for span in tl.spans:
        if span.phase is Phase.READY:
            a = col(span.start)
            if a < width:
                cells[a] = ("✔", "ok")
            continue
        a, b = col(span.start), col(span.end if span.end is not None else stop)
        b = max(b, a + 1)
        for i in range(a, min(b, width)):
            cells[i] = ("█", PHASE_STYLE[span.phase])
    if tl.failure is not None:
        cells[min(width - 1, col(tl.failure.at))] = ("✖", "fail")
    elif tl.host_lost_since is not None:
        cells[min(width - 1, col(tl.host_lost_since))] = ("?", "fail")
    for ch, style in cells:
        out.append(ch, style=style)
    return out


class TimelineView(LiveStatic):
    """Renders a ClusterTimeline; call `show(timeline, now)` to redraw (a resize redraws the last one)."""

    DEFAULT_CSS = "TimelineView { height: auto; padding: 0 1; }"

    def __init__(self, *, id: str | None = None, classes: str | None = None):
        super().__init__("", id=id, classes=classes, markup=False)
        self.bar_width = BAR_MAX
        self._shown: tuple[ClusterTimeline, float, dict[int, str], bool] | None = None

    def show(self, timeline: ClusterTimeline, now: float, targets: dict[int, str] | None = None, *,
             compact: bool = False) -> None:
        """Redraw; the bar takes what the row leaves after rank, host and a status of ~36 columns."""
        self._shown = (timeline, now, targets or {}, compact)
        width = self.size.width or 130
        self.bar_width = max(BAR_MIN, min(BAR_MAX, width - 16 - STATUS_ROOM))
        cell = 8 if width >= 6 + 9 * 8 + 9 else 7
        self.update(render_timeline(timeline, now, self.bar_width, targets or {}, cell=cell,
                                    compact=compact, room=width))

    def on_resize(self, event: events.Resize) -> None:
        if self._shown is not None:
            timeline, now, targets, compact = self._shown
            self.show(timeline, now, targets, compact=compact)


def render_timeline(timeline: ClusterTimeline, now: float, width: int, targets: dict[int, str],
                    cell: int = 8, *, compact: bool = False, room: int | None = None) -> Text:
    """The bars (`width` columns) and the phase table (`cell` columns a phase); with `room`, every line
    is cut there (no wrap) and a legend too long for it names the marks only (the table's header shows
    the phase colours)."""
    starts = [t.started for t in timeline.ranks.values() if t.started is not None]
    t0 = min(starts) if starts else now
    ends = [now]
    over = ("ready", "failed", "followed", "stopped")
    for t in timeline.ranks.values():
        if t.spans and t.condition in over:
            ends.append(t.spans[-1].start if t.ready else t.end_at(now))
    everything_over = all(t.condition in over for t in timeline.ranks.values() if t.spans)
    span_s = max(1.0, (max(ends[1:]) if everything_over and len(ends) > 1 else now) - t0)
    rank_w = 6 if room is None or room >= 6 + 9 * cell + cell + 1 else 5
    text = Text(no_wrap=room is not None, overflow="ellipsis")
    text.append(f"{'rank':<{rank_w}}{'host':<10}", style="bold")
    text.append(f"0s{'':{width - 2 - len(fmt_secs(span_s))}}{fmt_secs(span_s)}", style="muted")
    text.append("  now / total\n", style="bold")
    for rank, tl in timeline.ranks.items():
        row = Text()
        row.append(f"{rank:<{rank_w}}", style="bold")
        row.append(f"{(targets.get(rank) or '')[:9]:<10}")
        row.append_text(bar(tl, t0, span_s, width, now))
        row.append("  ")
        status = current_text(tl)
        total = f"  {fmt_secs(tl.total(now))}" if tl.spans and tl.boot_seen else ""
        if room is not None and len(row) + len(status) + len(total) > room:
            status.truncate(max(8, room - len(row) - len(total)), overflow="ellipsis")
        row.append_text(status)
        row.append(total, style="muted")
        text.append_text(row)
        text.append("\n")
    if not compact:
        text.append("\n")
    text.append(f"{'rank':<{rank_w}}", style="bold")
    for p in BAR_PHASES:
        text.append(f"{PHASE_SHORT[p]:>{cell}}", style=PHASE_STYLE[p])
    text.append(f"{'total':>{cell + 1}}\n", style="bold")
    for rank, tl in timeline.ranks.items():
        durs = tl.durations(now)
        text.append(f"{rank:<{rank_w}}")
        for p in BAR_PHASES:
            shown = fmt_secs(durs[p]) if p in durs else "-"
            style = "bold" if p is tl.phase and not tl.ready and not tl.failed else ""
            if tl.failure is not None and p is tl.phase:
                style = "fail"
            text.append(f"{shown:>{cell}}", style=style)
        text.append(f"{fmt_secs(tl.total(now)) if tl.spans and tl.boot_seen else '-':>{cell + 1}}\n")
    legend = Text()
    for p in BAR_PHASES:
        legend.append("█", style=PHASE_STYLE[p])
        legend.append(f" {PHASE_SHORT[p]}  ")
    legend.append(MARKS, style="muted")
    if room is not None and len(legend) > room:
        legend = Text(MARKS, style="muted")
    text.append_text(legend)
    return text
