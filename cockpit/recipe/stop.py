"""Stop the cluster head first (rank 0, then the workers): only containers this cockpit started.

A rank is stopped only when its container (looked up by name) has exactly the ID the ledger recorded
when the cockpit launched it. Anything else — a cluster launched by hand, a container of another
name — is left alone and said so. Only `docker stop` (removal is `launch --replace-stopped`'s, after
archiving). The stop request is noted in the ledger before the head is stopped, so what the ranks print
while shutting down is judged as a stop, not a failure. A rank whose recorded container cannot be
reached is `unreachable`: never reported stopped, and while the head is unreachable the workers are not
stopped either (stopping them first would leave a head serving without workers) unless forced.

One `StopPlan` (built by `plan_stop`) is what both faces show and run: the CLI prints it, the TUI's confirm
dialog shows its exact commands, and both say the same refusal (nothing to stop, the head unreachable).

Drain: before SIGTERM the plan reads rank 0's running and waiting requests from /metrics (`read_in_flight`);
when some are under way, `drain` waits for them to finish, at most `[engine] drain_timeout_s` seconds,
cut short when the operator asks; /metrics unreadable: said, and the stop goes ahead as asked.

A ledger that cannot be written (a full disk) never keeps a container running: the stops go ahead and the
ledger keeps a `write-failed` notice for each record it could not write (`Ledger.pop_warnings`).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Iterable, Iterator
from dataclasses import asdict, dataclass, replace
from typing import Any, Literal

from cockpit import constants
from cockpit.api import readiness
from cockpit.api.client import ApiClient
from cockpit.api.liveness import read_sample
from cockpit.config import ClusterConfig
from cockpit.hosts import CommandTimeout, Fleet, HostUnavailable, command
from cockpit.recipe import containers
from cockpit.recipe.launch import inspect_container
from cockpit.recipe.ledger import Ledger
from cockpit.recipe.rank_timeline import stopped_detail
from cockpit.recipe.recording import note_action
from cockpit.safetext import neutralise

STOP_TIMEOUT = 90.0

Action = Literal["stop", "skip", "unreachable"]


@dataclass(frozen=True, slots=True)
class StopItem:
    """What `stop` will do on one rank, and why."""

    rank: int
    action: Action
    reason: str
    command: str = ""
    container_id: str = ""

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True, slots=True)
class StopOutcome:
    rank: int
    ok: bool
    message: str

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def stop_order(ranks: list[int]) -> list[int]:
    """Head (rank 0) first, then the workers."""
    return sorted(ranks)


@dataclass(frozen=True, slots=True)
class InFlight:
    """Rank 0's requests under way (vllm:num_requests_running / _waiting), or why they could not be read."""

    running: int = 0
    waiting: int = 0
    error: str = ""

    @property
    def busy(self) -> bool:
        return not self.error and self.running + self.waiting > 0

    def text(self) -> str:
        if self.error:
            return f"requests under way unknown: {self.error}"
        return f"{self.running} running, {self.waiting} waiting"

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


async def read_in_flight(fleet: Fleet, cfg: ClusterConfig, *, timeout: float = 5.0) -> InFlight:
    """One /metrics read of rank 0 through the tunnel; never raises (an unreadable API is said)."""
    try:
        ready = await readiness.check(fleet, cfg.cluster.api_port, constants.SERVED_MODEL, timeout=timeout)
        if not ready.ready or not ready.url:
            return InFlight(error=f"rank 0's API does not answer ({neutralise(ready.message)})")
        async with ApiClient(ready.url, connect_timeout=timeout, read_timeout=timeout,
                             via="tunnel") as client:
            sample = await read_sample(client, timeout)
    except Exception as exc:   # an unreadable /metrics never blocks a stop
        return InFlight(error=f"/metrics could not be read: {neutralise(str(exc)) or type(exc).__name__}")
    return InFlight(int(sample.running), int(sample.waiting))


@dataclass(frozen=True, slots=True)
class StopPlan:
    """What `stop` will do, per rank (head first), and rank 0's requests under way when it was planned.
    Rendered by the CLI and the TUI alike (`commands`, `left_alone`, `refusal`, `drain_text`)."""

    items: tuple[StopItem, ...]
    targets: dict[int, str]
    force: bool = False
    in_flight: InFlight | None = None      # None: not read (nothing to stop, or --no-drain)

    @property
    def todo(self) -> list[StopItem]:
        return [i for i in self.items if i.action == "stop"]

    @property
    def lost(self) -> list[StopItem]:
        return [i for i in self.items if i.action == "unreachable"]

    @property
    def skipped(self) -> list[StopItem]:
        return [i for i in self.items if i.action != "stop"]

    @property
    def head_lost(self) -> bool:
        return any(i.rank == 0 for i in self.lost)

    def label(self, rank: int) -> str:
        return f"rank {rank} ({self.targets.get(rank, '?')})" + (" — head, first" if rank == 0 else "")

    def commands(self) -> list[tuple[str, str]]:
        """(label, exact command line) of every container to stop, in the order they are stopped."""
        return [(self.label(i.rank), i.command) for i in self.todo]

    def left_alone(self) -> str:
        skipped = "; ".join(f"rank {i.rank}: {i.reason}" for i in self.skipped)
        return f"left alone: {skipped}" if skipped else ""

    def refusal(self) -> str | None:
        """Why nothing will be stopped (None: the plan stops something)."""
        if self.head_lost and not self.force:
            return (f"rank 0 NOT stopped: {self.lost[0].reason}; the workers are left running until the head "
                    "answers (`r37-cockpit stop --force` stops them anyway)")
        if not self.todo:
            skipped = "; ".join(f"rank {i.rank}: {i.reason}" for i in self.skipped)
            return (("cannot stop: " if self.lost else "nothing to stop: no running container started by "
                     "this cockpit (a cluster launched by hand is never stopped by r37-cockpit)")
                    + (f" — {skipped}" if skipped else ""))
        return None

    def question(self) -> str:
        return f"Stop {len(self.todo)} container(s), head first? (docker stop only; never removed)"

    def drain_text(self, drain_s: float) -> str:
        """What the stop does about rank 0's requests under way, before SIGTERM."""
        f = self.in_flight
        if f is None or not any(i.rank == 0 for i in self.todo):
            return ""
        if f.error:
            return f"{f.text()}: stopping without waiting for answers"
        if not f.busy:
            return "rank 0 serves no request: nothing to wait for"
        if drain_s <= 0:
            return f"rank 0 has {f.text()} request(s): stopping at once cuts their answers"
        return (f"rank 0 has {f.text()} request(s): the stop waits up to {drain_s:g} s for them to finish, "
                "then stops")

    def __iter__(self) -> Iterator[StopItem]:
        return iter(self.items)

    def to_dict(self) -> dict[str, Any]:
        return {"plan": [i.to_dict() for i in self.items], "force": self.force,
                "in_flight": self.in_flight.to_dict() if self.in_flight else None,
                "refusal": self.refusal()}


async def plan_stop(fleet: Fleet, cfg: ClusterConfig, ledger: Ledger, *, force: bool = False,
                    read_requests: bool = True) -> StopPlan:
    """Per rank: stop (a running container the cockpit started) or skip (with the reason); and, when the
    head is to be stopped, its requests under way (`read_requests`)."""
    items = await plan_items(fleet, cfg, ledger)
    targets = {r: fleet[r].target for r in cfg.ranks}
    plan = StopPlan(tuple(items), targets, force)
    if read_requests and plan.refusal() is None and any(i.rank == 0 for i in plan.todo):
        plan = replace(plan, in_flight=await read_in_flight(fleet, cfg))
    return plan


async def plan_items(fleet: Fleet, cfg: ClusterConfig, ledger: Ledger) -> list[StopItem]:
    """Per rank: stop (a running container the cockpit started) or skip (with the reason)."""
    records = ledger.records()
    name = cfg.cluster.container_name

    async def one(rank: int) -> StopItem:
        rec = records.get(rank)
        try:
            state = await inspect_container(fleet, rank, name)
        except (HostUnavailable, CommandTimeout) as exc:
            if rec is not None and rec.stopped_at is None:
                return StopItem(rank, "unreachable", f"host unreachable: {exc}; its container "
                                f"{rec.container_id[:12]} (started by this cockpit) may still run",
                                container_id=rec.container_id)
            return StopItem(rank, "skip", f"host not reachable: {exc}")
        if state is None:
            return StopItem(rank, "skip", f"no container named {name}")
        if ledger.claim(rank, state.id, state.created_at):
            rec = ledger.records().get(rank)
        if rec is None or rec.container_id != state.id:
            return StopItem(rank, "skip", f"{name} ({state.short_id}) was not started by this cockpit "
                                          "(launched by hand?): never stopped by r37-cockpit; stop it on the "
                                          f"host yourself if you mean to (docker stop {name})",
                            container_id=state.id)
        if not state.running:
            return StopItem(rank, "skip", f"{name} ({state.short_id}) is already {state.status}",
                            container_id=state.id)
        return StopItem(rank, "stop", f"{name} ({state.short_id}) started by this cockpit, {state.status}",
                        command(containers.stop_argv(state.id)).line, state.id)

    items = await asyncio.gather(*(one(r) for r in cfg.ranks))
    return sorted(items, key=lambda i: stop_order(cfg.ranks).index(i.rank))


DrainOutcome = Literal["drained", "timeout", "cut", "unreadable"]


@dataclass(frozen=True, slots=True)
class DrainResult:
    """How the wait for rank 0's requests ended: all finished, the limit ran out, the operator cut it
    short, or /metrics could not be read (the stop goes ahead in every case)."""

    outcome: DrainOutcome
    waited_s: float
    last: InFlight

    def text(self) -> str:
        w = f"{self.waited_s:.0f} s"
        if self.outcome == "drained":
            return f"rank 0's requests finished (waited {w})"
        if self.outcome == "unreadable":
            return f"{self.last.text()}: stopping without waiting for answers"
        why = "the limit" if self.outcome == "timeout" else "cut short"
        return f"waited {w} ({why}): {self.last.text()} request(s) are cut by the stop"

    def to_dict(self) -> dict[str, Any]:
        return {"outcome": self.outcome, "waited_s": round(self.waited_s, 1), "last": self.last.to_dict()}


async def drain(fleet: Fleet, cfg: ClusterConfig, limit_s: float, *, first: InFlight | None = None,
                cut: asyncio.Event | None = None, tick: Callable[[float, InFlight], None] | None = None,
                poll_s: float = 1.0,
                read: Callable[[Fleet, ClusterConfig], Awaitable[InFlight]] = read_in_flight) -> DrainResult:
    """Wait until rank 0 serves no request, at most `limit_s` seconds (never forever), reading /metrics
    every `poll_s`; `cut` set: stop waiting now. `tick(seconds left, requests)` after every read."""
    start = time.monotonic()
    cur = first if first is not None else await read(fleet, cfg)
    while True:
        waited = time.monotonic() - start
        if cur.error:
            return DrainResult("unreadable", waited, cur)
        if not cur.busy:
            return DrainResult("drained", waited, cur)
        left = limit_s - waited
        if left <= 0:
            return DrainResult("timeout", waited, cur)
        if tick is not None:
            tick(left, cur)
        if cut is not None:
            try:
                await asyncio.wait_for(cut.wait(), min(poll_s, left))
                return DrainResult("cut", time.monotonic() - start, cur)
            except TimeoutError:
                pass
        else:
            await asyncio.sleep(min(poll_s, left))
        cur = await read(fleet, cfg)


STOP_PENDING = "not stopped (its turn had not come)"
STOP_IN_FLIGHT = "`docker stop` was running: it may or may not have stopped (look with `r37-cockpit status`)"


async def execute_stop(fleet: Fleet, plan: StopPlan | Iterable[StopItem], ledger: Ledger, *,
                       force: bool = False,
                       noted: Callable[[list[int]], None] | None = None,
                       progress: dict[int, str] | None = None) -> list[StopOutcome]:
    """Stop the head first and wait for it, then every worker in parallel. An unreachable rank is an
    outcome that is not ok; an unreachable head keeps the workers running unless `force`. `noted` is told
    the ranks once their stop request is in the ledger, before anything is stopped (a live model then
    reads what they print as their shutdown at once, not at its next look at the ledger). `progress`, when
    given, says per rank to stop where it is at every moment (STOP_PENDING, STOP_IN_FLIGHT, then its
    outcome): what an interrupted stop reports."""
    progress = progress if progress is not None else {}
    force = force or (isinstance(plan, StopPlan) and plan.force)
    todo = [i for i in plan if i.action == "stop"]
    progress.update({i.rank: STOP_PENDING for i in todo})
    lost = [i for i in plan if i.action == "unreachable"]
    out = [StopOutcome(i.rank, False, f"rank {i.rank} NOT stopped: {i.reason}") for i in lost]
    if any(i.rank == 0 for i in lost) and not force:
        why = ("rank 0 (the head) is unreachable, so the workers are left running; stop again when it "
               "answers, or `r37-cockpit stop --force` to stop the workers now")
        out += [StopOutcome(i.rank, False, f"rank {i.rank} NOT stopped: {why}") for i in todo if i.rank != 0]
        return sorted(out, key=lambda o: o.rank)
    try:
        ledger.mark_stop_requested([(i.rank, i.container_id) for i in todo])
    except OSError as exc:   # a full disk: the stop goes ahead all the same (said once, at the end)
        ledger.write_failed("the stop", exc)
    if noted is not None:
        noted([i.rank for i in todo])
    head = [i for i in todo if i.rank == 0]
    workers = [i for i in todo if i.rank != 0]
    out += [await _stop_one(fleet, i, ledger, progress) for i in head]
    out += await asyncio.gather(*(_stop_one(fleet, i, ledger, progress) for i in workers))
    for o in out:
        note_action(ledger.cfg, "stop", f"rank {o.rank}: {o.message}", rank=o.rank, data={"ok": o.ok})
    return sorted(out, key=lambda o: (o.rank != 0, o.rank))


async def _stop_one(fleet: Fleet, item: StopItem, ledger: Ledger, progress: dict[int, str]) -> StopOutcome:
    progress[item.rank] = STOP_IN_FLIGHT
    outcome = await _stop_run(fleet, item, ledger)
    progress[item.rank] = ("stopped " if outcome.ok else "NOT stopped: ") + outcome.message.removeprefix(
        "stopped ").removeprefix(f"rank {item.rank} NOT stopped: ")
    return outcome


async def _stop_run(fleet: Fleet, item: StopItem, ledger: Ledger) -> StopOutcome:
    began = time.monotonic()
    try:
        res = await fleet[item.rank].run(containers.stop_argv(item.container_id), timeout=STOP_TIMEOUT)
    except (HostUnavailable, CommandTimeout) as exc:
        return StopOutcome(item.rank, False, f"rank {item.rank} NOT stopped: {exc}")
    took = time.monotonic() - began
    if not res.ok:
        why = neutralise(res.stderr.strip()) or f"exit status {res.exit_status}"
        return StopOutcome(item.rank, False, why)
    try:
        ledger.mark_stopped(item.rank, item.container_id)
    except OSError as exc:
        ledger.write_failed("the stop", exc)
        return StopOutcome(item.rank, True, await _how_it_stopped(fleet, item, took)
                           + " (not recorded in the launch ledger: it could not be written)")
    return StopOutcome(item.rank, True, await _how_it_stopped(fleet, item, took))


async def _how_it_stopped(fleet: Fleet, item: StopItem, took: float) -> str:
    """"stopped ID", and when docker had to kill it after its timeout (a PID 1 without a SIGTERM handler,
    or an engine waiting for its open streams: exit 137), that it was still this stop, and after how long
    (`took`: how long `docker stop` ran)."""
    done = f"stopped {item.container_id[:12]}"
    try:
        state = await inspect_container(fleet, item.rank, item.container_id)
    except (HostUnavailable, CommandTimeout):
        return done
    if state is None or not state.exited or state.oom_killed or state.exit_code not in (137, 143):
        return done
    if state.exit_code == 143:
        return f"{done} ({stopped_detail(state, None)})"
    return (f"{done} (killed after {round(took)} s: the engine did not exit on SIGTERM; docker sent SIGKILL "
            "when its stop timeout ran out, exit 137) — stopped by this cockpit, not a crash")
