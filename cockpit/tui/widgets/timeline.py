"""The launch timeline: a row per rank, time across, a coloured segment per phase; durations below."""

from __future__ import annotations

from rich.text import Text
from textual.widgets import Static

from cockpit.recipe.launch import ClusterTimeline, RankTimeline
from cockpit.recipe.phases import PHASE_SHORT, PHASES, Phase

PHASE_STYLE = {
    Phase.LAUNCHED: "grey50", Phase.RUNNING: "bright_black", Phase.DIST_INIT: "blue",
    Phase.ENGRAM: "magenta", Phase.LOADING: "cyan", Phase.KV_CACHE: "yellow",
    Phase.CUDA_GRAPHS: "bright_blue",
    Phase.WAIT_HEAD: "green", Phase.API_START: "bright_green", Phase.READY: "bold green",
}
BAR_PHASES = [p for p in PHASES if p not in (Phase.PENDING, Phase.READY)]


def fmt_secs(s: float) -> str:
    s = max(0.0, s)
    if s < 60:
        return f"{s:.1f}s"
    m, sec = divmod(int(s), 60)
    return f"{m}m{sec:02d}s" if m < 60 else f"{m // 60}h{m % 60:02d}m"


def current_text(tl: RankTimeline) -> Text:
    """The phase a rank is in now, with progress, or why it is red."""
    cond = tl.condition
    if tl.failure is not None:
        word = "followed" if cond == "followed" else "FAILED"
        return Text(f"{word} in {tl.phase.value}: {tl.failure.label}",
                    style="red" if cond == "followed" else "bold red")
    if cond == "unknown":
        return Text(f"UNKNOWN: {tl.unknown}", style="bold red")
    if tl.host_lost_since is not None:
        return Text(f"HOST LOST in {tl.phase.value}", style="bold red")
    if cond == "stopped":
        code = tl.container.exit_code if tl.container is not None else None
        return Text("stopped" + (f" (exit {code})" if code is not None else ""), style="bold")
    if cond == "stopping":
        return Text("stopping …", style="yellow")
    if tl.container is not None and tl.owner == "by hand":
        return Text(f"{tl.phase.value} (started by hand)", style=PHASE_STYLE.get(tl.phase, ""))
    label = tl.phase.value
    if tl.phase is Phase.LOADING and tl.progress:
        label += f" {tl.progress[0]}/{tl.progress[1]}"
    return Text(label, style=PHASE_STYLE.get(tl.phase, ""))


def bar(tl: RankTimeline, t0: float, span_s: float, width: int, now: float) -> Text:
    """Columns of the rank's phases on a common time axis [t0, t0 + span_s]."""
    out = Text()
    if not tl.spans or span_s <= 0:
        return Text("·" * width, style="dim")
    cells: list[tuple[str, str]] = [("·", "dim")] * width
    stop = tl.end_at(now)

    def col(t: float) -> int:  # the last column is kept for the ready mark
        return min(width - 1, max(0, round((t - t0) / span_s * (width - 1))))

    for span in tl.spans:
        if span.phase is Phase.READY:
            a = col(span.start)
            if a < width:
                cells[a] = ("✔", "bold green")
            continue
        a, b = col(span.start), col(span.end if span.end is not None else stop)
        b = max(b, a + 1)
        for i in range(a, min(b, width)):
            cells[i] = ("█", PHASE_STYLE.get(span.phase, ""))
    if tl.failure is not None:
        cells[min(width - 1, col(tl.failure.at))] = ("✖", "bold red")
    elif tl.host_lost_since is not None:
        cells[min(width - 1, col(tl.host_lost_since))] = ("?", "bold red")
    for ch, style in cells:
        out.append(ch, style=style)
    return out


class TimelineView(Static):
    """Renders a ClusterTimeline; call `show(timeline, now)` to redraw."""

    DEFAULT_CSS = "TimelineView { height: auto; padding: 0 1; }"

    def __init__(self, **kwargs: object):
        super().__init__("", **kwargs)  # type: ignore[arg-type]
        self.bar_width = 48

    def show(self, timeline: ClusterTimeline, now: float, targets: dict[int, str] | None = None) -> None:
        """Redraw; the bar takes what the row leaves after rank, host and a status of ~36 columns."""
        width = self.size.width or 130
        self.bar_width = max(12, min(48, width - 16 - 38))
        cell = 8 if width >= 100 else 7
        self.update(render_timeline(timeline, now, self.bar_width, targets or {}, cell=cell))


def render_timeline(timeline: ClusterTimeline, now: float, width: int, targets: dict[int, str],
                    cell: int = 8) -> Text:
    starts = [t.started for t in timeline.ranks.values() if t.started is not None]
    t0 = min(starts) if starts else now
    ends = [now]
    over = ("ready", "failed", "followed", "stopped")
    for t in timeline.ranks.values():
        if t.spans and t.condition in over:
            ends.append(t.spans[-1].start if t.ready else t.end_at(now))
    everything_over = all(t.condition in over for t in timeline.ranks.values() if t.spans)
    span_s = max(1.0, (max(ends[1:]) if everything_over and len(ends) > 1 else now) - t0)
    text = Text()
    text.append(f"{'rank':<6}{'host':<10}", style="bold")
    text.append(f"0s{'':{width - 2 - len(fmt_secs(span_s))}}{fmt_secs(span_s)}", style="dim")
    text.append("  now / total\n", style="bold")
    for rank, tl in timeline.ranks.items():
        text.append(f"{rank:<6}", style="bold")
        text.append(f"{(targets.get(rank) or '')[:9]:<10}")
        text.append_text(bar(tl, t0, span_s, width, now))
        text.append("  ")
        text.append_text(current_text(tl))
        if tl.spans:
            text.append(f"  {fmt_secs(tl.total(now))}", style="dim")
        text.append("\n")
    text.append("\n")
    text.append(f"{'rank':<6}", style="bold")
    for p in BAR_PHASES:
        text.append(f"{PHASE_SHORT[p]:>{cell}}", style=PHASE_STYLE[p])
    text.append(f"{'total':>{cell + 1}}\n", style="bold")
    for rank, tl in timeline.ranks.items():
        durs = tl.durations(now)
        text.append(f"{rank:<6}")
        for p in BAR_PHASES:
            shown = fmt_secs(durs[p]) if p in durs else "-"
            style = "bold" if p is tl.phase and not tl.ready and not tl.failed else ""
            if tl.failure is not None and p is tl.phase:
                style = "bold red"
            text.append(f"{shown:>{cell}}", style=style)
        text.append(f"{fmt_secs(tl.total(now)) if tl.spans else '-':>{cell + 1}}\n")
    legend = Text()
    for p in BAR_PHASES:
        legend.append("█", style=PHASE_STYLE[p])
        legend.append(f" {PHASE_SHORT[p]}  ")
    legend.append("✔ ready  ✖ failed  ? host lost", style="dim")
    text.append_text(legend)
    return text
