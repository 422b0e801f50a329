"""Launch pane: the live model of the cluster, per-rank dry runs, staged launch, relaunch, stop.

It renders the app's one `ClusterWatcher` model (`ctx.watcher.timeline`): opened on a running cluster
it shows it as it is, and a stop or a relaunch made anywhere (another cockpit, by hand) shows within
about a second. Keys: `d` dry run (and the launch gate), `l` launch (ranks N-1 … 1, then 0, after the
ConfirmCommands dialog; refused while the gate is closed unless the operator ticks the preflight
override), `R` relaunch (archive the logs of the stopped containers this cockpit started, remove them,
launch), `s` stop (head first, only containers this cockpit started), `r` look again now (the keys as
bound by default; `[ui.keymap]` may remap them, and every hint shows the key bound now). A launch or
stop holds the cluster lock on rank 0's host; the launch is `recipe.launch_run.run_launch`, as the CLI's.
All host work runs in workers; results come back as messages (`cockpit.tui.messages`).

Layout: the verdict and the latest notice stay on top; below them one scrolling body (it takes the
keyboard: arrows and page keys scroll it) holds what to do about the verdict, the timeline with its
phase table, the first failure with its context, and the dry run's commands. On a short terminal the
timeline and the commands compact themselves so that the verdict and the whole phase table fit at 80×24.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from dataclasses import replace

from rich.text import Text
from textual import events, work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.reactive import reactive
from textual.widgets import Log
from textual.worker import Worker, WorkerState

from cockpit.hosts import HostStatus
from cockpit.recipe import launch as L
from cockpit.recipe import launch_run as LR
from cockpit.recipe.history import mark_host_change
from cockpit.recipe.lock import ClusterLock, LockError
from cockpit.recipe.preflight import preflight_results
from cockpit.recipe.replace import ReplaceItem
from cockpit.recipe.stop import StopPlan, drain, execute_stop, plan_stop
from cockpit.recipe.stuck import RankStacks, read_stacks, stuck_report
from cockpit.recipe.timeline import ClusterTimeline, Failure, LaunchEvent, VerdictChanged
from cockpit.remedy import cockpit_remedy
from cockpit.safetext import neutralise
from cockpit.tui.context import CockpitContext
from cockpit.tui.dialogs import ConfirmCommands, ConfirmResult, DrainDialog
from cockpit.tui.keys import key_for
from cockpit.tui.messages import DryRunDone, GateChecked, LaunchNotice, StopPlanned
from cockpit.tui.pane import Pane
from cockpit.tui.widgets.age import span
from cockpit.tui.widgets.live import LiveStatic
from cockpit.tui.widgets.stuck_view import StuckView
from cockpit.tui.widgets.timeline import TimelineView

CONTEXT_SHOWN = 400
SHORT = 30              # a pane fewer rows high than this compacts the timeline and the dry run's commands

VERDICT_STYLE = {"idle": "muted", "launching": "warn.soft", "ready": "ok", "down": "alarm",
                 "host-lost": "fail", "unknown": "unknown", "hung": "alarm", "stopped": "bold",
                 "stopping": "warn.soft", "incomplete": "fail"}


class LaunchPane(Pane):
    """The cluster's verdict, dry-run commands, the timeline, and the first failure's cause and context."""

    TITLE = "Launch"
    HEADLESS = "r37-cockpit launch --dry-run"
    FOCUS = "#launch-body"
    HINTS = ("dry_run", "launch", "relaunch", "stop", "status")

    BINDINGS = [
        Binding("d", "dry_run", "Dry run", id="launch.dry_run"),
        Binding("l", "launch", "Launch", id="launch.start"),
        Binding("R", "relaunch", "Relaunch", id="launch.relaunch"),
        Binding("s", "stop", "Stop", id="launch.stop"),
        Binding("r", "status", "Look again", id="launch.status"),
        Binding("k", "stacks", "Stacks", id="launch.stacks", show=False),
    ]
    DEFAULT_CSS = """
    LaunchPane #launch-verdict { height: auto; padding: 0 1; }
    LaunchPane #launch-notice { height: auto; padding: 0 1; }
    LaunchPane #launch-body { height: 1fr; scrollbar-size-vertical: 1; }
    LaunchPane #launch-todo { height: auto; padding: 0 1; }
    LaunchPane #launch-failure { height: auto; padding: 0 1; }
    LaunchPane #launch-commands { height: auto; padding: 0 1; }
    LaunchPane #launch-context { height: 1fr; min-height: 8; border: round $error; }
    """

    launching: reactive[bool] = reactive(False, bindings=True)
    """A launch is in progress: the keys that would start another are greyed out in the footer."""

    def __init__(self, ctx: CockpitContext, *, id: str | None = None, classes: str | None = None):
        super().__init__(ctx, id=id, classes=classes)
        self.cfg = ctx.config
        self.dry: dict[int, L.DryRun] = {}
        self.dry_at = 0.0                 # when the dry run shown was read (the pane's clock)
        self.gate: L.Gate | None = None
        self.clock: Callable[[], float] = time.time
        self._shown_failure: Failure | None = None
        self._stacks: dict[int, RankStacks] | None = None   # read on the operator's `k` while hung

    @property
    def timeline(self) -> ClusterTimeline:
        """The live model (the app's watcher keeps it; this pane only renders it)."""
        return self.ctx.watcher.timeline

    @property
    def blockers(self) -> list[L.Blocker]:
        return self.gate.blockers if self.gate is not None else []

    def compose(self) -> ComposeResult:
        yield LiveStatic(id="launch-verdict", markup=False)
        yield LiveStatic(id="launch-notice", markup=False)
        with VerticalScroll(id="launch-body"):
            yield LiveStatic(id="launch-todo", markup=False)
            yield TimelineView(id="launch-timeline")
            yield StuckView(id="launch-stuck")
            yield LiveStatic(id="launch-failure", markup=False)
            yield Log(id="launch-context", max_lines=CONTEXT_SHOWN, highlight=False)
            yield LiveStatic(id="launch-commands", markup=False)

    def on_mount(self) -> None:
        self.query_one("#launch-context", Log).display = False
        self.query_one("#launch-notice", LiveStatic).display = False
        self.refresh_view()
        self.set_interval(1.0, self._tick)

    def on_resize(self, event: events.Resize) -> None:
        self.set_class(0 < self.size.height < SHORT, "-short")
        self.refresh_view()

    @property
    def short(self) -> bool:
        return self.has_class("-short")

    def _tick(self) -> None:
        if self.is_on_screen:
            self.refresh_view()

    # ---- rendering ----------------------------------------------------------------------------------

    def refresh_view(self) -> None:
        now = self.clock()
        v = self.timeline.verdict
        summary = v.summary
        if v.state == "idle" and not self.ctx.watcher.looked():
            summary = "looking at every rank's container …"      # not known yet: not "nothing launched"
        label = "" if summary.startswith("cluster ") else "cluster: "    # not "cluster: cluster READY: …"
        verdict = Text.assemble((label, "bold"), (summary, VERDICT_STYLE.get(v.state, "")))
        self.query_one("#launch-verdict", LiveStatic).update(verdict)
        todo = self.query_one("#launch-todo", LiveStatic)
        todo.display = bool(v.remedy and v.state not in ("ready", "launching", "idle"))
        todo.update(Text(f"what to do: {self._fix(v.remedy)}", style="warn") if todo.display else "")
        self.query_one("#launch-commands", LiveStatic).update(self._commands_text(now))
        hosts = {r: self.host_label(r) for r in self.cfg.ranks}
        self.query_one(TimelineView).show(self.timeline, now, hosts, compact=self.short)
        self._show_stuck(now)
        self._show_failure()

    def host_changed(self, status: HostStatus) -> None:
        """A host said its name (it connected): the timeline's host column names it."""
        if self.renamed(status) and self.is_mounted:
            self.refresh_view()

    def _show_stuck(self, now: float) -> None:
        """The hung engine's per-rank evidence (the core's judgement over the one model)."""
        report = stuck_report(self.timeline, self.ctx.monitor.stats, self._stacks, now)
        if report is None:
            self._stacks = None                 # stacks belong to the hang they were read in
        else:
            report = replace(report, remedy=self._fix(report.remedy))
        width = max(40, (self.size.width or self.app.size.width) - 4)
        self.query_one(StuckView).show(report, width, compact=self.short, hint=self._stacks_hint())

    def _stacks_hint(self) -> str:
        key = key_for(self, "stacks", disabled=True)
        return f"{key}: read each rank's Python stacks (py-spy)" if key and self._stacks is None else ""

    def _fix(self, text: str) -> str:
        """A remedy whose quoted cockpit commands carry this cockpit's --config when it is not the default."""
        return cockpit_remedy(text, self.ctx.config_path)

    def _commands_text(self, now: float) -> Text:
        """Before a dry run: the keys and what each does. After: how old the dry run is, each rank's
        launch command and what its dry run printed (short pane: one line per rank, cut at the width),
        then the gate's refusals."""
        order = " → ".join(str(r) for r in L.launch_order(self.cfg.ranks))
        if not self.dry:
            return self.key_hints(labels={
                "dry_run": "dry-run every rank (the exact command each host will run)",
                "launch": f"launch ranks {order}", "relaunch": "relaunch over stopped containers",
                "stop": "stop (head first)", "status": "look again"})
        key = self.key_for("dry_run")
        text = Text(f"dry run {span(now - self.dry_at)} ago", style="muted")
        text.append(f" ({key} runs it again)\n" if key else "\n", style="muted")
        for rank in L.launch_order(self.dry):
            d = self.dry[rank]
            line = Text()
            line.append(f"rank {rank}  ", style="bold")
            if self.short:
                line.append("ok " if d.ok else "FAILED ", style="ok.soft" if d.ok else "fail")
                line.append(f"$ {d.launch_command}" if d.ok else neutralise(d.error),
                            style="command" if d.ok else "fail.soft")
                line.truncate(max(20, self.size.width - 3), overflow="ellipsis")
                text.append_text(line)
                text.append("\n")
                continue
            line.append(f"$ {d.launch_command}\n", style="command")
            if d.ok:
                line.append(f"        {neutralise(d.output)}\n", style="muted")
            else:
                line.append(f"        dry run FAILED: {neutralise(d.error)}\n", style="fail.soft")
            text.append_text(line)
        for b in self.blockers:
            text.append(f"refused: {neutralise(b.reason)}\n", style="fail")
            text.append(f"  what to do: {self._fix(b.remedy)}\n", style="fail.soft")
        text.rstrip()
        return text

    def _show_failure(self) -> None:
        first = self.timeline.verdict.first_failed
        failure = self.timeline[first].failure if first is not None else None
        box = self.query_one("#launch-failure", LiveStatic)
        log = self.query_one("#launch-context", Log)
        if failure is None:
            box.update("")
            box.display = False
            log.display = False
            self._shown_failure = None
            return
        box.display = True
        extra = f"\n  container: {neutralise(failure.exit_reason)}" if failure.exit_reason else ""
        box.update(Text.assemble((f"rank {failure.rank}: {failure.label}\n", "fail"),
                                 ("  cause: ", "bold"), (neutralise(failure.cause), "fail.soft"), extra,
                                 ("\n  remedy: ", "bold"), self._fix(failure.remedy),
                                 (f"\n  the {len(failure.context)} lines before the cause:", "muted")))
        if failure != self._shown_failure:
            log.clear()
            log.write_lines([neutralise(line) for line in failure.context])
            log.display = True
            self._shown_failure = failure

    # ---- the model changed ---------------------------------------------------------------------------

    def busy(self) -> str:
        return "a launch is in progress (its containers keep booting on the hosts)" if self.launching else ""

    def model_changed(self, event: LaunchEvent) -> None:
        """One event of the live model (the watcher's, or a snapshot test's): redraw."""
        if isinstance(event, VerdictChanged) and event.verdict.state in ("ready", "down", "stopped"):
            self._notice("")   # "launching …" is over
        self.refresh_view()

    def show_dry_run(self, runs: dict[int, L.DryRun], blockers: list[L.Blocker]) -> None:
        self.dry, self.gate, self.dry_at = runs, L.Gate(blockers, [], []), self.clock()
        self.refresh_view()

    def on_dry_run_done(self, message: DryRunDone) -> None:
        self.dry, self.gate, self.dry_at = message.runs, message.gate, self.clock()
        self.refresh_view()

    def on_launch_notice(self, message: LaunchNotice) -> None:
        """Notices quote hosts (a lock holder, docker's stderr): neutralised like every host text."""
        self._notice(Text(neutralise(message.text), style=message.style))

    def _notice(self, text: Text | str) -> None:
        notice = self.query_one("#launch-notice", LiveStatic)
        notice.update(text)
        notice.display = bool(text)

    def note(self, text: str, style: str = "") -> None:
        self.post_message(LaunchNotice(text, style))

    def on_worker_state_changed(self, event: Worker.StateChanged) -> None:
        """A failed worker: the app shows its error and remedy; here the pane is made usable again (no
        launch in progress) and its "… in progress" notice goes."""
        if event.state is WorkerState.ERROR:
            if event.worker.group == "launch":
                self.launching = False
            self.note("")

    # ---- actions ----------------------------------------------------------------------------------

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if not self.ctx.allows("launch", action):
            return False                    # hidden: a read-only cockpit
        if self.launching and action in ("dry_run", "launch", "relaunch"):
            return None                     # shown greyed out while a launch runs
        if action == "stacks" and self.timeline.verdict.state != "hung":
            return None                     # stacks are read for a hung engine only
        return True

    def action_dry_run(self) -> None:
        self.note("dry run on every rank …", "warn.soft")
        self._dry_run_worker()

    @work(exclusive=True, group="launch-dry", exit_on_error=False)
    async def _dry_run_worker(self) -> None:
        runs = await L.dry_run(self.ctx.fleet, self.cfg)
        gate = await self._gate(replace=False, fresh_preflight=True)   # never a stale preflight's verdict
        self.post_message(DryRunDone(runs, gate))
        self.note("dry run done" if all(d.ok for d in runs.values()) and gate.open
                  else "dry run: see the problems below", "muted")

    async def _gate(self, *, replace: bool, fresh_preflight: bool) -> L.Gate:
        """The launch gate (the CLI's), with this cockpit's preflight: re-run when stale."""
        return await LR.check_gate(self.ctx.fleet, self.cfg,
                                   lambda: self._preflight_failures(rerun=fresh_preflight),
                                   replace_stopped=replace, ledger=self.ctx.watcher.ledger)

    async def _preflight_failures(self, *, rerun: bool) -> list[str]:
        summary = self.ctx.preflight
        if rerun and self.ctx.preflight_stale():
            self.note("the last preflight is older than a setup job or a few minutes: running it again …",
                      "warn.soft")
            final = await preflight_results(self.ctx.fleet, self.cfg)
            self.ctx.set_preflight(final.results, running=False)
            summary = self.ctx.preflight
        if summary is None:
            return ["preflight has not run yet (pane 2)"]
        from cockpit.locations import state_dir
        from cockpit.recipe.fabric import gate_failure
        fabric = gate_failure(self.cfg, state_dir())      # [fabric] require_passed
        return L.preflight_failures(summary.results) + ([fabric] if fabric else [])

    def action_launch(self) -> None:
        self._ask_gate(replace=False)

    def action_relaunch(self) -> None:
        self._ask_gate(replace=True)

    def _ask_gate(self, *, replace: bool) -> None:
        if self.launching:
            self.note("a launch is in progress", "warn")
            return
        if not self.dry or not all(d.ok for d in self.dry.values()):
            key = self.key_for("dry_run")
            self.note(f"run the dry run first{f' ({key})' if key else ''}: every rank's command must be "
                      "shown and work", "fail")
            return
        self.note("checking the launch gate (hosts, containers, preflight) …", "warn.soft")
        self._gate_worker(replace)

    @work(exclusive=True, group="launch-gate", exit_on_error=False)
    async def _gate_worker(self, replace: bool) -> None:
        self.post_message(GateChecked(await self._gate(replace=replace, fresh_preflight=True), replace))

    def on_gate_checked(self, message: GateChecked) -> None:
        gate = message.gate
        self.gate = gate
        self.refresh_view()
        hard = gate.hard
        if hard:
            self.note(f"launch refused: {hard[0].reason} — {self._fix(hard[0].remedy)}", "fail")
            return
        commands: list[tuple[str, str]] = []
        for item in gate.replace:
            what = ("archive its full log (to the state directory)", "then remove that stopped container")
            commands += [(f"rank {item.rank} ({self.ctx.fleet[item.rank].target}) — {label}", line)
                         for label, line in zip(what, item.commands, strict=False)]
        commands += [(f"rank {r} ({self.ctx.fleet[r].target})" + (" — head, last" if r == 0 else ""),
                      self.dry[r].launch_command) for r in L.launch_order(self.cfg.ranks)]
        problems = gate.preflight_failures
        note = ("launch refused while preflight is not clean: " + "; ".join(problems[:4])
                + (" …" if len(problems) > 4 else "")) if problems else ""
        title = ("Archive and remove these stopped containers, then launch in this order?" if gate.replace
                 else "Launch the cluster in this order (one command per host)?")
        screen = ConfirmCommands(title, commands, note=note,
                                 override_label="launch anyway: override preflight failures"
                                 if problems else None)
        self.app.push_screen(screen, lambda r: self._launch_confirmed(r, gate.replace))

    def _launch_confirmed(self, result: ConfirmResult | None, replace: list[ReplaceItem]) -> None:
        if result is None:
            self.note("launch cancelled", "muted")
            return
        mark_host_change("relaunch" if replace else "launch")
        self.launching = True
        self._launch_worker(result.override, replace)

    @work(exclusive=True, group="launch", exit_on_error=False)
    async def _launch_worker(self, overridden: bool, replace: list[ReplaceItem]) -> None:
        """`recipe.launch_run.run_launch`: the gate again under the lock, as the CLI computes it (between
        the confirmation and the lock another cockpit, or someone by hand, may have launched or left a
        container); then the confirmed replace and the launch, followed by the app's watcher."""
        ledger = self.ctx.watcher.ledger

        async def still_confirmed(gate: L.Gate) -> bool:
            if gate.same_replace(replace):
                return True
            self._changed(gate, "other stopped containers would be removed than the ones confirmed")
            return False

        try:
            outcome = await LR.run_launch(
                self.ctx.fleet, self.cfg, preflight=lambda: self._preflight_failures(rerun=False),
                confirm=still_confirmed, emit=self._launch_note, ledger=ledger,
                make_launcher=lambda: L.Launcher(self.ctx.fleet, self.cfg, ledger=ledger,
                                                 watcher=self.ctx.watcher),
                override_preflight=overridden, replace_stopped=bool(replace))
        finally:
            self.launching = False
        if isinstance(outcome, LR.Locked):
            self.note(f"launch {outcome.error}", "fail")
        elif isinstance(outcome, LR.Refused):
            first = outcome.gate.blockers[0]
            self._changed(outcome.gate, f"{first.reason} — {self._fix(first.remedy)}")
        elif isinstance(outcome, LR.ReplaceFailed):
            self.note(f"relaunch stopped: rank {outcome.first.rank}: {outcome.first.message}", "fail")

    def _launch_note(self, note: LR.Note) -> None:
        """The launch procedure's notes this pane shows (the gate's own lines are in the dialog already)."""
        if isinstance(note, LR.LockTakenOver):
            self.notify(note.warning, severity="warning")
        elif isinstance(note, LR.Replacing):
            self.note("archiving logs and removing the stopped containers …", "warn.soft")
        elif isinstance(note, LR.Launching):
            why = " (preflight overridden by the operator)" if note.overridden else ""
            self.note(f"launching{why}", "warn.soft")

    def _changed(self, gate: L.Gate, why: str) -> None:
        """The gate under the lock is not the one confirmed: show it, start nothing."""
        self.gate = gate
        self.refresh_view()
        self.note(f"launch refused: the cluster changed since the confirmation: {why}; nothing "
                  "was started (look again: d)", "fail")

    def action_stop(self) -> None:
        self.note("planning stop …", "warn.soft")
        self._plan_stop_worker()

    @work(exclusive=True, group="launch-stop", exit_on_error=False)
    async def _plan_stop_worker(self) -> None:
        plan = await plan_stop(self.ctx.fleet, self.cfg, self.ctx.watcher.ledger)
        self.post_message(StopPlanned(plan))

    def on_stop_planned(self, message: StopPlanned) -> None:
        """The plan of `recipe.stop` as it is: its refusal, or its exact commands, what it leaves alone and
        what it does about rank 0's requests under way (the CLI prints the same)."""
        plan = message.plan
        refusal = plan.refusal()
        if refusal is not None:
            self.note(refusal, "fail" if plan.lost else "warn")
            return
        limit = float(self.cfg.engine.drain_timeout_s)
        note = "\n".join(t for t in (plan.left_alone(), plan.drain_text(limit)) if t)
        screen = ConfirmCommands(plan.question(), plan.commands(), note=note)
        self.app.push_screen(screen, lambda r: self._stop_confirmed(r, plan))

    def _stop_confirmed(self, result: ConfirmResult | None, plan: StopPlan) -> None:
        if result is None:
            self.note("stop cancelled", "muted")
            return
        mark_host_change("stop")
        limit = float(self.cfg.engine.drain_timeout_s)
        if plan.in_flight is not None and plan.in_flight.busy and limit > 0:
            self._drain_worker(plan, limit)
        else:
            self._stop_worker(plan)

    @work(exclusive=True, group="launch-stop", exit_on_error=False)
    async def _drain_worker(self, plan: StopPlan, limit: float) -> None:
        """Wait for rank 0's requests (at most `limit` s) with the countdown dialog up, then stop; the
        operator cuts the wait short (stop now) or cancels the stop from the dialog."""
        assert plan.in_flight is not None
        cut = asyncio.Event()
        chosen: list[str] = []

        def closed(choice: str | None) -> None:
            chosen.append(choice or "cancel")
            cut.set()

        dialog = DrainDialog(limit, plan.in_flight, plan.commands())
        self.app.push_screen(dialog, closed)
        result = await drain(self.ctx.fleet, self.cfg, limit, first=plan.in_flight, cut=cut, tick=dialog.show)
        if chosen and chosen[0] == "cancel":
            self.note("stop cancelled while waiting for rank 0's requests: nothing was stopped", "muted")
            return
        if not chosen:
            dialog.dismiss(result.outcome)
        self.note(result.text(), "warn.soft")
        await self._run_stop(plan, result.text())

    @work(exclusive=True, group="launch-stop", exit_on_error=False)
    async def _stop_worker(self, plan: StopPlan) -> None:
        await self._run_stop(plan)

    async def _run_stop(self, plan: StopPlan, before: str = "") -> None:
        try:
            async with ClusterLock(self.ctx.fleet, self.cfg, "stop") as lock:
                if lock.warning:   # a stale lock taken over: said, as for a launch
                    self.notify(lock.warning, severity="warning")
                outcomes = await execute_stop(self.ctx.fleet, plan, self.ctx.watcher.ledger,
                                              noted=self.ctx.watcher.expect_stop)
        except LockError as exc:
            self.note(f"stop {exc}", "fail")
            return
        text = "; ".join(f"rank {o.rank}: {o.message if not o.ok or '(killed' in o.message else 'stopped'}"
                         for o in outcomes)
        self.note((f"{before} — " if before else "") + f"stop: {text}",
                  "bold" if all(o.ok for o in outcomes) else "fail")

    def action_stacks(self) -> None:
        self.note("reading the engine's Python stacks on every rank (py-spy dump) …", "muted")
        self._stacks_worker()

    @work(exclusive=True, group="launch-stacks", exit_on_error=False)
    async def _stacks_worker(self) -> None:
        self._stacks = await read_stacks(self.ctx.fleet, self.cfg, self.timeline)
        read = [r for r, s in self._stacks.items() if s.state == "read"]
        self.note(f"stacks read on rank {', '.join(map(str, read))}" if read
                  else "no stacks read: " + "; ".join(f"rank {r}: {s.detail or s.state}"
                                                      for r, s in self._stacks.items()), "")
        self.refresh_view()

    def action_status(self) -> None:
        self.note("looking again …", "muted")
        self._status_worker()

    @work(exclusive=True, group="launch-status", exit_on_error=False)
    async def _status_worker(self) -> None:
        await self.ctx.watcher.probe()
        self.ctx.watcher.tick()
        self.note("", "")
