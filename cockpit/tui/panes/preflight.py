"""Preflight pane: the recipe's host checks, streamed in as hosts answer, identical answers across ranks
grouped into one row (clush style) with the rank that differs highlighted; Enter shows the commands, the
raw output per rank and the remedy. Re-run one check, one host, or all. Observes only. Everything a
host printed is neutralised (`cockpit.safetext`); an unknown check is counted apart from the passes."""

from __future__ import annotations

import time
from pathlib import Path

from rich.text import Text
from textual import events, work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.widgets import DataTable, Static
from textual.worker import Worker, WorkerState

from cockpit.recipe.checks import (
    CheckResult,
    GroupRow,
    PreflightEvent,
    PreflightFinished,
    PreflightStarted,
    Verdict,
    group_results,
    ranks_text,
)
from cockpit.recipe.preflight import CHECKS, run_preflight
from cockpit.remedy import cockpit_remedy
from cockpit.safetext import clip, neutralise, neutralise_block
from cockpit.tui.context import CockpitContext
from cockpit.tui.dialogs import Detail
from cockpit.tui.messages import PreflightProgress
from cockpit.tui.pane import Pane

STYLE = {Verdict.PASS: "ok.soft", Verdict.WARN: "warn", Verdict.FAIL: "fail", Verdict.UNKNOWN: "unknown"}
LABEL = {Verdict.PASS: "pass", Verdict.WARN: "WARN", Verdict.FAIL: "FAIL", Verdict.UNKNOWN: "unknown"}
COLUMNS = ("step", "check", "result", "ranks", "observed")
ORDER = {c.id: i for i, c in enumerate(CHECKS)}
RAW_LIMIT = 20_000      # characters of one rank's raw output shown in the detail view
OBSERVED_MIN = 24       # the observed column is clipped to the pane's width, never below this


def detail_text(row: GroupRow, results: list[CheckResult], config_path: Path | None = None) -> Text:
    """One row's check on each of its ranks: observed value, remedy, command lines and raw output
    (remedies quote cockpit commands with --config when the config is not the one discovery finds)."""
    text = Text()
    text.append(f"{row.check} — {row.title} (recipe step {row.step})\n", style="bold")
    for r in results:
        text.append(f"\nrank {r.rank}: ", style="bold")
        text.append(LABEL[r.verdict], style=STYLE[r.verdict])
        text.append(f"  {neutralise(r.value)}\n")
        if r.detail:
            text.append(f"  {neutralise_block(r.detail)}\n", style="muted")
        if r.remedy:
            text.append("  remedy: ", style="bold")
            text.append(f"{neutralise(cockpit_remedy(r.remedy, config_path))}\n")
        if r.raw:
            text.append(neutralise_block(clip(r.raw, RAW_LIMIT)) + "\n", style="muted")
    return text


def fmt_age(seconds: float) -> str:
    """`42 s`, `3 min`, `2 h 05 min`."""
    if seconds < 60:
        return f"{seconds:.0f} s"
    if seconds < 3600:
        return f"{seconds // 60:.0f} min"
    return f"{seconds // 3600:.0f} h {seconds % 3600 // 60:02.0f} min"


class PreflightPane(Pane):
    """Grouped table of check results with a status line; workers run the checks over the fleet."""

    TITLE = "Preflight"
    HEADLESS = "r37-cockpit preflight"
    FOCUS = "#preflight-table"
    HINTS = ("run_all", "rerun_check", "rerun_host", "detail")

    BINDINGS = [
        Binding("a", "run_all", "Run all", id="preflight.run_all"),
        Binding("c", "rerun_check", "Re-run check", id="preflight.rerun_check"),
        Binding("h", "rerun_host", "Re-run host", id="preflight.rerun_host"),
        Binding("enter", "detail", "Detail", id="preflight.detail"),
        Binding("f", "fabric", "Fabric test", id="preflight.fabric", show=False),   # and the palette
    ]
    DEFAULT_CSS = """
    PreflightPane #preflight-table { height: 1fr; }
    PreflightPane #preflight-status { height: auto; padding: 0 1; }
    """

    def __init__(self, ctx: CockpitContext, *, id: str | None = None, classes: str | None = None):
        super().__init__(ctx, id=id, classes=classes)
        self.results: dict[tuple[str, int], CheckResult] = {}
        self.rows: list[GroupRow] = []
        self.pending: set[tuple[str, int]] = set()
        self.running = False
        self.finished = False
        self.shown_at: float | None = None       # when the results shown were published (their age)

    def compose(self) -> ComposeResult:
        yield DataTable(id="preflight-table", cursor_type="row", zebra_stripes=True)
        yield Static(id="preflight-status", markup=False)

    def on_mount(self) -> None:
        table = self.query_one(DataTable)
        for col in COLUMNS:
            table.add_column(col, key=col)
        self.refresh_view()
        self.set_interval(5.0, self._age_tick)

    def _age_tick(self) -> None:
        """The results' age moves on; a preflight the launch gate ran again meanwhile is shown instead."""
        p = self.ctx.preflight
        newer = p is not None and (self.shown_at is None or p.at > self.shown_at)
        if p is not None and newer and not p.running and not self.running:
            self.results = {(r.check, r.rank): r for r in p.results}
            self.finished, self.shown_at = True, p.at
            self.refresh_view()
        elif self.results and not self.running:
            self.query_one("#preflight-status", Static).update(self._status_line())

    def on_resize(self, event: events.Resize) -> None:
        self.refresh_view()     # the observed column is clipped to the width

    # ---- events (from the worker, or fed directly by tests) ------------------------------------------

    def on_preflight_progress(self, message: PreflightProgress) -> None:
        self.apply(message.event)

    def apply(self, event: PreflightEvent) -> None:
        if isinstance(event, PreflightStarted):
            self.running, self.finished = True, False
            self.pending = {(c.id, r) for c in event.checks for r in c.ranks}
        elif isinstance(event, CheckResult):
            self.results[(event.check, event.rank)] = event
            if event.final:
                self.pending.discard((event.check, event.rank))
        elif isinstance(event, PreflightFinished):
            self.running, self.finished = False, True
            self.pending.clear()
        self.refresh_view()
        if not isinstance(event, CheckResult) or not self.running:
            self._publish()

    def _publish(self) -> None:
        """The launch gate reads this cockpit's latest preflight from the context."""
        results = sorted(self.results.values(), key=lambda r: (ORDER.get(r.check, 99), r.rank))
        self.ctx.set_preflight(results, running=self.running or not self.finished)
        if self.ctx.preflight is not None:
            self.shown_at = self.ctx.preflight.at

    def on_worker_state_changed(self, event: Worker.StateChanged) -> None:
        """A preflight run that failed or was cut short is not running any more (the app shows why); it
        is published as unfinished, which the launch gate never takes for a pass."""
        if event.worker.group == "preflight" and event.state in (WorkerState.ERROR, WorkerState.CANCELLED) \
                and self.running:
            self.running = False
            self.pending.clear()
            self.refresh_view()
            self._publish()

    # ---- rendering ------------------------------------------------------------------------------------

    def _observed_width(self, rows: list[GroupRow]) -> int:
        """What the observed column may take: the pane's width less the other columns (and their gaps)."""
        table = self.query_one(DataTable)
        width = self.size.width or 130
        others = [max(len(h), *(len(v) for v in vals)) if vals else len(h) for h, vals in (
            ("step", [str(r.step) for r in rows]), ("check", [r.check for r in rows]),
            ("result", [LABEL[r.verdict] for r in rows]), ("ranks", [ranks_text(r.ranks) for r in rows]))]
        gaps = 2 * table.cell_padding * len(COLUMNS)
        scrollbar = 2 if len(rows) + 1 > table.size.height else 0
        return max(OBSERVED_MIN, width - sum(others) - gaps - scrollbar)

    def refresh_view(self) -> None:
        table = self.query_one(DataTable)
        keep = table.cursor_row
        results = sorted(self.results.values(), key=lambda r: (ORDER.get(r.check, 99), r.rank))
        self.rows = group_results(results)
        room = self._observed_width(self.rows)
        table.clear()
        for i, row in enumerate(self.rows):
            verdict = Text(LABEL[row.verdict], style=STYLE[row.verdict])
            ranks = Text(ranks_text(row.ranks), style="reverse bold" if row.odd else "")
            value = Text(neutralise(row.value), style="bold" if row.odd else "", no_wrap=True,
                         overflow="ellipsis")
            value.truncate(room, overflow="ellipsis")
            table.add_row(str(row.step), Text(row.check), verdict, ranks, value, key=str(i))
        if self.rows:
            table.move_cursor(row=min(keep, len(self.rows) - 1))
        self.query_one("#preflight-status", Static).update(self._status_line())

    def _status_line(self) -> Text:
        counts = {v: sum(1 for r in self.results.values() if r.verdict is v) for v in Verdict}
        text = Text()
        if not self.results and not self.running:
            key = self.key_for("run_all")
            text.append(f"press {key} to run the preflight (it only reads from the hosts)" if key
                        else "the preflight has not run", style="bold")
            text.append("   ")
            text.append_text(self.key_hints())
            return text
        if self.running:
            text.append(f"running… {len(self.pending)} pending  ", style="bold")
        text.append(f"{counts[Verdict.PASS]} passed", style="ok.soft")
        text.append(", ")
        failed = counts[Verdict.FAIL]
        text.append(f"{failed} failed", style="fail" if failed else "")
        text.append(f", {counts[Verdict.WARN]} warnings, ")
        unknown = counts[Verdict.UNKNOWN]
        text.append(f"{unknown} unknown (not a pass)" if unknown else "0 unknown",
                    style="unknown" if unknown else "")
        text.append_text(self._age_text())
        text.append("   ")
        text.append_text(self.key_hints())
        return text

    def _age_text(self) -> Text:
        """When the results shown were taken, and whether the launch gate will take them as they are."""
        p = self.ctx.preflight
        if self.running or p is None or p.running or self.shown_at is None:
            return Text()
        age = max(0.0, time.time() - self.shown_at)
        when = f" · taken {time.strftime('%H:%M:%S', time.localtime(self.shown_at))} ({fmt_age(age)} ago)"
        if not self.ctx.preflight_stale():
            return Text(when, style="muted") if age >= 60 else Text()    # under a minute: as good as live
        why = ("before the last setup job" if self.ctx.setup_finished_at is not None
               and self.ctx.setup_finished_at >= self.shown_at else "a while ago")
        key = self.key_for("run_all") or "r"
        return Text(f"{when} — STALE: taken {why}; press {key} to run it again (a launch runs it again "
                    "itself)", style="warn")

    # ---- actions -------------------------------------------------------------------------------------

    def _selected(self) -> GroupRow | None:
        table = self.query_one(DataTable)
        if not self.rows or table.cursor_row < 0:
            return None
        return self.rows[min(table.cursor_row, len(self.rows) - 1)]

    def action_run_all(self) -> None:
        self.start()

    def action_rerun_check(self) -> None:
        row = self._selected()
        if row is not None:
            self.start(only=[row.check])

    def action_rerun_host(self) -> None:
        row = self._selected()
        if row is not None:
            self.start(ranks=list(row.ranks))

    def on_data_table_row_selected(self, event: DataTable.RowSelected) -> None:
        event.stop()
        self.action_detail()

    def action_detail(self) -> None:
        row = self._selected()
        if row is None:
            return
        results = [self.results[(row.check, r)] for r in row.ranks]
        self.app.push_screen(Detail(detail_text(row, results, self.ctx.config_path), id="preflight-detail"))

    def action_fabric(self) -> None:
        """The fabric test dialog: the perftest commands first, run on Enter (`r37-cockpit fabric`)."""
        from cockpit.locations import state_dir
        from cockpit.tui.dialogs.fabric import FabricScreen
        self.app.push_screen(FabricScreen(self.ctx.config, self.ctx.fleet, state_dir=state_dir()))

    def start(self, only: list[str] | None = None, ranks: list[int] | None = None) -> None:
        """Run (part of) the preflight in a worker; results of other checks/ranks stay as they were."""
        if only is None and ranks is None:
            self.results.clear()
        self._run(only, ranks)

    @work(exclusive=True, group="preflight", exit_on_error=False)
    async def _run(self, only: list[str] | None, ranks: list[int] | None) -> None:
        previous = list(self.results.values())
        async for event in run_preflight(self.ctx.fleet, self.ctx.config, only=only, ranks=ranks,
                                         previous=previous):
            self.post_message(PreflightProgress(event))
