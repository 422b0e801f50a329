"""Launch pane: per-rank dry-run commands, staged launch after confirmation, live timeline, stop.

Keys: `d` dry run (also checks for existing containers), `l` launch (ranks N-1 … 1, then 0, after the
ConfirmCommands dialog; refused while preflight has failures unless the operator ticks the override),
`s` stop (head first, only containers this cockpit started), `r` read the cluster's status (read-only,
works for a cluster launched by hand). All host work runs in workers; results come back as messages.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from rich.text import Text
from textual import work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical, VerticalScroll
from textual.message import Message
from textual.widgets import Log, Static

from cockpit.recipe import launch as L
from cockpit.recipe.ledger import Ledger
from cockpit.recipe.stop import StopItem, execute_stop, plan_stop
from cockpit.tui.confirm import ConfirmCommands, ConfirmResult
from cockpit.tui.context import CockpitContext
from cockpit.tui.widgets.timeline import TimelineView

CONTEXT_SHOWN = 400

VERDICT_STYLE = {"idle": "dim", "launching": "yellow", "ready": "bold green", "down": "bold white on red",
                 "host-lost": "bold red"}


@dataclass
class LaunchEventMsg(Message):
    event: L.LaunchEvent


@dataclass
class DryRunDone(Message):
    runs: dict[int, L.DryRun]
    blockers: list[L.Blocker]


@dataclass
class StatusDone(Message):
    report: L.StatusReport


@dataclass
class StopPlanned(Message):
    plan: list[StopItem]


@dataclass
class Notice(Message):
    text: str
    style: str = ""


def preflight_problems(value: Any) -> list[str]:
    """Why the published preflight verdict does not allow a launch (empty list: it does)."""
    if value is None:
        return ["preflight has not run yet (pane 2)"]
    if getattr(value, "running", False):
        return ["preflight is still running"]
    failed = list(getattr(value, "failed", ()) or ())
    if failed:
        return [f"preflight check {check} failed on rank {rank}" for check, rank in failed]
    if not getattr(value, "ok", False):
        return ["preflight did not pass"]
    return []


class LaunchPane(Vertical, can_focus=True):
    """Dry-run commands, the timeline, the cluster verdict and the first failure's cause and context."""

    BINDINGS = [
        Binding("d", "dry_run", "Dry run", id="launch.dry_run"),
        Binding("l", "launch", "Launch", id="launch.start"),
        Binding("s", "stop", "Stop", id="launch.stop"),
        Binding("r", "status", "Status", id="launch.status"),
    ]
    DEFAULT_CSS = """
    LaunchPane #launch-verdict { height: auto; padding: 0 1; }
    LaunchPane #launch-commands-box { height: auto; max-height: 9; padding: 0 1; }
    LaunchPane #launch-failure { height: auto; padding: 0 1; }
    LaunchPane #launch-context { height: 1fr; min-height: 4; border: round $error; }
    LaunchPane #launch-notice { height: auto; padding: 0 1; }
    """

    def __init__(self, ctx: CockpitContext, **kwargs: object):
        super().__init__(**kwargs)  # type: ignore[arg-type]
        self.ctx = ctx
        self.cfg = ctx.config
        self.timeline = L.ClusterTimeline(self.cfg.ranks)
        self.dry: dict[int, L.DryRun] = {}
        self.blockers: list[L.Blocker] = []
        self.clock: Callable[[], float] = time.time
        self.launching = False
        self._shown_failure: L.Failure | None = None

    def compose(self) -> ComposeResult:
        yield Static(id="launch-verdict", markup=False)
        with VerticalScroll(id="launch-commands-box"):
            yield Static(id="launch-commands", markup=False)
        yield TimelineView(id="launch-timeline")
        yield Static(id="launch-notice", markup=False)
        yield Static(id="launch-failure", markup=False)
        yield Log(id="launch-context", max_lines=CONTEXT_SHOWN, highlight=False)

    def on_mount(self) -> None:
        self.query_one("#launch-context", Log).display = False
        self.refresh_view()
        self.set_interval(1.0, self._tick)

    def on_show(self) -> None:
        """Shown as the active pane: take the focus so its keys work."""
        focused = self.app.focused
        if focused is None or self not in focused.ancestors_with_self:
            self.focus()

    def _tick(self) -> None:
        if any(t.spans and not (t.ready or t.failed) for t in self.timeline.ranks.values()):
            self.refresh_view()

    # ---- rendering ----------------------------------------------------------------------------------

    def refresh_view(self) -> None:
        now = self.clock()
        v = self.timeline.verdict
        self.query_one("#launch-verdict", Static).update(
            Text.assemble(("cluster: ", "bold"), (v.summary, VERDICT_STYLE.get(v.state, ""))))
        self.query_one("#launch-commands", Static).update(self._commands_text())
        targets = {r: self.ctx.config.host(r).ssh for r in self.cfg.ranks}
        self.query_one(TimelineView).show(self.timeline, now, targets)
        self._show_failure()

    def _commands_text(self) -> Text:
        text = Text()
        if not self.dry:
            text.append("d: dry-run every rank (shows the exact command each host will run)  ·  "
                        "l: launch ranks ", style="dim")
            text.append(" → ".join(str(r) for r in L.launch_order(self.cfg.ranks)), style="dim")
            text.append("  ·  s: stop (head first)  ·  r: status", style="dim")
            return text
        for rank in L.launch_order(self.dry):
            d = self.dry[rank]
            text.append(f"rank {rank}  ", style="bold")
            text.append(f"$ {d.launch_command}\n", style="cyan")
            if d.ok:
                text.append(f"        {d.output}\n", style="dim")
            else:
                text.append(f"        dry run FAILED: {d.error}\n", style="red")
        for b in self.blockers:
            text.append(f"refused: {b.reason}\n", style="bold red")
            text.append(f"  what to do: {b.remedy}\n", style="red")
        return text

    def _show_failure(self) -> None:
        first = self.timeline.verdict.first_failed
        failure = self.timeline[first].failure if first is not None else None
        box = self.query_one("#launch-failure", Static)
        log = self.query_one("#launch-context", Log)
        if failure is None:
            box.update("")
            log.display = False
            self._shown_failure = None
            return
        extra = f"\n  container: {failure.exit_reason}" if failure.exit_reason else ""
        box.update(Text.assemble((f"rank {failure.rank}: {failure.label}\n", "bold red"),
                                 ("  cause: ", "bold"), (failure.cause, "red"), extra,
                                 ("\n  remedy: ", "bold"), failure.remedy,
                                 (f"\n  {len(failure.context)} lines before the cause below", "dim")))
        if failure != self._shown_failure:
            log.clear()
            log.write_lines([_plain(line) for line in failure.context])
            log.display = True
            self._shown_failure = failure

    # ---- applying events ------------------------------------------------------------------------------

    def apply(self, event: L.LaunchEvent) -> None:
        """Feed one launch event (from the launcher, or a snapshot test) into the view's model."""
        if isinstance(event, L.ApiChanged):
            self.ctx.publish("api", event.readiness)
        self.refresh_view()

    def on_launch_event_msg(self, message: LaunchEventMsg) -> None:
        self.apply(message.event)

    def show_dry_run(self, runs: dict[int, L.DryRun], blockers: list[L.Blocker]) -> None:
        self.dry, self.blockers = runs, blockers
        self.refresh_view()

    def on_dry_run_done(self, message: DryRunDone) -> None:
        self.show_dry_run(message.runs, message.blockers)

    def on_notice(self, message: Notice) -> None:
        self.query_one("#launch-notice", Static).update(Text(message.text, style=message.style))

    def on_status_done(self, message: StatusDone) -> None:
        report = message.report
        fresh = L.ClusterTimeline(self.cfg.ranks)
        for r in report.ranks:
            tl = fresh[r.rank]
            if r.container is not None:
                tl.launched(r.container.started_at or self.clock(), r.container.id)
                tl.enter(r.phase, self.clock())
                tl.progress = r.progress
                tl.failure = r.failure
        self.timeline = fresh
        self.timeline.settle([])
        self.ctx.publish("api", report.api)
        owners = ", ".join(f"rank {r.rank}: {r.owner}" for r in report.ranks if r.container is not None)
        self.post_message(Notice(f"status (read-only) — API: {report.api.message}"
                                 + (f" — started by: {owners}" if owners else ""), "dim"))
        self.refresh_view()

    # ---- actions ----------------------------------------------------------------------------------

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        return not (self.ctx.read_only and action in ("launch", "stop"))

    def action_dry_run(self) -> None:
        self.post_message(Notice("dry run on every rank …", "yellow"))
        self._dry_run_worker()

    @work(exclusive=True, group="launch-dry", exit_on_error=False)
    async def _dry_run_worker(self) -> None:
        runs = await L.dry_run(self.ctx.fleet, self.cfg)
        blockers = await L.launch_blockers(self.ctx.fleet, self.cfg)
        self.post_message(DryRunDone(runs, blockers))
        self.post_message(Notice("dry run done" if all(d.ok for d in runs.values()) and not blockers
                                 else "dry run: see the problems above", "dim"))

    def action_launch(self) -> None:
        if self.launching:
            self.post_message(Notice("a launch is already being followed", "yellow"))
            return
        if not self.dry or not all(d.ok for d in self.dry.values()):
            self.post_message(Notice("run the dry run first (d): every rank's command must be shown and work",
                                     "bold red"))
            return
        if self.blockers:
            self.post_message(Notice(f"launch refused: {self.blockers[0].reason} — {self.blockers[0].remedy}",
                                     "bold red"))
            return
        problems = preflight_problems(self.ctx.facts.get("preflight"))
        commands = [(f"rank {r} ({self.ctx.fleet[r].target})" + (" — head, last" if r == 0 else ""),
                     self.dry[r].launch_command) for r in L.launch_order(self.cfg.ranks)]
        note = ("launch refused while preflight is not clean: " + "; ".join(problems[:4])
                + (" …" if len(problems) > 4 else "")) if problems else ""
        screen = ConfirmCommands("Launch the cluster in this order (one command per host)?", commands,
                                 note=note, override_label="launch anyway: override preflight failures"
                                 if problems else None)
        self.app.push_screen(screen, self._launch_confirmed)

    def _launch_confirmed(self, result: ConfirmResult | None) -> None:
        if result is None:
            self.post_message(Notice("launch cancelled", "dim"))
            return
        self.launching = True
        self.timeline = L.ClusterTimeline(self.cfg.ranks)
        self._launch_worker(result.override)

    @work(exclusive=True, group="launch", exit_on_error=False)
    async def _launch_worker(self, overridden: bool) -> None:
        why = " (preflight overridden by the operator)" if overridden else ""
        self.post_message(Notice(f"launching{why}", "yellow"))
        launcher = L.Launcher(self.ctx.fleet, self.cfg, emit=lambda ev: self.post_message(LaunchEventMsg(ev)),
                              api_url=self.ctx.api_url)
        self.timeline = launcher.timeline
        try:
            await launcher.launch()
            await launcher.run_until(lambda _t: False)   # keep following: a crash after ready turns red too
        finally:
            await launcher.close()
            self.launching = False

    def action_stop(self) -> None:
        self.post_message(Notice("planning stop …", "yellow"))
        self._plan_stop_worker()

    @work(exclusive=True, group="launch-stop", exit_on_error=False)
    async def _plan_stop_worker(self) -> None:
        plan = await plan_stop(self.ctx.fleet, self.cfg, Ledger(self.cfg))
        self.post_message(StopPlanned(plan))

    def on_stop_planned(self, message: StopPlanned) -> None:
        todo = [i for i in message.plan if i.action == "stop"]
        skipped = "; ".join(f"rank {i.rank}: {i.reason}" for i in message.plan if i.action == "skip")
        if not todo:
            self.post_message(Notice("nothing to stop: no running container started by this cockpit "
                                     "(a cluster launched by hand is never stopped here)"
                                     + (f" — {skipped}" if skipped else ""), "yellow"))
            return
        commands = [(f"rank {i.rank} ({self.ctx.fleet[i.rank].target})" + (" — head, first" if i.rank == 0
                                                                           else ""), i.command) for i in todo]
        screen = ConfirmCommands("Stop these containers, head first? (docker stop only; never removed)",
                                 commands, note=f"left alone: {skipped}" if skipped else "")
        self.app.push_screen(screen, lambda r: self._stop_confirmed(r, message.plan))

    def _stop_confirmed(self, result: ConfirmResult | None, plan: list[StopItem]) -> None:
        if result is None:
            self.post_message(Notice("stop cancelled", "dim"))
            return
        self._stop_worker(plan)

    @work(exclusive=True, group="launch-stop", exit_on_error=False)
    async def _stop_worker(self, plan: list[StopItem]) -> None:
        outcomes = await execute_stop(self.ctx.fleet, plan, Ledger(self.cfg))
        text = "; ".join(f"rank {o.rank}: {'stopped' if o.ok else 'FAILED ' + o.message}" for o in outcomes)
        self.post_message(Notice(f"stop: {text}", "bold" if all(o.ok for o in outcomes) else "bold red"))

    def action_status(self) -> None:
        if self.launching:
            self.post_message(Notice("following the launch live; status is for a cluster not launched here",
                                     "dim"))
            return
        self._status_worker()

    @work(exclusive=True, group="launch-status", exit_on_error=False)
    async def _status_worker(self) -> None:
        self.post_message(StatusDone(await L.cluster_status(self.ctx.fleet, self.cfg,
                                                            api_url=self.ctx.api_url)))


def _plain(line: str) -> str:
    """Host text for the Log widget: control characters neutralised."""
    return "".join(ch if ch.isprintable() or ch == "\t" else "�" for ch in line)
