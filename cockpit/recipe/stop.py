"""Stop the cluster head first (rank 0, then the workers): only containers this cockpit started.

A rank is stopped only when its container (looked up by name) has exactly the ID the ledger recorded
when the cockpit launched it. Anything else — a cluster launched by hand, a container of another
name — is left alone and said so. Only `docker stop` (removal is `launch --replace-stopped`'s, after
archiving). The stop request is noted in the ledger before the head is stopped, so what the ranks print
while shutting down is judged as a stop, not a failure. A rank whose recorded container cannot be
reached is `unreachable`: never reported stopped, and while the head is unreachable the workers are not
stopped either (stopping them first would leave a head serving without workers) unless forced.

A ledger that cannot be written (a full disk) never keeps a container running: the stops go ahead and the
ledger keeps a `write-failed` notice for each record it could not write (`Ledger.pop_warnings`).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any, Literal

from cockpit.config import ClusterConfig
from cockpit.hosts import CommandTimeout, Fleet, HostUnavailable, command
from cockpit.recipe import containers as dk
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


async def plan_stop(fleet: Fleet, cfg: ClusterConfig, ledger: Ledger) -> list[StopItem]:
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
                        command(dk.stop_argv(state.id)).line, state.id)

    items = await asyncio.gather(*(one(r) for r in cfg.ranks))
    return sorted(items, key=lambda i: stop_order(cfg.ranks).index(i.rank))


STOP_PENDING = "not stopped (its turn had not come)"
STOP_IN_FLIGHT = "`docker stop` was running: it may or may not have stopped (look with `r37-cockpit status`)"


async def execute_stop(fleet: Fleet, plan: list[StopItem], ledger: Ledger, *, force: bool = False,
                       noted: Callable[[list[int]], None] | None = None,
                       progress: dict[int, str] | None = None) -> list[StopOutcome]:
    """Stop the head first and wait for it, then every worker in parallel. An unreachable rank is an
    outcome that is not ok; an unreachable head keeps the workers running unless `force`. `noted` is told
    the ranks once their stop request is in the ledger, before anything is stopped (a live model then
    reads what they print as their shutdown at once, not at its next look at the ledger). `progress`, when
    given, says per rank to stop where it is at every moment (STOP_PENDING, STOP_IN_FLIGHT, then its
    outcome): what an interrupted stop reports."""
    progress = progress if progress is not None else {}
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
        res = await fleet[item.rank].run(dk.stop_argv(item.container_id), timeout=STOP_TIMEOUT)
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
