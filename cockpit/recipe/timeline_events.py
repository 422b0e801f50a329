"""The live model's typed events and values, pure data: a rank's `Failure`, what changed on a rank (phase,
progress, failure, stop, host, launch), the API's and the engine's state, and the cluster's verdict.
`LaunchEvent` is their union, what `rank_timeline` and `timeline` yield; `event_dict` is an event as
JSON-ready data.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from cockpit.api.liveness import Liveness
from cockpit.api.status import ApiStatus
from cockpit.recipe.phases import Phase


@dataclass(frozen=True, slots=True)
class Failure:
    """Why a rank is red: a label, the cause line, the lines before it, and what to do."""

    rank: int
    label: str
    remedy: str
    cause: str
    context: tuple[str, ...]
    at: float
    source: Literal["log", "container", "stuck", "host", "launcher", "api"]
    priority: int = 0
    exit_reason: str = ""
    secondary: bool = False          # reports another rank's death, not its own cause

    def to_dict(self) -> dict[str, Any]:
        return {"rank": self.rank, "label": self.label, "remedy": self.remedy, "cause": self.cause,
                "context": list(self.context), "at": self.at, "source": self.source,
                "exit_reason": self.exit_reason, "secondary": self.secondary}


@dataclass(frozen=True, slots=True)
class PhaseEntered:
    rank: int
    phase: Phase
    at: float


@dataclass(frozen=True, slots=True)
class ProgressChanged:
    rank: int
    done: int
    total: int
    at: float


@dataclass(frozen=True, slots=True)
class RankFailed:
    failure: Failure


@dataclass(frozen=True, slots=True)
class RankRecovered:
    """A judgement of the rank was withdrawn on new evidence (a rank judged stuck moved on)."""

    rank: int
    detail: str
    at: float


@dataclass(frozen=True, slots=True)
class RankStopped:
    rank: int
    detail: str
    at: float


@dataclass(frozen=True, slots=True)
class RankUnknown:
    rank: int
    detail: str
    at: float


@dataclass(frozen=True, slots=True)
class EngineChanged:
    liveness: Liveness


@dataclass(frozen=True, slots=True)
class HostChanged:
    rank: int
    lost: bool
    detail: str
    at: float


@dataclass(frozen=True, slots=True)
class RankLaunched:
    rank: int
    command: str
    container_id: str
    at: float


@dataclass(frozen=True, slots=True)
class ApiChanged:
    readiness: ApiStatus


Owner = Literal["cockpit", "by hand", "none", "unknown"]
RankCondition = Literal["none", "booting", "ready", "stopping", "stopped", "failed", "followed", "unknown"]
VerdictState = Literal["idle", "launching", "ready", "hung", "down", "stopping", "stopped", "host-lost",
                       "unknown", "incomplete"]


@dataclass(frozen=True, slots=True)
class ClusterVerdict:
    state: VerdictState
    summary: str
    first_failed: int | None = None
    remedy: str = ""

    @property
    def code(self) -> str | None:
        """The stable error code of a verdict that is a failure state (`cockpit.errorcodes`), else None."""
        return VERDICT_CODES.get(self.state)

    def to_dict(self) -> dict[str, Any]:
        return {"state": self.state, "summary": self.summary, "first_failed": self.first_failed,
                "remedy": self.remedy, "code": self.code}


VERDICT_CODES: dict[str, str] = {"hung": "engine-hung", "down": "rank-failed", "host-lost": "host-lost",
                                 "unknown": "state-unknown", "incomplete": "launch-incomplete"}


@dataclass(frozen=True, slots=True)
class VerdictChanged:
    verdict: ClusterVerdict


LaunchEvent = (PhaseEntered | ProgressChanged | RankFailed | HostChanged | RankLaunched | ApiChanged
               | VerdictChanged | RankStopped | RankUnknown | EngineChanged | RankRecovered)


def event_dict(event: LaunchEvent) -> dict[str, Any]:
    """An event as JSON-ready data, with its kind."""
    kind = type(event).__name__
    if isinstance(event, RankFailed):
        return {"event": kind, **event.failure.to_dict()}
    if isinstance(event, ApiChanged):
        return {"event": kind, **event.readiness.to_dict()}
    if isinstance(event, EngineChanged):
        return {"event": kind, **event.liveness.to_dict()}
    if isinstance(event, VerdictChanged):
        return {"event": kind, **event.verdict.to_dict()}
    data = {k: getattr(event, k) for k in event.__dataclass_fields__}
    if isinstance(event, PhaseEntered):
        data["phase"] = event.phase.value
    return {"event": kind, **data}
