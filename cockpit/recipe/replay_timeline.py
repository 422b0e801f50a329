"""The live model of the cluster (`ClusterTimeline`) rebuilt from a recording's events up to a time, for a
replay (`recipe.replay`): the Launch pane, the header and the Stats pane's "which rank is stuck" block
render it as they render the live one.

What the recorder keeps is applied in time order, as the live model took it: phases entered (per rank, at
its host's log clock; a phase not later than the one reached, on a rank that had stopped or failed, is a
new container's boot), failures with their cause and the last lines before it, stops, withdrawn judgements,
hosts lost and back, containers of unknown state, the API status and the engine's liveness, and every
rank's condition when it changed (which corrects what the events alone would say: a stop, a container gone).

What it does not keep stays unknown, never invented: a rank with nothing recorded yet is "not recorded"
(unknown); loading progress, log lines, container IDs and exit codes are absent (a stopped rank shows
"stopped", not its exit code); a failure's context has the recorded lines only.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import get_args

from cockpit.api.liveness import Liveness, LivenessState
from cockpit.api.status import ApiState, ApiStatus
from cockpit.recipe.containers import ContainerState
from cockpit.recipe.phases import PHASE_INDEX, Phase
from cockpit.recipe.timeline import ClusterTimeline, Failure, RankTimeline
from cockpit.telemetry.recorder import Event

NOT_RECORDED_RANK = "not in the recording before this time"
CONDITION_UNKNOWN = "state unknown then (why is not recorded)"
OVER = ("stopped", "failed", "followed")
SOURCES = ("log", "container", "stuck", "host", "launcher", "api")
PHASES = {p.value: p for p in Phase}
API_STATES = frozenset(get_args(ApiState))
LIVENESS_STATES = frozenset(get_args(LivenessState))


def timeline_at(events: Iterable[Event], ranks: Iterable[int], hang_after_s: float = 90.0) -> ClusterTimeline:
    """The model as the recorded `events` (time order, all up to the replay time) leave it. The verdict
    is not set here: the caller restores the recorded one (`replay.verdict_at`)."""
    model = ClusterTimeline(ranks, hang_after_s=hang_after_s)
    for tl in model.ranks.values():
        tl.pending = NOT_RECORDED_RANK
    for e in events:
        apply(model, e)
    return model


def _str(value: object, default: str = "") -> str:
    return value if isinstance(value, str) else default


def _num(value: object) -> float | None:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def _detail(e: Event) -> str:
    """An event's detail: its data's (newer recordings), else what its summary says after the rank."""
    found = _str(e.data.get("detail"))
    if found:
        return found
    head, _, rest = e.summary.partition(": ")
    if rest:
        return rest
    return head.partition(" (")[2].rstrip(")") or e.summary


def apply(model: ClusterTimeline, e: Event) -> None:
    """One recorded event into the model (kinds the live model does not follow are ignored)."""
    if e.kind == "api":
        state = _str(e.data.get("state"))
        if state in API_STATES:
            model.api = ApiStatus(state, _str(e.data.get("message")), _str(e.data.get("remedy")),  # type: ignore[arg-type]
                                  checked_at=e.t)
        return
    if e.kind == "engine":
        state = _str(e.data.get("state"))
        if state in LIVENESS_STATES:
            model.liveness = Liveness(state, _num(e.data.get("since")), _str(e.data.get("message")),  # type: ignore[arg-type]
                                      _str(e.data.get("remedy")))
        return
    if e.rank is None or e.rank not in model.ranks:
        return
    tl = model.ranks[e.rank]
    if e.kind == "phase":
        _phase(model, tl, e)
    elif e.kind == "failure":
        _failure(tl, e)
    elif e.kind == "recovered":
        tl.failure = None
    elif e.kind == "stopped":
        _seen(tl)
        _stopped(tl, e.t)
        tl.stop_detail = _detail(e)
        if tl.failure is not None and tl.failure.secondary:
            tl.failure = None            # a stopped rank that had lost a peer: stopped, not failed
    elif e.kind == "unknown":
        _seen(tl)
        tl.unknown = _detail(e)
    elif e.kind == "host-lost":
        if tl.host_lost_since is None:
            tl.host_lost_since, tl.host_detail = e.t, _detail(e)
    elif e.kind == "host-back":
        tl.host_lost_since, tl.host_detail = None, ""
    elif e.kind == "condition":
        _condition(model, tl, e)


def _seen(tl: RankTimeline) -> None:
    tl.pending = ""


def _stopped(tl: RankTimeline, at: float) -> None:
    """Stopped at `at`: its container exited then (the bar ends there; its exit code is not recorded)."""
    tl.stopped = True
    tl.container = ContainerState(tl.container_id or "", "", "exited", finished_at=at)


def _phase(model: ClusterTimeline, tl: RankTimeline, e: Event) -> None:
    value = _str(e.data.get("phase")) or e.summary.partition(": ")[2]
    phase = PHASES.get(value)
    if phase is None:
        return
    if PHASE_INDEX[phase] <= PHASE_INDEX[tl.phase]:
        if tl.condition not in OVER:
            return                       # the same boot read again (a later cockpit re-read the log)
        tl = model.reset_rank(tl.rank)   # a new container after a stop or a failure
    _seen(tl)
    tl.unknown = ""
    tl.enter(phase, e.t)


def _failure(tl: RankTimeline, e: Event) -> None:
    d = e.data
    source = _str(d.get("source"), "log")
    context = d.get("context")
    at = _num(d.get("at"))
    _seen(tl)
    tl.failure = Failure(e.rank if e.rank is not None else tl.rank, _str(d.get("label"), "failed"),
                         _str(d.get("remedy")), _str(d.get("cause"), e.summary),
                         tuple(str(line) for line in context) if isinstance(context, list) else (),
                         e.t if at is None else at, source if source in SOURCES else "log",  # type: ignore[arg-type]
                         exit_reason=_str(d.get("exit_reason")), secondary=d.get("secondary") is True)


def _condition(model: ClusterTimeline, tl: RankTimeline, e: Event) -> None:
    """The rank's condition as the live model had it: where the events above leave it otherwise, the
    recorded condition wins (without inventing what it does not say)."""
    to = _str(e.data.get("to"))
    _seen(tl)
    if to == tl.condition:
        return
    if to == "none":
        model.reset_rank(tl.rank).pending = ""          # its container is gone
    elif to == "unknown":
        tl.unknown = tl.unknown or CONDITION_UNKNOWN
    elif to == "stopping":
        tl.stop_began = e.t if tl.stop_began is None else tl.stop_began
    elif to == "stopped":
        tl.failure = None
        tl.unknown = ""
        if not tl.stopped:
            _stopped(tl, e.t)
    elif to in ("booting", "ready"):
        tl.unknown = ""
        tl.host_lost_since, tl.host_detail = None, ""
