"""Types of the setup jobs: planned steps per rank, the plan the operator confirms, and the events a run
yields (typed, so the pane, the headless command and the tests consume the same thing)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from cockpit.hosts.shell import ShellCommand
from cockpit.recipe.progress import Progress

JOBS = ("recipe", "checkpoint", "runtime", "engram", "env")
JOB_TITLES = {
    "recipe": "download the recipe (launch/, tools/, bench/)",
    "checkpoint": "checkpoint at one pinned revision",
    "runtime": "runtime archive: download, verify, docker load, image ID",
    "engram": "Engram rows on workers (tools/prepare-engram.py)",
    "env": "cluster.env from cluster.toml",
}


class SetupError(Exception):
    """Setup cannot be planned at all (e.g. no pinned revision while offline): one clear sentence.
    `config_error`: what was asked cannot be done with this config and these options (fix them), as
    opposed to a failure on the way (the hub not answering)."""

    def __init__(self, message: str, *, config_error: bool = False):
        super().__init__(message)
        self.config_error = config_error


@dataclass(frozen=True)
class StepOutput:
    """What a step printed (stdout and stderr merged, progress lines left out) and its exit status."""

    status: int | None
    text: str


@dataclass(frozen=True)
class Checked:
    """A step's judgement: a failure reason (None: fine) and facts for the comparison across hosts."""

    reason: str | None = None
    facts: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Step:
    """One command of a job on one host. `shown` are the lines the operator confirms (default: the command
    line itself); `input` goes to the command's stdin, never onto its command line."""

    label: str
    cmd: ShellCommand
    shown: tuple[str, ...] = ()
    input: str | None = None
    check: Callable[[StepOutput], Checked] | None = None
    log: bool = True                   # put the output lines into the job log

    @property
    def lines(self) -> tuple[str, ...]:
        return self.shown or (self.cmd.line,)


@dataclass(frozen=True)
class RankPlan:
    """What a job will do on one rank: steps, or nothing (`done` says why), or a refusal. A host that
    could not be read at all is `unreachable` (its `refused` says why): a failure, not a refusal."""

    job: str
    rank: int
    steps: tuple[Step, ...] = ()
    done: str = ""
    refused: str = ""
    note: str = ""                     # shown with the plan (e.g. the diff of a cluster.env to replace)
    unreachable: bool = False

    @property
    def state(self) -> str:
        if self.refused:
            return "failed" if self.unreachable else "refused"
        return "run" if self.steps else "skip"

    @property
    def refusal_label(self) -> str:
        return "FAILED" if self.unreachable else "REFUSED"


Finalize = Callable[[dict[int, dict[str, Any]]], dict[int, str]]


@dataclass(frozen=True)
class JobPlan:
    job: str
    ranks: dict[int, RankPlan]
    finalize: Finalize | None = None   # comparison across hosts once every rank has finished


@dataclass(frozen=True)
class SetupPlan:
    jobs: tuple[JobPlan, ...]
    targets: dict[int, str]            # rank -> SSH target, for labels

    @property
    def runs_anything(self) -> bool:
        return any(rp.steps and not rp.refused for jp in self.jobs for rp in jp.ranks.values())

    def commands(self) -> list[tuple[str, str]]:
        """(label, command line) of every step to run, for the confirmation dialog."""
        out = []
        for jp in self.jobs:
            for rank in sorted(jp.ranks):
                rp = jp.ranks[rank]
                if rp.refused or not rp.steps:
                    continue
                for step in rp.steps:
                    for line in step.lines:
                        out.append((f"rank {rank} ({self.targets.get(rank, '?')}) — {jp.job}: {step.label}",
                                    line))
        return out

    def notes(self) -> list[str]:
        """Refusals, things already complete, and notes (diffs), one text per rank and job."""
        out = []
        for jp in self.jobs:
            for rank in sorted(jp.ranks):
                rp = jp.ranks[rank]
                if rp.refused:
                    out.append(f"rank {rank} {jp.job}: {rp.refusal_label}: {rp.refused}")
                elif not rp.steps:
                    out.append(f"rank {rank} {jp.job}: nothing to do: {rp.done}")
                if rp.note:
                    out.append(f"rank {rank} {jp.job}:\n{rp.note}")
        return out

    def as_dict(self) -> dict[str, Any]:
        return {"jobs": [{"job": jp.job, "ranks": [
            {"rank": r, "state": rp.state, "done": rp.done, "refused": rp.refused, "note": rp.note,
             "steps": [{"label": s.label, "commands": list(s.lines)} for s in rp.steps]}
            for r, rp in sorted(jp.ranks.items())]} for jp in self.jobs]}


class RankState(StrEnum):
    DONE = "done"            # every step ran and passed its check
    SKIPPED = "skipped"      # nothing to do (already complete, or not for this rank)
    FAILED = "failed"
    REFUSED = "refused"      # refused before anything ran on this rank
    CANCELLED = "cancelled"


@dataclass(frozen=True)
class SetupStarted:
    jobs: tuple[str, ...]
    ranks: tuple[int, ...]


@dataclass(frozen=True)
class StepStarted:
    job: str
    rank: int
    index: int
    count: int
    label: str
    lines: tuple[str, ...]


@dataclass(frozen=True)
class StepProgress:
    job: str
    rank: int
    label: str
    progress: Progress


@dataclass(frozen=True)
class JobLog:
    """One line of the job log (a command's output, or what the runner did)."""

    job: str
    rank: int
    text: str


@dataclass(frozen=True)
class RankDone:
    """How a job ended on one rank; a later RankDone for the same job and rank replaces an earlier one
    (the comparison across hosts may turn `done` into `failed`)."""

    job: str
    rank: int
    state: RankState
    message: str

    @property
    def ok(self) -> bool:
        return self.state in (RankState.DONE, RankState.SKIPPED)

    @property
    def code(self) -> str | None:
        """The stable error code of a rank that did not end well (`cockpit.errorcodes`)."""
        return {RankState.FAILED: "setup-failed", RankState.REFUSED: "launch-blocked",
                RankState.CANCELLED: "interrupted"}.get(self.state)

    def as_dict(self) -> dict[str, Any]:
        return {"job": self.job, "rank": self.rank, "state": self.state.value, "message": self.message,
                "code": self.code}


@dataclass(frozen=True)
class SetupFinished:
    outcomes: tuple[RankDone, ...]
    elapsed: float

    @property
    def ok(self) -> bool:
        return all(o.ok for o in self.outcomes)


SetupEvent = SetupStarted | StepStarted | StepProgress | JobLog | RankDone | SetupFinished
