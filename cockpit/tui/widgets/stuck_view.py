"""Which rank is stuck, as the panes show it: a compact block of a `StuckReport` (the core's judgement,
`cockpit.recipe.stuck`; this widget only renders it). Hidden while the engine is not hung.

One line for the judgement, one per rank (GPU load, utilisation, SM clock, RDMA moving or still, the age and
start of its last log line, its stacks' summary when read), the rank that differs marked; the remedy last.
Compact (a short terminal): the judgement, one short line per rank, no remedy text.
"""

from __future__ import annotations

from rich.text import Text

from cockpit.recipe.stuck import RankEvidence, StuckReport
from cockpit.safetext import safe
from cockpit.tui.widgets.age import span
from cockpit.tui.widgets.live import LiveStatic

STATE_STYLE = {"odd": "fail", "none-differs": "warn", "unknown": "muted"}


def _age(seconds: float | None) -> str:
    return "?" if seconds is None else span(seconds)


def _rank_line(e: RankEvidence, odd: bool, width: int, compact: bool) -> Text:
    text = Text()
    text.append("▶ " if odd else "  ", style="fail" if odd else "")
    text.append(f"rank {e.rank} ", style="fail" if odd else "bold")
    if e.load == "unknown":
        text.append(f"GPU unknown ({safe(e.note or 'not read', 60)})", style="muted")
    else:
        sm = "" if e.sm_mhz is None else f" {e.sm_mhz:>4} MHz"
        text.append(f"{e.load:<7} {e.util:>3} %{sm}", style="fail" if odd else "")
    rdma = "?     " if e.rdma_moving is None else ("moving" if e.rdma_moving else "still ")
    text.append(f"  RDMA {rdma}", style="muted" if e.rdma_moving is None else "")
    if compact:
        return text
    text.append(f"  log {_age(e.last_line_age_s):>6} ago", style="muted")
    st = e.stacks
    if st is not None:
        where = st.summary[-1] if st.state == "read" and st.summary else (st.detail or st.state)
        text.append(f"  stack: {safe(where, 200)}", style="muted")
    elif e.last_line:
        text.append(f"  {safe(e.last_line, 200)}", style="muted")
    text.truncate(max(20, width), overflow="ellipsis")
    return text


def stuck_block(report: StuckReport, width: int, compact: bool = False, ranks: bool = True,
                hint: str = "") -> Text:
    """The report as lines of styled text (`width`: columns available; `ranks` False: the judgement and
    the remedy only, for a view that shows the ranks' figures itself)."""
    text = Text()
    text.append("which rank is stuck: ", style="bold")
    text.append(safe(report.reason, 600), style=STATE_STYLE.get(report.state, ""))
    for e in report.ranks if ranks else ():
        text.append("\n")
        text.append_text(_rank_line(e, e.rank in report.odd, width, compact))
    if not compact and report.remedy:
        text.append("\nwhat to do: ", style="muted")
        text.append(safe(report.remedy, 600), style="warn.soft")
    if hint:
        text.append(f"\n{hint}", style="muted")
    return text


class StuckView(LiveStatic):
    """The block of a hung engine's `StuckReport`; hidden when there is none."""

    DEFAULT_CSS = """
    StuckView { height: auto; padding: 0 1; display: none; }
    """

    def __init__(self, *, id: str | None = None, classes: str | None = None) -> None:
        super().__init__(id=id, classes=classes, markup=False)

    def show(self, report: StuckReport | None, width: int, compact: bool = False, ranks: bool = True,
             hint: str = "") -> None:
        self.display = report is not None
        self.update(stuck_block(report, width, compact, ranks, hint) if report is not None else "")
