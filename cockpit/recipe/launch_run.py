"""The launch written once (issue 25, item 3): `run_launch`, for `r37-cockpit launch` and the Launch pane.

Under the cluster lock on rank 0's host: the launch gate (hosts, containers in the way, preflight — the
preflight failures from the face's callable, since the CLI runs a full preflight and the TUI reads its own)
→ typed notes the face renders (a stale lock taken over, preflight pass / problems / overridden, the
replace plan, the refusals) → the face's `confirm(gate)` (the CLI asks or takes `--yes`; the TUI, which
asked before the lock, checks that the gate is still the one confirmed) → archive and remove the stopped
containers of the replace plan → `Launcher.launch()` (ranks N-1 … 1, then 0) → the face's optional
`follow` (the CLI's `run_until`, still under the lock). One typed outcome tells the face how it ended.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from contextlib import AbstractAsyncContextManager, nullcontext
from dataclasses import dataclass

from cockpit.config import ClusterConfig
from cockpit.hosts import Fleet
from cockpit.recipe import launch as L
from cockpit.recipe.ledger import Ledger
from cockpit.recipe.lock import ClusterLock, LockError
from cockpit.recipe.replace import ReplaceItem, ReplaceOutcome, execute_replace

PreflightSource = Callable[[], Awaitable[list[str]]]
"""The preflight failures that block a launch (`launch.preflight_failures` lines), as the face gets them."""

# ---- notes: what happened on the way, for the face to render ----------------------------------------------


@dataclass(frozen=True, slots=True)
class LockTakenOver:
    """A stale cluster lock was taken over: whose, and why (the lock's own words)."""

    warning: str


@dataclass(frozen=True, slots=True)
class GateAnswered:
    """The gate as computed under the lock (the launch ledger may have warnings to tell now)."""

    gate: L.Gate


@dataclass(frozen=True, slots=True)
class PreflightPassed:
    """No preflight failure blocks the launch."""


@dataclass(frozen=True, slots=True)
class PreflightProblem:
    """One failed (or, `unknown`, undecided) preflight check."""

    detail: str
    unknown: bool


@dataclass(frozen=True, slots=True)
class PreflightOverridden:
    """The operator launches over `failures` preflight problems."""

    failures: int


@dataclass(frozen=True, slots=True)
class ReplacePlanned:
    """One stopped container this cockpit started, to archive and remove before the launch."""

    item: ReplaceItem


@dataclass(frozen=True, slots=True)
class LaunchRefused:
    """One reason the gate is closed, with what to do."""

    blocker: L.Blocker


@dataclass(frozen=True, slots=True)
class Replacing:
    """Confirmed: the logs of these containers are being archived, then the containers removed."""

    items: list[ReplaceItem]


@dataclass(frozen=True, slots=True)
class Replaced:
    """What archiving and removing one rank's stopped container did."""

    outcome: ReplaceOutcome


@dataclass(frozen=True, slots=True)
class Launching:
    """Confirmed (and cleared): `docker run` starts on the ranks in the recipe's order; `overridden` when the
    operator overrode the preflight."""

    overridden: bool


Note = (LockTakenOver | GateAnswered | PreflightPassed | PreflightProblem | PreflightOverridden
        | ReplacePlanned | LaunchRefused | Replacing | Replaced | Launching)

# ---- outcomes: how it ended ----------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Locked:
    """The cluster lock was not taken (another cockpit holds it, or rank 0 is out of reach): nothing ran."""

    error: LockError


@dataclass(frozen=True, slots=True)
class Refused:
    """The gate is closed (`gate.blockers`): nothing was changed."""

    gate: L.Gate


@dataclass(frozen=True, slots=True)
class GatePassed:
    """A dry run: the gate is open, nothing was changed."""

    gate: L.Gate


@dataclass(frozen=True, slots=True)
class Cancelled:
    """`confirm(gate)` said no: nothing was changed."""

    gate: L.Gate


@dataclass(frozen=True, slots=True)
class ReplaceFailed:
    """A stopped container could not be archived and removed: nothing was launched."""

    outcomes: list[ReplaceOutcome]

    @property
    def first(self) -> ReplaceOutcome:
        return next(o for o in self.outcomes if not o.ok)


@dataclass(frozen=True, slots=True)
class Launched:
    """The launcher ran: `started` when every rank's `docker run` answered with a container; `finished` is
    what the face's `follow` returned (None without one)."""

    launcher: L.Launcher
    started: bool
    finished: bool | None = None


Outcome = Locked | Refused | GatePassed | Cancelled | ReplaceFailed | Launched

Emit = Callable[[Note], None]
Confirm = Callable[[L.Gate], Awaitable[bool]]
Follow = Callable[[L.Launcher, bool], Awaitable[bool]]


async def check_gate(fleet: Fleet, cfg: ClusterConfig, preflight: PreflightSource, *,
                     override_preflight: bool = False, replace_stopped: bool = False,
                     ledger: Ledger | None = None) -> L.Gate:
    """The launch gate with the face's preflight failures (also the TUI's look before its dialog)."""
    failures = await preflight()
    return await L.launch_gate(fleet, cfg, preflight_failures=failures, override_preflight=override_preflight,
                               replace_stopped=replace_stopped, ledger=ledger)


def _gate_notes(gate: L.Gate, override_preflight: bool) -> list[Note]:
    """What the gate says, in the order the CLI prints it: preflight, the replace plan, the refusals."""
    fails = gate.preflight_failures
    notes: list[Note] = [PreflightProblem(f, L.UNKNOWN_MARK in f) for f in fails]
    if not fails:
        notes.append(PreflightPassed())
    elif override_preflight:
        notes.append(PreflightOverridden(len(fails)))
    notes += [ReplacePlanned(item) for item in gate.replace]
    notes += [LaunchRefused(b) for b in gate.blockers]
    return notes


async def run_launch(fleet: Fleet, cfg: ClusterConfig, *, preflight: PreflightSource, confirm: Confirm,
                     emit: Emit, make_launcher: Callable[[], L.Launcher], ledger: Ledger,
                     override_preflight: bool = False, replace_stopped: bool = False, dry_run: bool = False,
                     lock: bool = True, follow: Follow | None = None) -> Outcome:
    """Gate, confirm, clear the replace plan and launch, under the cluster lock (see the module's doc).

    `dry_run` stops once the gate is open (`GatePassed`); only a dry run may go without the lock (`lock`
    False: a read-only cockpit writes no lock). `make_launcher` builds the face's `Launcher` (its emit, its
    watcher); the launcher is closed before the lock is released."""
    if not lock and not dry_run:
        raise ValueError("a launch always holds the cluster lock: only a dry run may go without it")
    try:
        held: AbstractAsyncContextManager[ClusterLock | None] = (
            ClusterLock(fleet, cfg, "launch") if lock else nullcontext())
        async with held as taken:
            if taken is not None and taken.warning:
                emit(LockTakenOver(taken.warning))
            return await _gated(fleet, cfg, preflight=preflight, confirm=confirm, emit=emit,
                                make_launcher=make_launcher, ledger=ledger,
                                override_preflight=override_preflight, replace_stopped=replace_stopped,
                                dry_run=dry_run, follow=follow)
    except LockError as exc:
        return Locked(exc)


async def _gated(fleet: Fleet, cfg: ClusterConfig, *, preflight: PreflightSource, confirm: Confirm,
                 emit: Emit, make_launcher: Callable[[], L.Launcher], ledger: Ledger,
                 override_preflight: bool, replace_stopped: bool, dry_run: bool,
                 follow: Follow | None) -> Outcome:
    gate = await check_gate(fleet, cfg, preflight, override_preflight=override_preflight,
                            replace_stopped=replace_stopped, ledger=ledger)
    emit(GateAnswered(gate))
    for note in _gate_notes(gate, override_preflight):
        emit(note)
    if not gate.open:
        return Refused(gate)
    if dry_run:
        return GatePassed(gate)
    if not await confirm(gate):
        return Cancelled(gate)
    if gate.replace:
        emit(Replacing(list(gate.replace)))
        outcomes = await execute_replace(fleet, cfg, gate.replace, ledger)
        for o in outcomes:
            emit(Replaced(o))
        if not all(o.ok for o in outcomes):
            return ReplaceFailed(outcomes)
    emit(Launching(override_preflight))
    launcher = make_launcher()
    try:
        started = await launcher.launch()
        finished = await follow(launcher, started) if follow is not None else None
    finally:
        await launcher.close()
    return Launched(launcher, started, finished)
