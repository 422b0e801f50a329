"""The live model of the cluster, pure (no I/O): what every rank is doing and the verdict over them.

`ClusterTimeline` holds every rank's `RankTimeline` (one rank's state machine, `rank_timeline.py`), the
API status and the engine's liveness, and the cluster verdict: one rank down means the cluster is down;
a rank the cockpit stopped is stopped, never failed; the rank blamed is the one that failed first by its
host's own log clock. `settled` says when a launch is over. `cockpit.recipe.watch` keeps one up to date;
the header, every pane and `status` render it.

This module is the model's one import point: the typed events and the verdict (`timeline_events.py`)
and the per-rank model (`rank_timeline.py`) are exported here too (`__all__`).
"""

from __future__ import annotations

import time
from collections.abc import Iterable

from cockpit.api.liveness import GENERATION, PROMPT, RUNNING, EngineSample, HangTracker, Liveness
from cockpit.api.status import ApiStatus
from cockpit.recipe.phases import Phase
from cockpit.recipe.rank_timeline import CONTEXT_LINES, DEFAULT_STUCK_LIMITS, PhaseSpan, RankTimeline
from cockpit.recipe.timeline_events import (
    VERDICT_CODES,
    ApiChanged,
    ClusterVerdict,
    EngineChanged,
    Failure,
    HostChanged,
    LaunchEvent,
    Owner,
    PhaseEntered,
    ProgressChanged,
    RankCondition,
    RankFailed,
    RankLaunched,
    RankRecovered,
    RankStopped,
    RankUnknown,
    VerdictChanged,
    VerdictState,
    event_dict,
)

__all__ = [
    "CONTEXT_LINES", "DEFAULT_STUCK_LIMITS", "READ_SKEW", "SECONDARY_GRACE", "VERDICT_CODES",
    "ApiChanged", "ClusterTimeline", "ClusterVerdict", "EngineChanged", "Failure", "HostChanged",
    "LaunchEvent", "Owner", "PhaseEntered", "PhaseSpan", "ProgressChanged", "RankCondition", "RankFailed",
    "RankLaunched", "RankRecovered", "RankStopped", "RankTimeline", "RankUnknown", "VerdictChanged",
    "VerdictState",
    "event_dict", "settled",
]

READ_SKEW = 1.0              # seconds of clock difference allowed between two hosts' log clocks


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



class ClusterTimeline:
    """Every rank's timeline, the API and engine liveness, and the verdict over them: the live model of the
    cluster that the header, every pane and `status` render."""

    def __init__(self, ranks: Iterable[int], *, hang_after_s: float = 90.0):
        self.ranks: dict[int, RankTimeline] = {r: RankTimeline(r) for r in sorted(ranks)}
        self.api: ApiStatus | None = None
        self.liveness: Liveness | None = None
        self.metrics_flat_until: float | None = None   # wall time of /metrics still showing no progress
        self.hang_after_s = hang_after_s
        # whether a launch is running now (this cockpit's, or a live holder of the cluster lock); None: not
        # read yet. `launch_note` says whose, or why none is.
        self.launch_in_progress: bool | None = None
        self.launch_note = ""
        # a loop of the watcher that failed and is restarting (its name -> what): nothing it feeds is current
        self.watch_problems: dict[str, str] = {}
        self._verdict = ClusterVerdict("idle", "nothing launched")

    def __getitem__(self, rank: int) -> RankTimeline:
        return self.ranks[rank]

    @property
    def verdict(self) -> ClusterVerdict:
        return self._verdict

    def restore_verdict(self, verdict: ClusterVerdict) -> None:
        """Show a recorded verdict (`recipe.replay`): a replay's model is the recording's, not judged."""
        self._verdict = verdict

    def reset_rank(self, rank: int) -> RankTimeline:
        """A new container on that rank (a relaunch): its timeline starts again (the head's: the API's and
        the engine's too)."""
        self.ranks[rank] = RankTimeline(rank)
        if rank == min(self.ranks):
            self.api, self.liveness, self.metrics_flat_until = None, None, None
        return self.ranks[rank]

    def blame_pending(self, first_at: float) -> list[int]:
        """Ranks whose log may still hold a failure earlier than `first_at` (host clock): a container with a
        log not yet read up to then. A rank whose host is lost, whose log is read to its end, or that has
        no container has nothing more to tell."""
        out = []
        for r, t in self.ranks.items():
            if t.failure is not None and t.failure.at <= first_at:
                continue
            if t.host_lost_since is not None or t.unknown or (t.container is None and not t.spans):
                continue
            if t.read_to < first_at + READ_SKEW:        # its clock may be behind: read a little past
                out.append(r)
        return out

    def compute_verdict(self) -> ClusterVerdict:
        """The cluster's state from its ranks, the API and the engine's liveness (pure; see `settle`).

        What is not read yet is unknown, never a pass or a failure; the rank blamed for a failure is
        named only once every other rank's log has been read up to that moment (by its host's clock)."""
        ts = self.ranks
        failed = sorted((t.failure.secondary, t.failure.at, r) for r, t in ts.items()
                        if t.failure is not None)
        absent = [r for r, t in ts.items() if t.condition == "none"]
        if failed and absent and self.launch_in_progress is False and all(
                ts[r].failure.source == "stuck" for _, _, r in failed):   # type: ignore[union-attr]
            stuck = _ranks(r for _, _, r in failed)
            return ClusterVerdict("incomplete", f"launch incomplete: rank {_ranks(absent)} has no container "
                                                f"and no launch is running, so rank {stuck} waits in vain"
                                                + (f" ({self.launch_note})" if self.launch_note else ""),
                                  None, "stop what runs (`r37-cockpit stop`), then launch again "
                                        "(`r37-cockpit launch --replace-stopped`)")
        if failed:
            first = failed[0][2]
            f = ts[first].failure
            assert f is not None
            remedy = ("read its cause and the lines before it; stop every rank, head first "
                      "(`r37-cockpit stop`), fix the cause, then relaunch "
                      "(`r37-cockpit launch --replace-stopped`)")
            waiting = self.blame_pending(f.at)
            if waiting:
                names = _ranks(r for _, _, r in failed)
                return ClusterVerdict("down", f"cluster DOWN: rank {names} failed ({f.label}); reading rank "
                                              f"{_ranks(waiting)}'s log up to then to name the rank that "
                                              "failed first", None, remedy)
            others = [r for _, _, r in failed[1:]]
            also = f"; followed by rank {', '.join(map(str, others))}" if others else ""
            return ClusterVerdict("down", f"cluster DOWN: rank {first} failed first: {f.label}{also} "
                                          "(one rank down means the cluster is down)", first, remedy)
        pending = [r for r, t in ts.items() if t.pending]
        unknown = [r for r, t in ts.items() if t.unknown]
        if self.watch_problems:
            return ClusterVerdict("unknown", "not watched now: " + "; ".join(self.watch_problems.values()),
                                  None, "it restarts by itself; if it keeps failing, report it with "
                                        "`r37-cockpit report`")
        if unknown:
            return ClusterVerdict("unknown", f"rank {_ranks(unknown)}: container state unknown "
                                             f"({ts[unknown[0]].unknown})", None,
                                  "wait for the host to answer: its container is looked up by name and "
                                  "recorded if this launch created it; `r37-cockpit hosts` shows the link")
        lost = [r for r, t in ts.items() if t.host_lost_since is not None]
        if lost:
            return ClusterVerdict("host-lost", f"rank {_ranks(lost)} host lost: the cluster is down if that "
                                               "rank is; following resumes when it returns", None,
                                  "check the host's link and power (`r37-cockpit hosts`)")
        if pending:
            return ClusterVerdict("unknown", f"reading the cluster: rank {_ranks(pending)} "
                                             f"({ts[pending[0]].pending})", None,
                                  "wait a moment: nothing is judged before it is read")
        conds = {r: t.condition for r, t in ts.items()}
        stopped = [r for r, c in conds.items() if c == "stopped"]
        stopping = [r for r, c in conds.items() if c == "stopping"]
        running = [r for r, c in conds.items() if c in ("booting", "ready")]
        launching = self.launch_in_progress is True
        if stopping:
            return ClusterVerdict("stopping", f"stopping: rank {_ranks(stopping)} shutting down", None, "")
        if ts and ts[min(ts)].ready and not stopped:
            live = self.engine_liveness()
            if live is not None and live.state == "hung":
                return ClusterVerdict("hung", f"engine HUNG: {live.message}", None, live.remedy)
            if live is not None and live.undecided:   # READY would be a pass on absent evidence
                return ClusterVerdict("unknown", f"API ready, engine progress unknown: {live.message}", None,
                                      live.remedy)
            return ClusterVerdict("ready", "cluster READY: API answers /health and lists the model")
        if launching and running:
            return ClusterVerdict("launching", f"launching: {len(running)}/{len(ts)} ranks started"
                                               + (f" ({self.launch_note})" if self.launch_note else ""))
        if stopped and running:
            return ClusterVerdict("down", f"cluster DOWN: rank {_ranks(stopped)} stopped while rank "
                                          f"{_ranks(running)} still run", None,
                                  "stop the rest (`r37-cockpit stop`), then relaunch "
                                  "(`r37-cockpit launch --replace-stopped`)")
        if stopped:
            return ClusterVerdict("stopped", f"cluster STOPPED: rank {_ranks(stopped)} stopped", None,
                                  "relaunch with `r37-cockpit launch --replace-stopped` (archives each "
                                  "rank's log, then removes its stopped container)")
        if running and absent:
            if self.launch_in_progress is None:
                return ClusterVerdict("unknown", f"rank {_ranks(running)} booting, rank {_ranks(absent)} "
                                                 "without a container: reading the launch lock", None,
                                      "wait a moment: whether a launch is running is not read yet")
            return ClusterVerdict("incomplete", f"launch incomplete: rank {_ranks(running)} has a container, "
                                                f"rank {_ranks(absent)} none, and no launch is running"
                                                + (f" ({self.launch_note})" if self.launch_note else ""),
                                  None, "stop what runs (`r37-cockpit stop`), then launch again "
                                        "(`r37-cockpit launch --replace-stopped`)")
        if running:
            return ClusterVerdict("launching", f"launching: {len(running)}/{len(ts)} ranks started")
        return ClusterVerdict("idle", "nothing launched")

    def settle(self, events: list[LaunchEvent]) -> list[LaunchEvent]:
        """Promote workers that reach 'waiting for head' (or whose boot is not in the log read) once the
        head is ready; then append a VerdictChanged when the verdict changed."""
        events = list(events)
        head = self.ranks[min(self.ranks)]
        if head.ready:
            for r, t in self.ranks.items():
                if r != head.rank and t.condition == "booting" and (
                        t.phase is Phase.WAIT_HEAD or not t.phase_known):
                    events += t.enter(Phase.READY, max(t.spans[-1].start, head.spans[-1].start))
        new = self.compute_verdict()
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
        """Hung if either the /metrics series or the head's log says so; else the /metrics judgement. None
        when the head's engine does not run (exited, failed, stopped): nothing of it is live."""
        head = self.ranks[min(self.ranks)]
        if head.failed or head.stopped or (head.container is not None and not head.container.running):
            return None
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
    if timeline.verdict.first_failed is None and any(t.failure for t in timeline.ranks.values()):
        return False          # the rank to blame is not named yet: another rank's log is still being read
    failures = [t.failure for t in timeline.ranks.values() if t.failure is not None]
    if any(not f.secondary for f in failures):
        return True
    return (time.time() if now is None else now) - min(f.at for f in failures) >= SECONDARY_GRACE
