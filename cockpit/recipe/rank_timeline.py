"""One rank's boot as a state machine, pure (no I/O): `RankTimeline` is fed by its container's log lines
(`phases.py` rules), its `docker inspect` state, stop requests, API readiness (rank 0) and host
connectivity, and yields typed events (`timeline_events`). A rank the cockpit stopped is stopped, never
failed; a traceback is judged by its exception line; a rank in one phase past its limit turns red.
"""

from __future__ import annotations

import time
from collections import deque
from dataclasses import dataclass, field, replace

from cockpit.recipe.containers import ContainerState
from cockpit.recipe.phases import (
    PHASE_INDEX,
    TRACEBACK_RULE,
    FailureRule,
    Phase,
    in_traceback,
    is_access_log,
    is_benign,
    match_failure,
    match_phase,
    match_progress,
    match_stats,
    starts_traceback,
)
from cockpit.recipe.timeline_events import (
    Failure,
    HostChanged,
    LaunchEvent,
    Owner,
    PhaseEntered,
    ProgressChanged,
    RankCondition,
    RankFailed,
    RankRecovered,
    RankStopped,
    RankUnknown,
)

STOP_SKEW = 2.0              # seconds of clock difference allowed between the admin box and a host
CLEAN_EXIT_WINDOW = 30.0     # a clean exit (code 0): what it printed this long before was its shutdown
STATS_KEPT = 120             # engine stats lines kept per rank (20 minutes at vLLM's 10 s)
CONTEXT_LINES = 400          # lines kept per rank for a failure's context (≥ 250 required)
CAUSE_CONTEXT = 300          # lines shown before a cause line
DEFAULT_STUCK_LIMITS: dict[Phase, float] = {
    Phase.LAUNCHED: 300, Phase.RUNNING: 900, Phase.DIST_INIT: 1800, Phase.ENGRAM: 1200,
    Phase.LOADING: 2400, Phase.KV_CACHE: 900, Phase.CUDA_GRAPHS: 1200, Phase.WAIT_HEAD: 3600,
    Phase.API_START: 900,
}



def stopped_detail(state: ContainerState, stop_began: float | None) -> str:
    """How a container the cockpit stopped (or that exited 0) ended, as the operator reads it after
    "stopped": "rank 0 stopped (killed after 10 s: the engine did not exit on SIGTERM)". Exit 137
    after a stop is docker's SIGKILL when its stop timeout ran out (vLLM waiting for open streams, or a
    PID 1 without a SIGTERM handler): still the stop, never a crash. 137 without a stop is not judged here
    (it is a failure: `feed_container`)."""
    code = state.exit_code
    if code == 137 and not state.oom_killed:
        took = ""
        if stop_began is not None and state.finished_at is not None:
            took = f" after {max(0, round(state.finished_at - stop_began))} s"
        return f"killed{took}: the engine did not exit on SIGTERM"
    if code == 143:
        return "ended by SIGTERM, exit code 143"
    return state.exit_reason()


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
    stop_detail: str = ""                # how it stopped, said once it has (`stopped_detail`)
    unknown: str = ""                    # why its container is not known (host lost during docker run,
                                         # docker not answering)
    pending: str = ""                    # what is not read yet (its container, its log): nothing is known
    partial: bool = False                # its log was read from a tail that may not reach its boot
    read_to: float = 0.0                 # host time up to which its log is known read (inf: to its end)
    last_line: tuple[float, str] | None = None   # newest log line read but access lines: (host time, text)
    lines: deque[tuple[int, str]] = field(default_factory=lambda: deque(maxlen=CONTEXT_LINES))
    # the engine's periodic stats lines: (host time, prompt tok/s, generation tok/s, running, waiting)
    stats: deque[tuple[float, float, float, int, int]] = field(
        default_factory=lambda: deque(maxlen=STATS_KEPT))
    _seq: int = 0
    _best_rule: FailureRule | None = None
    _stop_inferred: bool = False         # stopped only because it exited 0 (nobody asked it to stop)
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
    def boot_seen(self) -> bool:
        """Its boot is in the log read (a tail of a long-lived container may begin after it)."""
        return not self.partial

    @property
    def phase_known(self) -> bool:
        """The phase shown is evidence: a boot line was read, or the whole log was (a tail without boot
        lines says only that the container runs, not that it is stuck at its start)."""
        return not (self.partial and self.phase in (Phase.RUNNING, Phase.LAUNCHED))

    @property
    def phase_text(self) -> str:
        """The phase as the operator reads it: with the exit, or said unknown when the log read has none."""
        c = self.container
        if c is not None and c.exited:
            return f"exited in {self.phase.value}" if self.phase_known else "exited"
        if not self.phase_known:
            return "running (boot not in the log read)"
        return self.phase.value

    @property
    def condition(self) -> RankCondition:
        """One word for the rank: what the header, the panes and `status` show."""
        if self.failure is not None:
            return "followed" if self.failure.secondary else "failed"
        if self.stopped:
            return "stopped"
        if self.unknown or self.pending:
            return "unknown"
        if self.stop_began is not None:
            return "stopping"
        if self.ready:
            return "ready"
        if self.spans:
            return "booting"
        return "none"

    def request_stop(self, at: float) -> list[LaunchEvent]:
        """The cockpit begins stopping this rank: its shutdown output is not judged as failures — also
        a failure already read from it, if its host's clock puts it after the stop began."""
        if self.stop_began is None or at < self.stop_began:
            self.stop_began = at
        f = self.failure
        if f is not None and f.source == "log" and self._shutting_down(f.at):
            self.failure, self._best_rule = None, None
            return [RankRecovered(self.rank, "its failure was its shutdown: the cockpit stopped it", f.at)]
        return []

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
        """Move forward to `phase` (ignored if it is not later than the current one, or after the rank's
        failure). A rank judged stuck that moves on was not stuck: that judgement is withdrawn."""
        if PHASE_INDEX[phase] <= PHASE_INDEX[self.phase]:
            return []
        withdrawn: list[LaunchEvent] = []
        if self.failure is not None and self.failure.source == "stuck":
            self.failure = None
            withdrawn.append(RankRecovered(self.rank, f"moved on to {phase.value}", at))
        if self.failure is not None and at > self.failure.at:
            return []
        if self.spans:
            at = max(at, self.spans[-1].start)
            self.spans[-1].end = at
        self.spans.append(PhaseSpan(phase, at))
        return [*withdrawn, PhaseEntered(self.rank, phase, at)]

    def launched(self, at: float, container_id: str | None = None) -> list[LaunchEvent]:
        self.container_id = container_id
        return self.enter(Phase.LAUNCHED, at)

    def feed_line(self, text: str, at: float) -> list[LaunchEvent]:
        """One line of the container's log (without docker's timestamp)."""
        self.read_to = max(self.read_to, at)
        events: list[LaunchEvent] = []
        if not self.spans or self.phase is Phase.LAUNCHED:
            events += self.enter(Phase.RUNNING, at)
        if is_access_log(text):   # one per HTTP request: it would crowd the failure context out
            return events
        if self.last_line is None or at >= self.last_line[0]:
            self.last_line = (at, text[:1000])   # the engine's own last word (HTTP access lines are not)
        self._seq += 1
        self.lines.append((self._seq, text))
        if not self._shutting_down(at):
            events += self._failures(text, at)
        elif self._stop_inferred and (rule := match_failure(text)) is not None and rule.exits_clean:
            events += self._log_failure(rule, text, at)   # its exit 0 was no stop: the engine core died
        if self._stop_inferred and events:
            events = self._with_exit(events)
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
        if self.failure is not None and self.failure.source not in ("log", "container", "stuck"):
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
        if state.start_failed and self.failure is None:
            # docker created it but could not start it: it never ran, holds the name (`created`)
            self.failure = Failure(self.rank, "container created, never started",
                                   "fix the cause docker names; `r37-cockpit launch --replace-stopped` "
                                   "clears a container this cockpit created (after archiving its log) and "
                                   "launches",
                                   f"container {state.name} {state.exit_reason()}", self._context(self._seq),
                                   state.created_at or at, "container", 0, state.exit_reason())
            return [RankFailed(self.failure)]
        if state.running or state.exited:
            events += self.enter(Phase.RUNNING, state.started_at or at)
        if state.exited and not self.stopped and self._was_stopped(state):
            self.stopped = True
            if self.failure is not None and (self.failure.secondary or self._shutting_down(self.failure.at)):
                self.failure, self._best_rule = None, None
            self.stop_detail = stopped_detail(state, self.stop_began)
            return [*events, RankStopped(self.rank, self.stop_detail, state.finished_at or at)]
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

    def _with_exit(self, events: list[LaunchEvent]) -> list[LaunchEvent]:
        """A failure read from the log of a container already seen exited: with the exit as its reason."""
        f, c = self.failure, self.container
        if f is None or f.exit_reason or c is None or not c.exited:
            return events
        self.failure = replace(f, exit_reason=c.exit_reason())
        return [RankFailed(self.failure) if isinstance(e, RankFailed) and e.failure is f else e
                for e in events]

    def _was_stopped(self, state: ContainerState) -> bool:
        """Exited because it was stopped: after the cockpit asked it to stop (not OOM-killed), or with exit
        code 0 (vLLM exits 0 when it shuts down on SIGTERM/SIGINT, whoever sent it) unless its log shows a
        failure that ends in exit 0 (real vLLM 0.32 also exits 0 after its engine core died)."""
        if state.oom_killed:
            return False
        if self.stop_began is not None:
            return state.finished_at is None or state.finished_at >= self.stop_began - STOP_SKEW
        if state.exit_code == 0:
            if self.failure is not None and self._best_rule is not None and self._best_rule.exits_clean:
                return False     # its engine core died first: the API server's exit 0 is no stop
            self.stop_began = (state.finished_at or time.time()) - CLEAN_EXIT_WINDOW
            self._stop_inferred = True
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
        """A rank in one phase past its limit turns red: only on evidence. Not while its host is lost, its
        container or log is not read yet or unknown, nor when the log read does not reach its boot (a tail
        of a long-lived container); withdrawn when the rank moves on (`enter`)."""
        if (self.failed or not self.spans or self.host_lost_since is not None or self.ready
                or self.stop_began is not None or self.stopped or self.pending or self.unknown
                or not self.phase_known or (self.container is not None and not self.container.running)):
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
