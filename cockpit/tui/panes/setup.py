"""Setup pane: pick a job (and ranks), see the exact commands per host, confirm, then follow per-host
progress bars and the job log; cancel one rank or all, resume what did not finish. Refused in read-only
mode. Host work runs in workers; the pane only applies the typed events they post."""

from __future__ import annotations

from dataclasses import dataclass, field

from rich.text import Text
from textual import events, work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.reactive import reactive
from textual.widgets import DataTable, Log, Static
from textual.worker import Worker, WorkerState

from cockpit.hosts import HostStatus
from cockpit.recipe.checks import human_bytes
from cockpit.recipe.history import mark_host_change
from cockpit.recipe.progress import Progress, human_eta, human_rate
from cockpit.recipe.setup import SetupRun, expand_jobs, plan_setup
from cockpit.recipe.setup_model import (
    JOB_TITLES,
    JOBS,
    JobLog,
    RankDone,
    RankState,
    SetupError,
    SetupEvent,
    SetupFinished,
    SetupPlan,
    SetupStarted,
    StepProgress,
    StepStarted,
)
from cockpit.remedy import cockpit_remedy
from cockpit.safetext import neutralise_block, safe
from cockpit.tui.context import CockpitContext
from cockpit.tui.dialogs import ConfirmCommands, ConfirmResult
from cockpit.tui.messages import SetupPlanned, SetupProgress
from cockpit.tui.pane import Pane

CHOICES = (*JOBS, "all")
COLUMNS = ("rank", "host", "job", "step", "progress", "done", "rate", "ETA", "state")
# too narrow for every column: job and step share one, host and done move to the line below the table
NARROW_COLUMNS = ("rank", "job · step", "progress", "rate", "ETA", "state")
BAR, NARROW_BAR = 14, 8
STEP_MIN = 12           # the narrow layout's job · step column never gets fewer columns than this
LOG_LINES = 2000
STATE_STYLE = {"waiting": "muted", "running": "warn.soft", RankState.DONE.value: "ok",
               RankState.SKIPPED.value: "ok.soft", RankState.FAILED.value: "fail",
               RankState.REFUSED.value: "fail", RankState.CANCELLED.value: "warn"}


@dataclass
class RankRow:
    """What the pane shows for one rank."""

    rank: int
    job: str = ""
    step: str = ""
    state: str = "waiting"
    message: str = ""
    progress: Progress | None = None
    outcomes: dict[str, RankDone] = field(default_factory=dict)


def progress_bar(p: Progress | None, state: str, width: int = BAR) -> Text:
    frac = p.fraction if p is not None else None
    if frac is None:
        frac = 1.0 if state in ("done", "skipped") else None
    if frac is None:
        return Text("░" * width + "     ", style="muted")
    filled = round(frac * width)
    return Text.assemble(("█" * filled, "ok.soft" if state != "failed" else "fail.soft"),
                         ("░" * (width - filled), "muted"), f" {frac * 100:3.0f}%")


def progress_done(p: Progress | None) -> str:
    if p is None:
        return ""
    parts = []
    if p.bytes_done is not None:
        total = f"/{human_bytes(p.bytes_total)}" if p.bytes_total else ""
        parts.append(human_bytes(p.bytes_done).replace(" ", "") + total.replace(" ", ""))
    if p.files_total:
        parts.append(f"{p.files_done}/{p.files_total} files")
    return " · ".join(parts)


def clipped(text: str, width: int) -> Text:
    out = Text(text, no_wrap=True, overflow="ellipsis")
    out.truncate(max(1, width), overflow="ellipsis")
    return out


class SetupPane(Pane):
    """Job chooser, per-rank progress table, job log and a status line."""

    TITLE = "Setup"
    HEADLESS = "r37-cockpit setup all"
    FOCUS = "#setup-table"
    HINTS = ("next_job", "next_ranks", "plan", "start", "cancel_rank", "cancel_all", "resume")

    BINDINGS = [
        Binding("j", "next_job", "Job", id="setup.next_job"),
        Binding("r", "next_ranks", "Ranks", id="setup.ranks"),
        Binding("p", "plan", "Plan", id="setup.plan"),
        Binding("s", "start", "Start", id="setup.start"),
        Binding("x", "cancel_all", "Cancel all", id="setup.cancel"),
        Binding("c", "cancel_rank", "Cancel rank", id="setup.cancel_rank"),
        Binding("u", "resume", "Resume", id="setup.resume"),
    ]
    DEFAULT_CSS = """
    SetupPane #setup-choice { height: auto; padding: 0 1; }
    SetupPane #setup-table { height: auto; max-height: 12; }
    SetupPane #setup-row { height: 1; padding: 0 1; display: none; }
    SetupPane.-narrow #setup-row { display: block; }
    SetupPane #setup-causes { height: auto; max-height: 8; padding: 0 1; }
    SetupPane #setup-log { height: 1fr; min-height: 4; border: round $accent; }
    SetupPane #setup-status { height: auto; padding: 0 1; }
    """

    running: reactive[bool] = reactive(False, bindings=True)
    """A setup job is running: the footer greys out the keys that would start another."""

    def __init__(self, ctx: CockpitContext, *, id: str | None = None, classes: str | None = None):
        super().__init__(ctx, id=id, classes=classes)
        self.job = "all"
        self.rank_filter: int | None = None
        self.rows: dict[int, RankRow] = {r: RankRow(r) for r in ctx.config.ranks}
        self.plan: SetupPlan | None = None
        self.run_handle: SetupRun | None = None
        self.final: SetupFinished | None = None
        self.notice = Text("")
        self.columns: tuple[str, ...] = ()

    def compose(self) -> ComposeResult:
        yield Static(id="setup-choice", markup=False)
        yield DataTable(id="setup-table", cursor_type="row", zebra_stripes=True)
        yield Static(id="setup-row", markup=False)
        yield Static(id="setup-causes", markup=False)
        yield Log(id="setup-log", max_lines=LOG_LINES, highlight=False)
        yield Static(id="setup-status", markup=False)

    def on_mount(self) -> None:
        self.refresh_view()

    def on_resize(self, event: events.Resize) -> None:
        self.refresh_view()     # the layout follows the width

    # ---- rendering ----------------------------------------------------------------------------------

    def _ranks(self) -> list[int] | None:
        return None if self.rank_filter is None else [self.rank_filter]

    def refresh_view(self) -> None:
        ranks = "all ranks" if self.rank_filter is None else f"rank {self.rank_filter}"
        choice = Text.assemble(("job ", "muted"))
        for name in CHOICES:
            choice.append(f" {name} ", style="reverse bold" if name == self.job else "")
        choice.append(f"   {ranks}", style="bold")
        if self.ctx.read_only:
            choice.append("   read-only: setup is disabled", style="fail")
        else:
            choice.append(f"   — {JOB_TITLES.get(self.job, 'every job in order')}", style="muted")
        self.query_one("#setup-choice", Static).update(choice)
        self._fill_table()
        causes, why = self.query_one("#setup-causes", Static), self._causes()
        causes.update(why)
        causes.display = bool(why.plain)
        self.query_one("#setup-status", Static).update(self._status())

    def host_changed(self, status: HostStatus) -> None:
        """A host said its name (it connected): the table's host column names it."""
        if self.renamed(status) and self.is_mounted:
            self.refresh_view()

    def _cells(self, rank: int, bar: int) -> dict[str, Text | str]:
        row = self.rows[rank]
        p = row.progress
        return {"rank": str(rank), "host": self.host_label(rank), "job": row.job,
                "step": row.step, "progress": progress_bar(p, row.state, bar), "done": progress_done(p),
                "rate": human_rate(p.rate) if p and p.rate is not None else "",
                "ETA": human_eta(p.eta) if p and p.eta is not None else "",
                "state": Text(row.state, style=STATE_STYLE.get(row.state, ""))}

    def _fill_table(self) -> None:
        """Every column when the pane is wide enough for them; else the narrow layout (rank, job · step,
        a shorter bar, rate, ETA, state: host and done go to the line below, for the selected rank)."""
        table = self.query_one(DataTable)
        keep = table.cursor_row
        ranks = sorted(self.rows)
        width = (self.size.width or 160) - (2 if len(ranks) + 1 > 12 else 0)   # 12: the table's max height
        gaps = 2 * table.cell_padding
        wide = [self._cells(r, BAR) for r in ranks]

        def need(col: str, rows: list[dict[str, Text | str]]) -> int:
            return max([len(col)] + [len(str(c[col])) for c in rows]) + gaps

        narrow = sum(need(c, wide) for c in COLUMNS) > width
        columns = NARROW_COLUMNS if narrow else COLUMNS
        rows: list[dict[str, Text | str]] = wide
        if narrow:
            rows = [self._cells(r, NARROW_BAR) for r in ranks]
            room = max(STEP_MIN, width - sum(need(c, rows) for c in columns if c != "job · step") - gaps)
            for c in rows:
                c["job · step"] = clipped(": ".join(str(c[k]) for k in ("job", "step") if c[k]), room)
        self.set_class(narrow, "-narrow")
        if columns != self.columns:
            table.clear(columns=True)
            for col in columns:
                table.add_column(col, key=col)
            self.columns = columns
        else:
            table.clear()
        for rank, cells in zip(ranks, rows, strict=True):
            table.add_row(*(cells[c] for c in columns), key=str(rank))
        if ranks:
            table.move_cursor(row=max(0, min(keep, len(ranks) - 1)))
        self._show_row()

    def _selected_rank(self) -> int | None:
        table = self.query_one(DataTable)
        ranks = sorted(self.rows)
        return ranks[table.cursor_row] if 0 <= table.cursor_row < len(ranks) else None

    def _show_row(self) -> None:
        """The narrow layout's line below the table: what its columns left out, for the selected rank."""
        rank = self._selected_rank()
        line = self.query_one("#setup-row", Static)
        if rank is None or not self.has_class("-narrow"):
            line.update("")
            return
        cells = self._cells(rank, BAR)
        text = Text.assemble((f"rank {rank}", "bold"), " ", (str(cells["host"]), "muted"))
        for key in ("job", "step", "done"):
            if cells[key]:
                text.append(f" · {cells[key]}")
        text.no_wrap, text.overflow = True, "ellipsis"
        line.update(text)

    def on_data_table_row_highlighted(self, event: DataTable.RowHighlighted) -> None:
        self._show_row()

    def _fix(self, text: str) -> str:
        """A message with its quoted cockpit commands made to work with this config (`--config`)."""
        return cockpit_remedy(text, self.ctx.config_path)

    def _causes(self) -> Text:
        """Why each rank that is not ok stopped (full text: the table only has room for the state)."""
        text = Text()
        for rank in sorted(self.rows):
            for o in self.rows[rank].outcomes.values():
                if not o.ok:
                    if text:
                        text.append("\n")
                    style = STATE_STYLE.get(o.state.value, "")
                    text.append(f"rank {rank} {o.job} {o.state.value}: ", style=style)
                    text.append(neutralise_block(self._fix(o.message)))
        return text

    def _status(self) -> Text:
        text = Text()
        if self.running:
            text.append("running… ", style="warn")
        elif self.final is not None:
            bad = [o for o in self.final.outcomes if not o.ok]
            text.append("finished: all ok  " if not bad else f"finished: {len(bad)} not ok  ",
                        style="ok" if not bad else "fail")
        text.append_text(self.notice)
        text.rstrip()
        if text:
            text.append("   ")
        text.append_text(self.key_hints())
        return text

    def _keyed(self, action: str, text: str) -> str:
        """`text` with "{key}" as the key bound to `action` now ("" when it has none: then without)."""
        key = self.key_for(action)
        return text.format(key=key) if key else text.split(" (", 1)[0]

    def note(self, text: str, style: str = "") -> None:
        self.notice = Text(text, style=style)
        self.query_one("#setup-status", Static).update(self._status())

    # ---- events -------------------------------------------------------------------------------------

    def on_setup_progress(self, message: SetupProgress) -> None:
        self.apply(message.event)

    def apply(self, event: SetupEvent) -> None:
        """Fold one runner event into the view (the worker posts them; tests feed them directly)."""
        log = self.query_one("#setup-log", Log)
        if isinstance(event, SetupStarted):
            self.running, self.final = True, None
            for rank in event.ranks:
                self.rows[rank] = RankRow(rank, job=event.jobs[0] if event.jobs else "")
            log.write_line(f"== setup {', '.join(event.jobs)} on rank {', '.join(map(str, event.ranks))}")
        elif isinstance(event, StepStarted):
            row = self.rows.setdefault(event.rank, RankRow(event.rank))
            row.job, row.step, row.state, row.progress = event.job, event.label, "running", None
        elif isinstance(event, StepProgress):
            row = self.rows.setdefault(event.rank, RankRow(event.rank))
            row.progress = event.progress
        elif isinstance(event, JobLog):
            log.write_line(f"[{event.rank} {event.job}] {safe(event.text)}")
        elif isinstance(event, RankDone):
            row = self.rows.setdefault(event.rank, RankRow(event.rank))
            row.outcomes[event.job] = event
            row.job, row.state, row.message = event.job, event.state.value, event.message
            shown = safe(self._fix(event.message))
            log.write_line(f"[{event.rank} {event.job}] {event.state.value}: {shown}")
        elif isinstance(event, SetupFinished):
            self.running, self.final = False, event
            self.ctx.setup_finished()       # a preflight from before this job is stale now
            bad = [o for o in event.outcomes if not o.ok]
            for o in bad:
                row = self.rows.setdefault(o.rank, RankRow(o.rank))
                row.outcomes[o.job] = o
                row.job, row.state, row.message = o.job, o.state.value, o.message
            summary = "; ".join(f"rank {o.rank} {o.job} {o.state.value}" for o in bad)
            log.write_line("== finished: " + (summary or "all ok"))
        self.refresh_view()

    # ---- actions ------------------------------------------------------------------------------------

    def busy(self) -> str:
        return "a setup job is running (quitting cancels its remote commands)" if self.running else ""

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if not self.ctx.allows("setup", action):
            return False                    # hidden: a read-only cockpit
        if (self.running and action in ("start", "resume", "plan")) or \
                (not self.running and action in ("cancel_all", "cancel_rank")):
            return None                     # shown greyed out: not now
        return True

    def action_next_job(self) -> None:
        self.job = CHOICES[(CHOICES.index(self.job) + 1) % len(CHOICES)]
        self.refresh_view()

    def action_next_ranks(self) -> None:
        ranks = sorted(self.ctx.config.ranks)
        if self.rank_filter is None:
            self.rank_filter = ranks[0]
        else:
            i = ranks.index(self.rank_filter) + 1
            self.rank_filter = ranks[i] if i < len(ranks) else None
        self.refresh_view()

    def action_plan(self) -> None:
        self._start_plan(self._ranks(), confirm=False)

    def action_start(self) -> None:
        if self.running:
            self.note(self._keyed("cancel_all", "a job is running (cancel it: {key}, or wait)"), "warn")
            return
        self._start_plan(self._ranks(), confirm=True)

    def action_resume(self) -> None:
        if self.running or self.final is None:
            self.note(self._keyed("start", "nothing to resume: start a job first ({key})"), "warn")
            return
        ranks = sorted({o.rank for o in self.final.outcomes if not o.ok})
        if not ranks:
            self.note("nothing to resume: every rank finished", "muted")
            return
        self._start_plan(ranks, confirm=True)

    def action_cancel_all(self) -> None:
        if self.run_handle is not None and self.running:
            self.run_handle.cancel()
            self.note("cancelling every rank (the remote commands are stopped)", "warn.soft")

    def action_cancel_rank(self) -> None:
        if self.run_handle is None or not self.running:
            return
        rank = self._selected_rank()
        if rank is not None:
            self.run_handle.cancel(rank)
            self.note(f"cancelling rank {rank}", "warn.soft")

    def _start_plan(self, ranks: list[int] | None, *, confirm: bool) -> None:
        self.note(f"reading the hosts to plan {self.job} …", "warn.soft")
        self._plan_worker(self.job, ranks, confirm)

    @work(exclusive=True, group="setup-plan", exit_on_error=False)
    async def _plan_worker(self, job: str, ranks: list[int] | None, confirm: bool) -> None:
        try:
            plan = await plan_setup(self.ctx.fleet, self.ctx.config, expand_jobs(job), ranks=ranks,
                                    overwrite_env=True)
        except SetupError as exc:
            self.post_message(SetupPlanned(None, str(exc)))
            return
        self.post_message(SetupPlanned(plan, confirm=confirm))

    def on_setup_planned(self, message: SetupPlanned) -> None:
        log = self.query_one("#setup-log", Log)
        if message.plan is None:
            self.note(f"cannot plan: {safe(self._fix(message.error))}", "fail")
            return
        plan = self.plan = message.plan
        notes = [neutralise_block(self._fix(text)) for text in plan.notes()]   # host text (diffs)
        log.write_line(f"== plan: {', '.join(jp.job for jp in plan.jobs)}")
        for label, line in plan.commands():
            log.write_line(f"[{label}] $ {line}")
        for text in notes:
            log.write_line(text)
        if not message.confirm:
            self.note(self._keyed("start", "plan shown in the log ({key} to start)"), "muted")
            return
        commands = plan.commands()
        if not plan.runs_anything or not commands:     # never an empty dialog
            self.note("nothing to run: " + ("; ".join(notes) or "every host is complete"), "ok.soft")
            return
        ranks = {r for jp in plan.jobs for r, rp in jp.ranks.items() if rp.steps and not rp.refused}
        self.note(f"plan read: {len(commands)} command{'s' if len(commands) != 1 else ''} on "
                  f"{len(ranks)} rank{'s' if len(ranks) != 1 else ''} (also in the log): confirm or "
                  "cancel them in the dialog", "warn.soft")
        screen = ConfirmCommands(f"Run setup {self.job} with these commands (per host)?", commands,
                                 note=("confirming also REPLACES any cluster.env whose diff is shown\n"
                                       if any(jp.job == "env" and any(rp.note for rp in jp.ranks.values())
                                              for jp in plan.jobs) else "") + "\n".join(notes))
        self.app.push_screen(screen, lambda result: self._confirmed(result, plan))

    def _confirmed(self, result: ConfirmResult | None, plan: SetupPlan) -> None:
        if result is None:
            self.note("cancelled: nothing was run", "muted")
            return
        self.note("")
        mark_host_change("setup")
        self.running = True
        self.run_handle = SetupRun(self.ctx.fleet, plan)
        self._run_worker(self.run_handle)

    @work(exclusive=True, group="setup-run", exit_on_error=False)
    async def _run_worker(self, run: SetupRun) -> None:
        try:
            async for event in run.events():
                self.post_message(SetupProgress(event))
        finally:
            self.running = False

    def on_worker_state_changed(self, event: Worker.StateChanged) -> None:
        """A planner or a run that failed (the app shows why) leaves no "reading the hosts …" or
        "running…" behind: the pane is usable again."""
        if event.state is WorkerState.ERROR and event.worker.group in ("setup-plan", "setup-run"):
            self.notice = Text("")
            self.refresh_view()
