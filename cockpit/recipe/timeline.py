"""The live model of the cluster, pure (no I/O): what every rank is doing and the verdict over them.

`RankTimeline` is one rank's state machine, fed by its container's log lines (`phases.py` rules), its
`docker inspect` state, stop requests, API readiness (rank 0) and host connectivity; it yields typed
events. `ClusterTimeline` holds every rank, the API status and the engine's liveness, and the cluster
verdict: one rank down means the cluster is down; a rank the cockpit stopped is stopped, never failed;
the rank blamed is the one that failed first by its host's own log clock.
`cockpit.recipe.watch` keeps one up to date; the header, every pane and `status` render it.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from typing import Any, Literal

from cockpit.api.liveness import GENERATION, PROMPT, RUNNING, EngineSample, HangTracker, Liveness
from cockpit.api.status import ApiStatus
from cockpit.recipe.containers import ContainerState
from cockpit.recipe.phases import (
    PHASE_INDEX,
    TRACEBACK_RULE,
    FailureRule,
    Phase,
    in_traceback,
    is_benign,
    match_failure,
    match_phase,
    match_progress,
    match_stats,
    starts_traceback,
)

STOP_SKEW = 2.0              # seconds of clock difference allowed between the admin box and a host
CLEAN_EXIT_WINDOW = 30.0     # a clean exit (code 0): what it printed this long before was its shutdown
STATS_KEPT = 120             # engine stats lines kept per rank (20 minutes at vLLM's 10 s)
FAILURE_GRACE = 3.0          # seconds after the first failure before the verdict is final (others' logs lag)
CONTEXT_LINES = 400          # lines kept per rank for a failure's context (≥ 250 required)
CAUSE_CONTEXT = 300          # lines shown before a cause line
DEFAULT_STUCK_LIMITS: dict[Phase, float] = {
    Phase.LAUNCHED: 300, Phase.RUNNING: 900, Phase.DIST_INIT: 1800, Phase.ENGRAM: 1200,
    Phase.LOADING: 2400, Phase.KV_CACHE: 900, Phase.CUDA_GRAPHS: 1200, Phase.WAIT_HEAD: 3600,
    Phase.API_START: 900,
}


def _stopped_within(stats: list[tuple[float, float, float, int, int]], i: int) -> float | None:
    """When the tokens stopped inside stats line i's interval, if line i only partly produced them and the
    next line is flat with requests in the engine: the interval's start plus its share of the rate
    before (vLLM averages each line over its interval)."""
    if i < 1 or i + 1 >= len(stats):
        return None
    before, this, after = stats[i - 1], stats[i], stats[i + 1]
    rate, partial = before[1] + before[2], this[1] + this[2]
    if not 0 < partial < rate or after[1] + after[2] > 0 or after[3] + after[4] == 0:
        return None
    return before[0] + (this[0] - before[0]) * partial / rate


def _ranks(ranks: Iterable[int]) -> str:
    return ", ".join(map(str, ranks))


# ---- events ---------------------------------------------------------------------------------------------


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
                       "unknown"]


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
                                 "unknown": "state-unknown"}


@dataclass(frozen=True, slots=True)
class VerdictChanged:
    verdict: ClusterVerdict


LaunchEvent = (PhaseEntered | ProgressChanged | RankFailed | HostChanged | RankLaunched | ApiChanged
               | VerdictChanged | RankStopped | RankUnknown | EngineChanged)


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


# ---- one rank's state machine -----------------------------------------------------------------------------


@dataclass
class PhaseSpan:
    phase: Phase
    start: float
    end: float | None = None

    def duration(self, now: float) -> float:
        return max(0.0, (self.end if self.end is not None else now) - self.start)


@dataclass
class RankTimeline:
    """One rank's boot: phases entered (forward only), progress, failure, host connectivity."""

    rank: int
    spans: list[PhaseSpan] = field(default_factory=list)
    progress: tuple[int, int] | None = None
    failure: Failure | None = None
    host_lost_since: float | None = None
    host_detail: str = ""
    container: ContainerState | None = None
    container_id: str | None = None
    owner: Owner = "none"
    stop_began: float | None = None      # the cockpit began stopping it (or it exited cleanly) at this time
    stopped: bool = False                # exited after a stop: not a failure, whatever it printed meanwhile
    unknown: str = ""                    # why its container is not known (host lost during docker run)
    lines: deque[tuple[int, str]] = field(default_factory=lambda: deque(maxlen=CONTEXT_LINES))
    # the engine's periodic stats lines: (host time, prompt tok/s, generation tok/s, running, waiting)
    stats: deque[tuple[float, float, float, int, int]] = field(
        default_factory=lambda: deque(maxlen=STATS_KEPT))
    _seq: int = 0
    _best_rule: FailureRule | None = None
    _tb_open: bool = False
    _tb_at: float = 0.0

    @property
    def phase(self) -> Phase:
        return self.spans[-1].phase if self.spans else Phase.PENDING

    @property
    def started(self) -> float | None:
        return self.spans[0].start if self.spans else None

    @property
    def failed(self) -> bool:
        return self.failure is not None

    @property
    def ready(self) -> bool:
        return self.phase is Phase.READY and not self.failed and not self.stopped

    @property
    def condition(self) -> RankCondition:
        """One word for the rank: what the header, the panes and `status` show."""
        if self.failure is not None:
            return "followed" if self.failure.secondary else "failed"
        if self.stopped:
            return "stopped"
        if self.unknown:
            return "unknown"
        if self.stop_began is not None:
            return "stopping"
        if self.ready:
            return "ready"
        if self.spans:
            return "booting"
        return "none"

    def request_stop(self, at: float) -> None:
        """The cockpit begins stopping this rank: its shutdown output is not judged as failures."""
        if self.stop_began is None or at < self.stop_began:
            self.stop_began = at

    def _shutting_down(self, at: float) -> bool:
        return self.stop_began is not None and at >= self.stop_began - STOP_SKEW

    def end_at(self, now: float) -> float:
        """Where the open phase ends: at the failure, when the container exited, or now."""
        if self.failure is not None:
            return self.failure.at
        c = self.container
        if c is not None and c.exited and c.finished_at is not None and self.spans:
            return max(self.spans[-1].start, c.finished_at)
        return now

    def total(self, now: float) -> float:
        if not self.spans:
            return 0.0
        end = self.end_at(now)
        if self.phase is Phase.READY:
            end = self.spans[-1].start
        return max(0.0, end - self.spans[0].start)

    def durations(self, now: float) -> dict[Phase, float]:
        """Seconds spent in each phase so far (the open phase counts up to now, the failure or the exit)."""
        stop = self.end_at(now)
        out: dict[Phase, float] = {}
        for span in self.spans:
            if span.phase is not Phase.READY:
                out[span.phase] = max(0.0, (span.end if span.end is not None else stop) - span.start)
        return out

    # -- inputs --

    def enter(self, phase: Phase, at: float) -> list[LaunchEvent]:
        """Move forward to `phase` (ignored if it is not later than the current one or the rank failed)."""
        if self.failed or PHASE_INDEX[phase] <= PHASE_INDEX[self.phase]:
            return []
        if self.spans:
            at = max(at, self.spans[-1].start)
            self.spans[-1].end = at
        self.spans.append(PhaseSpan(phase, at))
        return [PhaseEntered(self.rank, phase, at)]

    def launched(self, at: float, container_id: str | None = None) -> list[LaunchEvent]:
        self.container_id = container_id
        return self.enter(Phase.LAUNCHED, at)

    def feed_line(self, text: str, at: float) -> list[LaunchEvent]:
        """One line of the container's log (without docker's timestamp)."""
        self._seq += 1
        self.lines.append((self._seq, text))
        events: list[LaunchEvent] = []
        if not self.spans or self.phase is Phase.LAUNCHED:
            events += self.enter(Phase.RUNNING, at)
        if not self._shutting_down(at):
            events += self._failures(text, at)
        stats = match_stats(text)
        if stats is not None:
            self.stats.append((at, *stats))
        phase = match_phase(text, self.rank)
        if phase is not None:
            events += self.enter(phase, at)
        prog = match_progress(text)
        if prog is not None and not self.failed and prog != self.progress:
            self.progress = prog
            events.append(ProgressChanged(self.rank, prog[0], prog[1], at))
        return events

    def _failures(self, text: str, at: float) -> list[LaunchEvent]:
        """Failure signatures; a traceback is judged by its exception line (benign retries are not)."""
        if self._tb_open:
            if in_traceback(text):
                return []
            self._tb_open = False
            if is_benign(text):
                return []
            # a traceback happened when it began, not when its exception line was read
            return self._log_failure(match_failure(text) or TRACEBACK_RULE, text, min(at, self._tb_at))
        if starts_traceback(text) and not is_benign(text):
            self._tb_open, self._tb_at = True, at
            return []
        rule = match_failure(text)
        return self._log_failure(rule, text, at) if rule is not None else []

    def _context(self, upto: int) -> tuple[str, ...]:
        before = [t for s, t in self.lines if s <= upto]
        return tuple(before[-CAUSE_CONTEXT:])

    def _log_failure(self, rule: FailureRule, text: str, at: float) -> list[LaunchEvent]:
        if self.stopped and rule.secondary:
            return []        # it was stopped: that it had lost a peer before is no failure of its own
        if self._best_rule is not None and rule.priority <= self._best_rule.priority:
            if self.failure is not None and at < self.failure.at and self.failure.source == "log":
                self.failure = replace(self.failure, at=at)   # the rank failed as early as its first sign
            return []
        if self.failure is not None and self.failure.source not in ("log", "container"):
            return []
        self._best_rule = rule
        first_at = self.failure.at if self.failure else at
        self.failure = Failure(self.rank, rule.label, rule.remedy, text, self._context(self._seq), first_at,
                               "log", rule.priority, self.failure.exit_reason if self.failure else "",
                               rule.secondary)
        return [RankFailed(self.failure)]

    def feed_container(self, state: ContainerState | None, at: float) -> list[LaunchEvent]:
        """The container's `docker inspect` state (None: there is no container of that name)."""
        if state is None:
            return []
        self.container = state
        self.container_id = self.container_id or state.id
        self.unknown = ""
        events: list[LaunchEvent] = []
        if state.running or state.exited:
            events += self.enter(Phase.RUNNING, state.started_at or at)
        if state.exited and not self.stopped and self._was_stopped(state):
            self.stopped = True
            if self.failure is not None and (self.failure.secondary or self._shutting_down(self.failure.at)):
                self.failure, self._best_rule = None, None
            return [*events, RankStopped(self.rank, state.exit_reason(), state.finished_at or at)]
        if state.exited and not self.stopped and (self.failure is None or not self.failure.exit_reason):
            reason = state.exit_reason()
            if self.failure is not None:
                self.failure = replace(self.failure, exit_reason=reason)
            else:
                cause = self.lines[-1][1] if self.lines else f"container {state.name} {reason}"
                label = "container OOM-killed" if state.oom_killed else "container exited"
                remedy = ("the rank is down, so the cluster is down: read its last lines, stop every rank "
                          "(head first), fix the cause, relaunch")
                self.failure = Failure(self.rank, label, remedy, cause, self._context(self._seq),
                                       state.finished_at or at, "container", 0, reason)
            events.append(RankFailed(self.failure))
        return events

    def _was_stopped(self, state: ContainerState) -> bool:
        """Exited because it was stopped: after the cockpit asked it to stop (not OOM-killed), or with exit
        code 0 (vLLM exits 0 only when it shuts down on SIGTERM/SIGINT, whoever sent it)."""
        if state.oom_killed:
            return False
        if self.stop_began is not None:
            return state.finished_at is None or state.finished_at >= self.stop_began - STOP_SKEW
        if state.exit_code == 0:
            self.stop_began = (state.finished_at or time.time()) - CLEAN_EXIT_WINDOW
            return True
        return False

    def api_ready(self, at: float) -> list[LaunchEvent]:
        return self.enter(Phase.READY, at)

    def api_dead(self, message: str, at: float) -> list[LaunchEvent]:
        if self.failed or self.stop_began is not None:
            return []
        self.failure = Failure(self.rank, "API engine dead (/health 503)",
                               "the engine behind the API died: read rank 0's last lines, stop all ranks, "
                               "relaunch", message, self._context(self._seq), at, "api")
        return [RankFailed(self.failure)]

    def launch_failed(self, message: str, remedy: str, at: float) -> list[LaunchEvent]:
        self.failure = Failure(self.rank, "launcher failed", remedy, message, (message,), at, "launcher")
        return [RankFailed(self.failure)]

    def launch_unknown(self, detail: str, at: float) -> list[LaunchEvent]:
        """The host went away while `docker run` was in flight: whether it started is not known."""
        self.unknown = detail
        return [RankUnknown(self.rank, detail, at)]

    def host_lost(self, detail: str, at: float) -> list[LaunchEvent]:
        if self.host_lost_since is not None:
            return []
        self.host_lost_since, self.host_detail = at, detail
        return [HostChanged(self.rank, True, detail, at)]

    def host_back(self, at: float) -> list[LaunchEvent]:
        if self.host_lost_since is None:
            return []
        self.host_lost_since, self.host_detail = None, ""
        return [HostChanged(self.rank, False, "connected again; following resumes", at)]

    def check_stuck(self, now: float, limits: dict[Phase, float]) -> list[LaunchEvent]:
        """A rank in one phase past its limit turns red (not while its host is lost)."""
        if (self.failed or not self.spans or self.host_lost_since is not None or self.ready
                or self.stop_began is not None or self.stopped):
            return []
        span = self.spans[-1]
        limit = limits.get(span.phase)
        if limit is None or now - span.start <= limit:
            return []
        last = self.lines[-1][1] if self.lines else "(no log lines)"
        self.failure = Failure(self.rank, f"stuck in '{span.phase.value}' for more than {limit:g} s",
                               "read the rank's last lines; a worker waiting forever often means the head "
                               "died or a fabric problem: stop every rank (head first) and relaunch",
                               last, self._context(self._seq), now, "stuck")
        return [RankFailed(self.failure)]


class ClusterTimeline:
    """Every rank's timeline, the API and engine liveness, and the verdict over them: the live model of the
    cluster that the header, every pane and `status` render."""

    def __init__(self, ranks: Iterable[int], *, grace: float = FAILURE_GRACE, hang_after_s: float = 90.0):
        self.ranks: dict[int, RankTimeline] = {r: RankTimeline(r) for r in sorted(ranks)}
        self.api: ApiStatus | None = None
        self.liveness: Liveness | None = None
        self.metrics_flat_until: float | None = None   # wall time of /metrics still showing no progress
        self.grace = grace                 # a "down" verdict is published this long after the first failure
        self.hang_after_s = hang_after_s
        self._verdict = ClusterVerdict("idle", "nothing launched")
        self._failure_seen: float | None = None

    def __getitem__(self, rank: int) -> RankTimeline:
        return self.ranks[rank]

    @property
    def verdict(self) -> ClusterVerdict:
        return self._verdict

    def reset_rank(self, rank: int) -> RankTimeline:
        """A new container on that rank (a relaunch): its timeline starts again (the head's: the API's and
        the engine's too)."""
        self.ranks[rank] = RankTimeline(rank)
        if rank == min(self.ranks):
            self.api, self.liveness, self.metrics_flat_until = None, None, None
        return self.ranks[rank]

    def compute_verdict(self) -> ClusterVerdict:
        """The cluster's state from its ranks, the API and the engine's liveness (pure; see `settle`)."""
        ts = self.ranks
        failed = sorted((t.failure.secondary, t.failure.at, r) for r, t in ts.items()
                        if t.failure is not None)
        if failed:
            first = failed[0][2]
            f = ts[first].failure
            assert f is not None
            others = [r for _, _, r in failed[1:]]
            also = f"; followed by rank {', '.join(map(str, others))}" if others else ""
            return ClusterVerdict("down", f"cluster DOWN: rank {first} failed first: {f.label}{also} "
                                          "(one rank down means the cluster is down)", first,
                                  "read its cause and the lines before it; stop every rank, head first "
                                  "(`r37-cockpit stop`), fix the cause, then relaunch "
                                  "(`r37-cockpit launch --replace-stopped`)")
        unknown = [r for r, t in ts.items() if t.condition == "unknown"]
        if unknown:
            return ClusterVerdict("unknown", f"rank {_ranks(unknown)}: container state unknown "
                                             f"({ts[unknown[0]].unknown or 'host not reachable'})", None,
                                  "wait for the host to answer: its container is looked up by name and "
                                  "recorded if this launch created it; `r37-cockpit hosts` shows the link")
        lost = [r for r, t in ts.items() if t.host_lost_since is not None]
        if lost:
            return ClusterVerdict("host-lost", f"rank {_ranks(lost)} host lost: the cluster is down if that "
                                               "rank is; following resumes when it returns", None,
                                  "check the host's link and power (`r37-cockpit hosts`)")
        conds = {r: t.condition for r, t in ts.items()}
        stopped = [r for r, c in conds.items() if c == "stopped"]
        stopping = [r for r, c in conds.items() if c == "stopping"]
        running = [r for r, c in conds.items() if c in ("booting", "ready")]
        if stopping:
            return ClusterVerdict("stopping", f"stopping: rank {_ranks(stopping)} shutting down", None, "")
        if stopped and running:
            return ClusterVerdict("down", f"cluster DOWN: rank {_ranks(stopped)} stopped while rank "
                                          f"{_ranks(running)} still run", None,
                                  "stop the rest (`r37-cockpit stop`), then relaunch "
                                  "(`r37-cockpit launch --replace-stopped`)")
        if stopped:
            return ClusterVerdict("stopped", f"cluster STOPPED: rank {_ranks(stopped)} stopped", None,
                                  "relaunch with `r37-cockpit launch --replace-stopped` (archives each "
                                  "rank's log, then removes its stopped container)")
        if ts and ts[min(ts)].ready:
            live = self.engine_liveness()
            if live is not None and live.state == "hung":
                return ClusterVerdict("hung", f"engine HUNG: {live.message}", None, live.remedy)
            return ClusterVerdict("ready", "cluster READY: API answers /health and lists the model")
        if running:
            return ClusterVerdict("launching", f"launching: {len(running)}/{len(ts)} ranks started")
        return ClusterVerdict("idle", "nothing launched")

    def settle(self, events: list[LaunchEvent]) -> list[LaunchEvent]:
        """Promote workers that reach 'waiting for head' after the head is ready; then append a
        VerdictChanged when the verdict changed. A "down" verdict waits `grace` seconds after the first
        failure, so the rank blamed is the one that failed first by its host's clock, not the first to
        report."""
        events = list(events)
        head = self.ranks[min(self.ranks)]
        if head.ready:
            for r, t in self.ranks.items():
                if r != head.rank and t.phase is Phase.WAIT_HEAD:
                    events += t.enter(Phase.READY, max(t.spans[-1].start, head.spans[-1].start))
        new = self.compute_verdict()
        if new.state == "down" and new.first_failed is not None:
            now = time.monotonic()
            self._failure_seen = self._failure_seen if self._failure_seen is not None else now
            if now - self._failure_seen < self.grace:
                return events
        elif new.state != "down":
            self._failure_seen = None
        if new != self._verdict:
            self._verdict = new
            events = [*events, VerdictChanged(new)]
        return events

    def mark_liveness(self, live: Liveness) -> list[LaunchEvent]:
        """A /metrics judgement (the watcher's HangTracker): an EngineChanged event when its state moves."""
        old, self.liveness = self.liveness, live
        return [EngineChanged(live)] if old is None or old.state != live.state else []

    def log_liveness(self) -> Liveness | None:
        """The same hang rule over the head's stats lines (host clock): what a one-off look can tell.

        vLLM's line averages its last interval, so the line before the first flat one tells when within
        its interval the tokens stopped (its rate against the one before: a hang a third into the window
        leaves a third of the rate); and a flat run that /metrics still confirms now (`flat_until`, two
        samples without growth) lasts until now, not only until the last line."""
        stats = list(self.ranks[min(self.ranks)].stats)
        if not stats:
            return None
        tracker = HangTracker(self.hang_after_s)
        found = frozenset({RUNNING, GENERATION, PROMPT})
        prompt = gen = 0.0
        live = None
        prev_at = stats[0][0]
        for i, (at, p_tps, g_tps, running, waiting) in enumerate(stats):
            dt = max(0.0, at - prev_at)
            prompt, gen = prompt + p_tps * dt, gen + g_tps * dt
            stopped_at = _stopped_within(stats, i)
            if stopped_at is not None:
                tracker.feed(EngineSample(running, waiting, gen, prompt, None, stopped_at, found))
            prev_at = at
            live = tracker.feed(EngineSample(running, waiting, gen, prompt, None, at, found))
        last = stats[-1]
        flat_now = self.metrics_flat_until
        if flat_now is not None and flat_now > last[0] and last[1] == last[2] == 0 and last[3] + last[4] > 0:
            live = tracker.feed(EngineSample(last[3], last[4], gen, prompt, None, flat_now, found))
        return live

    def engine_liveness(self) -> Liveness | None:
        """Hung if either the /metrics series or the head's log says so; else the /metrics judgement."""
        logged = self.log_liveness()
        if logged is not None and logged.state == "hung":
            return logged
        return self.liveness or logged

    def mark_api(self, ready: ApiStatus, at: float) -> list[LaunchEvent]:
        """Feed a readiness probe: ready turns the head, then every waiting worker, READY."""
        events: list[LaunchEvent] = []
        changed = self.api is None or self.api.state != ready.state
        self.api = ready
        if changed:
            events.append(ApiChanged(ready))
        head = self.ranks[min(self.ranks)]
        if ready.ready:
            events += head.api_ready(at)
            for r, t in self.ranks.items():
                if r != head.rank and t.phase is Phase.WAIT_HEAD:
                    events += t.enter(Phase.READY, at)
        elif ready.engine_dead and head.ready:
            events += head.api_dead(ready.message, at)
        return events


SECONDARY_GRACE = 10.0       # seconds to wait for the root cause after only "a peer died" failures


def settled(timeline: ClusterTimeline, now: float | None = None) -> bool:
    """Launch over: the cluster is ready, or down with a root cause (a rank's own failure), or down with
    only "a peer died" failures for SECONDARY_GRACE seconds (the failing rank's log may be behind)."""
    state = timeline.verdict.state
    if state == "ready":
        return True
    if state != "down":
        return False
    failures = [t.failure for t in timeline.ranks.values() if t.failure is not None]
    if any(not f.secondary for f in failures):
        return True
    return (time.time() if now is None else now) - min(f.at for f in failures) >= SECONDARY_GRACE
