"""`launch`, `stop`: the staged launch (recipe steps 6–7) without a screen (`status`: `status_cmd`).

`launch` dry-runs every rank, then runs the one launch procedure (`recipe.launch_run.run_launch`): under the
cluster lock on rank 0's host, the launch gate (hosts, containers in the way, a full preflight), confirmation
(or --yes), with --replace-stopped the archive and removal of the stopped containers this cockpit started,
and the launch of ranks N-1 … 1 then 0; it prints the procedure's notes, streams phase events (on a terminal
one live line per rank, `cockpit.cli.progress`; every event as a line with `-v`, a pipe or `--json`), and
exits 0 when the API is ready, 1 with the cause when a rank fails.
`stop` stops only the containers this cockpit started, head first, with `docker stop`, under the same lock.
"""

from __future__ import annotations

import argparse
import asyncio
import signal
import sys
import time
from collections.abc import Callable
from typing import Any

from cockpit.cli.commands import SUMMARY
from cockpit.cli.common import (
    EXIT_FAILURE,
    EXIT_INTERRUPTED,
    EXIT_OK,
    EXIT_REFUSED,
    CliError,
    add_json,
    connected_fleet,
    load,
    print_json,
    refuse_if_read_only,
    remedy,
    run_async,
)
from cockpit.cli.progress import LiveBlock, live_output
from cockpit.config import ClusterConfig
from cockpit.hosts import Fleet, HostUnavailable
from cockpit.recipe import launch as L
from cockpit.recipe import launch_run as LR
from cockpit.recipe import timeline as T
from cockpit.recipe.ledger import Ledger
from cockpit.recipe.lock import ClusterLock, LockError, LockHeld
from cockpit.recipe.preflight import preflight_results
from cockpit.recipe.stop import DrainResult, InFlight, StopPlan, drain, execute_stop, plan_stop
from cockpit.recipe.watch import phase_limits
from cockpit.safetext import neutralise_block, safe


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "launch", help=SUMMARY["launch"],
        description="Show what `DRY_RUN=1 bash launch/node.sh RANK cluster.env` prints on every host, then "
                    "(after confirmation) launch ranks N-1 … 1 and rank 0 last and follow every rank's boot. "
                    "Exit 0 when the API is ready, 1 when a rank fails (with the cause), 3 when the launch "
                    "is refused.")
    add_json(p)
    p.add_argument("--dry-run", action="store_true",
                   help="only show the per-rank commands (changes nothing: allowed with --read-only)")
    p.add_argument("-y", "--yes", action="store_true", help="launch without asking")
    p.add_argument("--override-preflight", action="store_true",
                   help="launch even though preflight has failures (the operator takes responsibility)")
    p.add_argument("--replace-stopped", action="store_true",
                   help="first archive the log of every stopped ds41_r37 container this cockpit started, "
                        "then remove it (docker rm of that ID only); running containers and ones started "
                        "by hand are never removed")
    p.add_argument("--timeout", type=float, default=3600.0, help="seconds to wait for the API (default 3600)")
    p.add_argument("-v", "--verbose", action="store_true",
                   help="print every boot event as a line of its own (on a terminal the default is one "
                        "line per rank, updated in place; pipes and --json always get every line)")
    p.add_argument("--phase-limit", type=float, default=None,
                   help="seconds a rank may stay in one phase before it counts as stuck "
                        "(default: per-phase limits for a real boot)")
    p.set_defaults(func=run_launch)

    t = sub.add_parser("stop", help=SUMMARY["stop"],
                       description="docker stop on rank 0, then the workers: only containers this cockpit "
                                   "started (recorded container IDs). Never removes a container, never "
                                   "stops one launched by hand.")
    add_json(t)
    t.add_argument("-y", "--yes", action="store_true", help="stop without asking")
    t.add_argument("--force", action="store_true",
                   help="stop the workers even though the head (rank 0) is unreachable")
    d = t.add_mutually_exclusive_group()
    d.add_argument("--drain", nargs="?", type=_drain_seconds, const=-1.0, default=None, metavar="SECONDS",
                   help="first wait for rank 0's running/waiting requests to finish, at most SECONDS "
                        "(default: [engine] drain_timeout_s, 120), without asking; Ctrl-C cuts the wait "
                        "short and stops. Without --drain/--no-drain the stop asks when requests are under "
                        "way (--yes and --json: it waits, as --drain)")
    d.add_argument("--no-drain", action="store_true",
                   help="stop at once, even when requests are under way (their answers are cut)")
    t.set_defaults(func=run_stop)


# ---- helpers ------------------------------------------------------------------------------------------


def _drain_seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number of seconds: {text!r}") from None
    if not 0 <= value <= 3600:
        raise argparse.ArgumentTypeError("seconds between 0 and 3600")
    return value


def _confirm(question: str) -> bool:
    if not sys.stdin.isatty():
        raise CliError("refusing to change the hosts without confirmation: add --yes", EXIT_REFUSED,
                       "needs-confirmation")
    answer = input(f"{question} [y/N] ").strip().lower()
    return answer in ("y", "yes")


def _say(args: argparse.Namespace, text: str, data: dict[str, Any]) -> None:
    """One line of output (text, or a JSON object with `--json`); quoted cockpit commands in it carry the
    `--config` this command was given when that is not the default."""
    if args.json:
        if isinstance(data.get("remedy"), str):
            data = {**data, "remedy": remedy(args, data["remedy"])}
        print_json_line(data)
    else:
        print(remedy(args, text), flush=True)


def ledger_notices(args: argparse.Namespace, ledger: Ledger) -> None:
    """Tell the operator what the launch ledger had to do (a corrupt file kept aside): stderr, or a JSON
    line under --json."""
    for n in ledger.pop_warnings():
        if getattr(args, "json", False):
            print_json_line({"event": "Warning", "code": n.code, "message": n.message})
        else:
            print(f"warning: {safe(n.message)}", file=sys.stderr)


def _lock_code(exc: LockError) -> str:
    """Held by another cockpit, or rank 0 (where the lock lives) out of reach."""
    return "cluster-locked" if isinstance(exc, LockHeld) else "host-unreachable"


def print_json_line(data: dict[str, Any]) -> None:
    import json
    sys.stdout.write(json.dumps(data, default=str) + "\n")
    sys.stdout.flush()


def event_text(event: T.LaunchEvent, t0: float) -> str:
    """One line for a launch event."""
    def stamp(at: float) -> str:
        return f"[{max(0.0, at - t0):7.1f}s]"
    if isinstance(event, T.PhaseEntered):
        return f"{stamp(event.at)} rank {event.rank} → {event.phase.value}"
    if isinstance(event, T.ProgressChanged):
        return f"{stamp(event.at)} rank {event.rank}   loading weights {event.done}/{event.total}"
    if isinstance(event, T.RankLaunched):
        return f"{stamp(event.at)} rank {event.rank} launched: container {event.container_id[:12]}"
    if isinstance(event, T.RankFailed):
        f = event.failure
        word = "followed (another rank died)" if f.secondary else "FAILED"
        lines = [f"{stamp(f.at)} rank {f.rank} {word}: {f.label}", f"    cause: {f.cause}"]
        if f.exit_reason:
            lines.append(f"    container: {f.exit_reason}")
        lines.append(f"    remedy: {f.remedy}")
        return "\n".join(lines)
    if isinstance(event, T.EngineChanged):
        return f"engine {event.liveness.state}: {event.liveness.message}"
    if isinstance(event, T.RankStopped):
        return f"{stamp(event.at)} rank {event.rank} stopped ({event.detail})"
    if isinstance(event, T.RankRecovered):
        return f"{stamp(event.at)} rank {event.rank} no longer failed: {event.detail}"
    if isinstance(event, T.RankUnknown):
        return f"{stamp(event.at)} rank {event.rank} UNKNOWN: {event.detail}"
    if isinstance(event, T.HostChanged):
        what = "host LOST" if event.lost else "host back"
        return f"{stamp(event.at)} rank {event.rank} {what}: {event.detail}"
    if isinstance(event, T.ApiChanged):
        r = event.readiness
        return f"{stamp(r.checked_at)} API: {r.message}"
    if isinstance(event, T.VerdictChanged):
        v = event.verdict
        return f"== {v.summary}" + (f"\n   what to do: {v.remedy}" if v.remedy and v.state != "ready" else "")
    return str(event)


_LIVE_EVENTS = (T.PhaseEntered, T.ProgressChanged, T.RankLaunched)


def event_rank(event: T.LaunchEvent) -> int | None:
    """The rank an event is about (None for the API, the engine and the verdict)."""
    if isinstance(event, T.RankFailed):
        return event.failure.rank
    rank = getattr(event, "rank", None)
    return rank if isinstance(rank, int) else None


def live_emitter(args: argparse.Namespace, block: LiveBlock, t0: float) -> Callable[[T.LaunchEvent], None]:
    """Launch events on a terminal: a rank's phase, progress and container, the API's state and the
    launching count as live lines (one per rank, the API, the verdict); failures, lost hosts, stops and
    every other verdict printed for good above them."""
    def emit(event: T.LaunchEvent) -> None:
        text = remedy(args, event_text(event, t0))
        rank = event_rank(event)
        if isinstance(event, _LIVE_EVENTS) and rank is not None:
            block.update(rank, text)
        elif isinstance(event, (T.ApiChanged, T.EngineChanged)):
            block.update("api", text)
        elif isinstance(event, T.VerdictChanged) and event.verdict.state == "launching":
            block.update("verdict", text)   # "launching: 2/4 ranks started": counts up in place
        else:
            if rank is not None:
                block.update(rank, text.split("\n", 1)[0])
            if isinstance(event, T.VerdictChanged):
                block.remove("verdict")
            block.print(neutralise_block(text))
    return emit


PREFLIGHT = "full preflight"
"""Which preflight `launch` gates on (its JSON events say so): a full one, run under the lock."""


async def preflight_gate(fleet: Fleet, cfg: ClusterConfig) -> list[str]:
    """Failures of the preflight that must pass before a launch (a full preflight, run now)."""
    from cockpit.locations import state_dir
    from cockpit.recipe.fabric import gate_failure
    final = await preflight_results(fleet, cfg)
    fabric = gate_failure(cfg, state_dir())      # [fabric] require_passed
    return L.preflight_failures(final.results) + ([fabric] if fabric else [])


# ---- launch -------------------------------------------------------------------------------------------


def run_launch(args: argparse.Namespace) -> int:
    _, cfg = load(args)
    refuse_if_read_only(args, cfg)
    booting: dict[int, str] = {}
    in_flight: set[int] = set()   # a rank whose `docker run` had begun: its container may run
    try:
        return run_async(_launch(args, cfg, booting, in_flight))
    except KeyboardInterrupt:
        started = [f"rank {r} ({cid[:12]})" for r, cid in sorted(booting.items())]
        started += [f"rank {r} (its `docker run` was running: it may have started)"
                    for r in sorted(in_flight - set(booting))]
        if started:
            print(f"interrupted: these containers keep booting: {', '.join(started)}; stop them with "
                  "`r37-cockpit stop` (head first), or follow them with `r37-cockpit status`",
                  file=sys.stderr)
        else:
            print("interrupted before any container was started", file=sys.stderr)
        return EXIT_INTERRUPTED


async def _launch(args: argparse.Namespace, cfg: ClusterConfig, booting: dict[int, str],
                  in_flight: set[int] | None = None) -> int:
    async with Fleet(cfg) as fleet:
        await connected_fleet(fleet, cfg)
        dry = await L.dry_run(fleet, cfg)
        for d in dry.values():
            shown = d.output if d.ok else "FAILED: " + d.error
            _say(args, f"rank {d.rank} ({fleet[d.rank].target}): {d.launch_command}\n    dry run: {shown}",
                 {"event": "DryRun", **d.to_dict()})
        bad = [d for d in dry.values() if not d.ok]
        if bad:
            ranks = ", ".join(str(d.rank) for d in bad)
            raise CliError(f"the dry run failed on rank {ranks}: fix that first (`r37-cockpit setup recipe`, "
                           "then `r37-cockpit setup env`)", EXIT_REFUSED, "dry-run-failed")
        # the lock is a directory on rank 0: a read-only dry run writes none
        return await _gated_launch(args, cfg, fleet, booting, in_flight,
                                   lock=not (args.dry_run and cfg.ui.read_only))


def launch_note(args: argparse.Namespace, ledger: Ledger, note: LR.Note) -> None:
    """One note of the launch procedure, as `launch` prints it (text, or a JSON line with `--json`)."""
    if isinstance(note, LR.LockTakenOver):
        _say(args, f"warning: {note.warning}", {"event": "LockTakenOver", "warning": note.warning})
    elif isinstance(note, LR.GateAnswered):
        ledger_notices(args, ledger)
    elif isinstance(note, LR.PreflightProblem):
        f = note.detail
        _say(args, f"preflight {'problem' if note.unknown else 'FAIL'}: {f}",
             {"event": "PreflightFail", "detail": f, "preflight": PREFLIGHT,
              "code": "preflight-unknown" if note.unknown else "preflight-failed"})
    elif isinstance(note, LR.PreflightPassed):
        _say(args, f"preflight: pass ({PREFLIGHT})", {"event": "PreflightPass", "preflight": PREFLIGHT})
    elif isinstance(note, LR.PreflightOverridden):
        _say(args, "preflight failures overridden by the operator",
             {"event": "PreflightOverridden", "failures": note.failures})
    elif isinstance(note, LR.ReplacePlanned):
        item = note.item
        shown = "\n".join(f"    {c}" for c in item.commands)
        _say(args, f"rank {item.rank}: replace: {item.reason}\n{shown}",
             {"event": "ReplacePlan", **item.to_dict()})
    elif isinstance(note, LR.LaunchRefused):
        b = note.blocker
        _say(args, f"refused: {b.reason}\n    what to do: {b.remedy}", {"event": "Refused", **b.to_dict()})
    elif isinstance(note, LR.Replaced):
        o = note.outcome
        _say(args, f"rank {o.rank}: {'replaced' if o.ok else 'NOT replaced'}: {o.message}",
             {"event": "Replaced", **o.to_dict()})
    # Replacing, Launching: the replace outcomes and the launch events say it


async def _gated_launch(args: argparse.Namespace, cfg: ClusterConfig, fleet: Fleet, booting: dict[int, str],
                        in_flight: set[int] | None = None, *, lock: bool = True) -> int:
    """`recipe.launch_run.run_launch` with this command's preflight, confirmation, output and following."""
    ledger = Ledger(cfg)
    block: LiveBlock | None = None
    t0 = time.time()

    async def preflight() -> list[str]:
        return await preflight_gate(fleet, cfg)

    async def confirm(gate: L.Gate) -> bool:
        order = " → ".join(str(r) for r in L.launch_order(cfg.ranks))
        question = f"Launch ranks {order} (rank 0 last)?"
        if gate.replace:
            question = (f"Archive and remove {len(gate.replace)} stopped container(s), then launch ranks "
                        f"{order}?")
        return args.yes or _confirm(question)

    def make_launcher() -> L.Launcher:
        nonlocal block, t0
        t0 = time.time()
        live = live_output(sys.stdout, verbose=args.verbose, json=args.json)
        block = LiveBlock(sys.stdout) if live else None
        emit = (live_emitter(args, block, t0) if block is not None
                else lambda ev: _say(args, event_text(ev, t0), T.event_dict(ev)))
        limits = None if args.phase_limit is None else phase_limits(args.phase_limit)
        launcher = L.Launcher(fleet, cfg, ledger=ledger, stuck_limits=limits, emit=emit)
        launcher.booting = booting
        launcher.in_flight = in_flight if in_flight is not None else set()
        return launcher

    async def follow(launcher: L.Launcher, started: bool) -> bool:
        try:
            if started:
                return await launcher.run_until(T.settled, timeout=args.timeout)
            return await launcher.run_until(lambda t: t.verdict.state != "launching", timeout=10)
        finally:
            if block is not None:
                block.close()

    try:
        outcome = await LR.run_launch(
            fleet, cfg, preflight=preflight, confirm=confirm, emit=lambda n: launch_note(args, ledger, n),
            make_launcher=make_launcher, ledger=ledger, override_preflight=args.override_preflight,
            replace_stopped=args.replace_stopped, dry_run=args.dry_run, lock=lock, follow=follow)
    finally:
        if block is not None:
            block.close()
    if isinstance(outcome, LR.Locked):
        raise CliError(f"launch {outcome.error}", EXIT_REFUSED, _lock_code(outcome.error))
    if isinstance(outcome, LR.Refused):
        raise CliError("launch refused: " + outcome.gate.blockers[0].reason, EXIT_REFUSED)
    if isinstance(outcome, LR.GatePassed):
        return 0
    if isinstance(outcome, LR.Cancelled):
        raise CliError("launch cancelled", EXIT_REFUSED, "needs-confirmation")
    if isinstance(outcome, LR.ReplaceFailed):
        raise CliError("launch stopped: a stopped container could not be archived and removed "
                       "(see above)", code="launch-blocked")
    return _result(args, outcome.launcher, finished=bool(outcome.finished))


def _result(args: argparse.Namespace, launcher: L.Launcher, *, finished: bool) -> int:
    """The last line: ready (exit 0), failed or timed out (exit 1)."""
    verdict = launcher.timeline.compute_verdict()
    ok = verdict.state == "ready"
    if not finished:
        _say(args, f"timed out after {args.timeout:g} s: {verdict.summary}",
             {"event": "Result", "ok": False, "state": "timeout", "summary": verdict.summary,
              "code": "launch-failed"})
        return 1
    todo = f"\n    what to do: {verdict.remedy}" if verdict.remedy else ""
    _say(args, f"result: {verdict.summary}{todo}",
         {"event": "Result", "ok": ok, "state": verdict.state, "summary": verdict.summary,
          "remedy": verdict.remedy, "code": None if ok else (verdict.code or "launch-failed")})
    return 0 if ok else 1


# ---- stop ---------------------------------------------------------------------------------------------


def run_stop(args: argparse.Namespace) -> int:
    _, cfg = load(args)
    refuse_if_read_only(args, cfg)
    progress: dict[int, str] = {}   # per rank to stop: where it is (recipe.stop.execute_stop)
    try:
        return run_async(_stop(args, cfg, progress))
    except KeyboardInterrupt:
        if progress:
            lines = "".join(f"\n  rank {rank}: {safe(state)}" for rank, state in sorted(progress.items()))
            print(f"interrupted: the stop got this far:{lines}\nrun `r37-cockpit stop` again to stop the "
                  "rest (head first)", file=sys.stderr)
        else:
            print("interrupted before any container was stopped", file=sys.stderr)
        return EXIT_INTERRUPTED


async def _stop(args: argparse.Namespace, cfg: ClusterConfig, progress: dict[int, str] | None = None) -> int:
    ledger = Ledger(cfg)
    async with Fleet(cfg) as fleet:
        await connected_fleet(fleet, cfg)
        plan = await plan_stop(fleet, cfg, ledger, force=args.force, read_requests=not args.no_drain)
        ledger_notices(args, ledger)
        limit = _drain_limit(args, cfg)
        todo, lost = plan.todo, plan.lost
        if args.json and ((not todo and not lost) or not args.yes):
            print_json({**plan.to_dict(), "stopped": []})
        elif not args.json:
            for label, line in plan.commands():
                print(f"{label}: stop\n    {line}")
            if plan.left_alone():
                print(plan.left_alone())
            if plan.drain_text(limit):
                print(plan.drain_text(limit))
        refusal = plan.refusal()
        if not todo and not lost:
            if not args.json:
                print(refusal)
            return 0
        if refusal is not None and not args.json:
            print(refusal, file=sys.stderr)
        if refusal is None and not args.yes and not _confirm(plan.question()):
            raise CliError("stop cancelled", EXIT_REFUSED, "needs-confirmation")
        drained = None
        if refusal is None and plan.in_flight is not None and plan.in_flight.busy and limit > 0:
            ask = args.drain is None and not args.yes and not args.json
            if ask and not _confirm(f"Wait up to {limit:g} s for rank 0's {plan.in_flight.text()} request(s) "
                                    "to finish before stopping? (no: stop now and cut their answers)"):
                limit = 0.0
            if limit > 0:
                drained = await _drain_cli(args, fleet, cfg, plan, limit)
        try:
            if plan.head_lost:
                # the lock lives on rank 0: nothing to take. Without --force nothing is stopped at all.
                if args.force and todo and not args.json:
                    print("warning: rank 0 (and the cluster lock on it) is unreachable: stopping the workers "
                          "without the lock (--force)", file=sys.stderr)
                outcomes = await execute_stop(fleet, plan, ledger, progress=progress)
            else:
                async with ClusterLock(fleet, cfg, "stop") as lock:
                    if lock.warning:   # a stale lock taken over: said, as for a launch
                        if args.json:
                            print_json_line({"event": "LockTakenOver", "warning": lock.warning})
                        else:
                            print(f"warning: {safe(lock.warning)}", file=sys.stderr, flush=True)
                    outcomes = await execute_stop(fleet, plan, ledger, progress=progress)
        except LockError as exc:
            raise CliError(f"stop {exc}", EXIT_REFUSED, _lock_code(exc)) from None
        except HostUnavailable as exc:
            raise CliError(str(exc), code="not-stopped") from None
        notices = ledger.pop_warnings()   # a ledger that could not be written (the stops went ahead)
        if args.json:
            print_json({**plan.to_dict(), "stopped": [o.to_dict() for o in outcomes],
                        **({"drain": drained.to_dict()} if drained is not None else {}),
                        **({"warnings": [{"code": n.code, "message": n.message} for n in notices]}
                           if notices else {})})
        else:
            for o in outcomes:
                print(remedy(args, f"rank {o.rank}: {'ok' if o.ok else 'FAILED'}: {o.message}"))
            for n in notices:
                print(f"r37-cockpit: {'error' if n.code == 'write-failed' else 'warning'} ({n.code}): "
                      f"{safe(n.message)}", file=sys.stderr)
        unwritten = any(n.code == "write-failed" for n in notices)
        return EXIT_OK if all(o.ok for o in outcomes) and not unwritten else EXIT_FAILURE


def _drain_limit(args: argparse.Namespace, cfg: ClusterConfig) -> float:
    """Seconds the stop may wait for rank 0's requests: --no-drain 0, --drain=S S, else the config's."""
    if args.no_drain:
        return 0.0
    if args.drain is not None and args.drain >= 0:
        return float(args.drain)
    return float(cfg.engine.drain_timeout_s)


async def _drain_cli(args: argparse.Namespace, fleet: Fleet, cfg: ClusterConfig, plan: StopPlan,
                     limit: float) -> DrainResult:
    """The wait for rank 0's requests, counted down on stderr; the first Ctrl-C cuts it short (and the stop
    goes ahead), a second one interrupts the command."""
    loop = asyncio.get_running_loop()
    cut = asyncio.Event()
    previous = signal.getsignal(signal.SIGINT)

    def on_sigint(_sig: int, _frame: object) -> None:
        signal.signal(signal.SIGINT, previous)
        loop.call_soon_threadsafe(cut.set)

    def tick(left: float, now: InFlight) -> None:
        if not args.json:
            print(f"waiting for rank 0's requests: {now.text()}, {left:.0f} s left (Ctrl-C: stop now)",
                  file=sys.stderr, flush=True)

    signal.signal(signal.SIGINT, on_sigint)
    try:
        result = await drain(fleet, cfg, limit, first=plan.in_flight, cut=cut, tick=tick)
    finally:
        if signal.getsignal(signal.SIGINT) is on_sigint:
            signal.signal(signal.SIGINT, previous)
    if not args.json:          # --json: in the one object printed at the end ("drain")
        print(result.text(), file=sys.stderr, flush=True)
    return result
