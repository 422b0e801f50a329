"""What `status` says of a cluster: one look of a watcher (containers, phases from the log tail, API
readiness; with `watch_engine`, the engine's liveness over that time), as a `StatusReport` the CLI, the
report and the bench gate render. Changes nothing. When the engine is hung, every rank's GPU and RDMA
are sampled to name the rank that differs (`stuck_evidence`; the stats monitor is imported only then).
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from cockpit.api.status import ApiStatus
from cockpit.config import ClusterConfig
from cockpit.hosts import Fleet
from cockpit.recipe.containers import ContainerState
from cockpit.recipe.ledger import Ledger
from cockpit.recipe.phases import Phase
from cockpit.recipe.stuck import StuckReport, read_stacks, stuck_report
from cockpit.recipe.timeline import ClusterTimeline, ClusterVerdict, Failure, Owner
from cockpit.recipe.watch import NO_ENGINE, ClusterWatcher

if TYPE_CHECKING:
    from cockpit.recipe.recording import Recording


@dataclass(frozen=True, slots=True)
class RankStatus:
    rank: int
    target: str
    host: str
    container: ContainerState | None
    owner: Owner
    phase: Phase
    progress: tuple[int, int] | None
    failure: Failure | None
    condition: str = "none"
    phase_text: str = ""              # the phase as shown: "exited in …", or unknown when the log has none
    detail: str = ""                  # why it is unknown (docker not answering, not read yet), if it is;
                                      # how it stopped, if it did ("stopped (killed after 10 s: …)")

    def to_dict(self) -> dict[str, Any]:
        return {"rank": self.rank, "target": self.target, "host": self.host,
                "container": self.container.to_dict() if self.container else None, "owner": self.owner,
                "condition": self.condition, "phase": self.phase.value, "phase_text": self.phase_text,
                "detail": self.detail,
                "progress": list(self.progress) if self.progress else None,
                "failure": self.failure.to_dict() if self.failure else None}


@dataclass(frozen=True, slots=True)
class StatusReport:
    ranks: list[RankStatus]
    api: ApiStatus
    verdict: ClusterVerdict
    engine: str = "unknown"            # the engine's liveness: unknown | idle | serving | hung
    stuck: StuckReport | None = None   # when hung: which rank differs, on what evidence (recipe/stuck.py)

    @property
    def ok(self) -> bool:
        """Nothing wrong: ready (and not hung), stopped, launching or nothing launched."""
        return self.verdict.state in ("ready", "stopped", "stopping", "launching", "idle")

    def to_dict(self) -> dict[str, Any]:
        return {"ranks": [r.to_dict() for r in self.ranks], "api": self.api.to_dict(),
                "engine": self.engine, "verdict": self.verdict.to_dict(),
                "stuck": self.stuck.to_dict() if self.stuck is not None else None}


def status_report(fleet: Fleet, cfg: ClusterConfig, timeline: ClusterTimeline,
                  stuck: StuckReport | None = None) -> StatusReport:
    """The model as a report: what `status`, `--json` and the panes show."""
    ranks = []
    for rank in cfg.ranks:
        tl = timeline[rank]
        owner: Owner = tl.owner if tl.container is not None else (
            "unknown" if tl.condition == "unknown" or not fleet[rank].status.connected else "none")
        ranks.append(RankStatus(rank, fleet[rank].target, fleet[rank].status.state.value, tl.container, owner,
                                tl.phase, tl.progress, tl.failure, tl.condition, tl.phase_text,
                                tl.unknown or tl.pending or (tl.stop_detail if tl.stopped else "")))
    live = timeline.engine_liveness()
    return StatusReport(ranks, timeline.api or NO_ENGINE, timeline.compute_verdict(),
                        live.state if live is not None else "unknown", stuck)


ENGINE_DECIDE_S = 30.0       # at most this long `status` watches a busy engine not seen to move


async def cluster_status(fleet: Fleet, cfg: ClusterConfig, ledger: Ledger | None = None,
                         api_url: str | None = None, *, timeout: float = 30.0,
                         watch_engine: float = 0.0, recording: Recording | None = None,
                         stacks: bool = False) -> StatusReport:
    """One look of a watcher: container, phase (from the log tail), API readiness of every rank and, with
    `watch_engine` seconds, the engine's liveness over that time; changes nothing. `recording` records
    what the watcher sees. When the engine is hung, every rank's GPU and RDMA are sampled (two rounds) to
    name the rank that differs (`StuckReport`); with `stacks`, the engine's Python stacks are read too
    (`py-spy dump` in each container)."""
    async with ClusterWatcher(fleet, cfg, ledger=ledger, api_url=api_url) as watcher:
        if recording is not None:
            recording.attach_watcher(watcher)
        await watcher.first_look(timeout)
        await watcher.probe()
        if watcher.suspect_hang():         # the last stats line is flat: does /metrics still say so now?
            await asyncio.sleep(1.5)
            await watcher.probe()
        watcher.tick()
        # requests in the engine and no growth seen yet: look again until the counters move (serving) or
        # stay flat for the hang limit (hung), within ENGINE_DECIDE_S; still undecided then: said unknown
        decide = time.monotonic() + min(cfg.engine.hang_after_s + 2.0, ENGINE_DECIDE_S)
        while time.monotonic() < decide and _undecided(watcher.timeline):
            await asyncio.sleep(1.0)
            await watcher.probe()
            watcher.tick()
        end = time.monotonic() + watch_engine
        while time.monotonic() < end and watcher.timeline.liveness is not None:
            await asyncio.sleep(min(1.0, max(0.0, end - time.monotonic())))
            await watcher.probe()
        stuck = None
        if watcher.timeline.compute_verdict().state == "hung":
            stuck = await stuck_evidence(fleet, cfg, watcher.timeline, stacks=stacks)
        return status_report(fleet, cfg, watcher.timeline, stuck)


def _undecided(timeline: ClusterTimeline) -> bool:
    live = timeline.engine_liveness()
    return live is not None and live.undecided


STUCK_SAMPLE_S = 15.0        # seconds `status` waits for two sampler rounds of every rank when hung


async def stuck_evidence(fleet: Fleet, cfg: ClusterConfig, timeline: ClusterTimeline, *, stacks: bool = False,
                         timeout: float = STUCK_SAMPLE_S) -> StuckReport | None:
    """A one-off look at every rank's GPU and RDMA (the stats sampler, two rounds, at most `timeout`
    seconds: what was not read stays unknown) and, with `stacks`, the engine's Python stacks; judged."""
    from cockpit.recipe.monitor import StatsMonitor  # the sampler and alert judge: only for a hung engine

    monitor = StatsMonitor(fleet, cfg, None)
    async with monitor:
        _, found = await asyncio.gather(
            monitor.first_sample(timeout),
            read_stacks(fleet, cfg, timeline) if stacks else asyncio.sleep(0, result=None))
    return stuck_report(timeline, monitor.stats, found)
