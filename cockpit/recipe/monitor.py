"""The stats of a running cockpit: the sampler, rank 0's /metrics and the alerts, in one `ClusterStats`.

`StatsMonitor` starts the per-host sampler channels, takes rank 0's /metrics from the cluster watcher's
own liveness read (one fetch for both), and judges the alerts every interval.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable

from cockpit.config import ClusterConfig
from cockpit.hosts import Fleet
from cockpit.recipe.alerts import AlertBook, findings
from cockpit.recipe.supervise import supervised
from cockpit.recipe.watch import ClusterWatcher
from cockpit.telemetry.cluster_stats import ClusterStats
from cockpit.telemetry.engine_stats import EngineStats
from cockpit.telemetry.sampler import StatsSampler

ENGINE_WINDOW_S = 60.0        # TTFT/ITL percentiles over the last minute


class StatsMonitor:
    """Sample and judge until closed; `stats` is always current, `changed` is set on every change."""

    def __init__(self, fleet: Fleet, cfg: ClusterConfig, watcher: ClusterWatcher | None,
                 interval_s: float | None = None) -> None:
        self.cfg = cfg
        self.fleet = fleet
        self.watcher = watcher
        self.interval_s = interval_s or cfg.stats.interval_s
        self.stats = ClusterStats(cfg.ranks, self.interval_s, cfg.cluster.name)
        self.sampler = StatsSampler(fleet, cfg, self.stats, on_round=self._round)
        self.engine = EngineStats(max_samples=max(2, int(ENGINE_WINDOW_S / self.interval_s) + 2),
                                  window_s=ENGINE_WINDOW_S)
        self.book = AlertBook()
        self.changed = asyncio.Event()
        self._listeners: list[Callable[[], None]] = []
        self._task: asyncio.Task[None] | None = None

    def subscribe(self, listener: Callable[[], None]) -> None:
        """Called after every judgement (once per interval)."""
        self._listeners.append(listener)

    def start(self) -> None:
        if self._task is not None:
            return
        self.sampler.start()
        if self.watcher is not None:
            self.watcher.subscribe_metrics(self._metrics, self.interval_s)
        self._task = asyncio.create_task(supervised("the alert judge", self._judge_loop, self._judge_down),
                                         name="stats-judge")

    async def close(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._task
            self._task = None
        await self.sampler.close()

    async def __aenter__(self) -> StatsMonitor:
        self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    def _metrics(self, text: str, at: float) -> None:
        self.stats.set_engine(self.engine.feed_text(text, at))

    def _round(self, rank: int) -> None:
        self.changed.set()

    def judge(self, now: float | None = None) -> None:
        now = time.time() if now is None else now
        timeline = self.watcher.timeline if self.watcher is not None else None
        api = timeline.api if timeline is not None else None
        self.stats.engine_note = ("the API was not read yet" if api is None
                                  else "" if api.ready else f"API: {api.message}")
        found = findings(self.stats, self.cfg.stats, timeline, self.fleet.statuses, now)
        self.stats.set_alerts(self.book.update(found, now, self.interval_s))
        for listener in list(self._listeners):
            listener()
        self.changed.set()

    def _judge_down(self, what: str, delay: float) -> None:
        self.stats.engine_note = f"the alert judge failed: {what}; restarting in {delay:g} s"
        self.changed.set()

    async def _judge_loop(self) -> None:
        while True:
            await asyncio.sleep(self.interval_s)
            self.judge()

    def sampled(self) -> bool:
        """Every connected rank has sent one full round and one GPU line (or said why not)."""
        for rank, s in self.stats.ranks.items():
            if not self.fleet[rank].status.connected:
                continue
            if s.round_at is None or (s.gpu_at is None and not s.error):
                return False
        return True

    async def first_sample(self, timeout: float) -> bool:
        """Wait until `sampled()` and one round after it, so rates have two points (False: timed out)."""
        deadline = time.monotonic() + timeout
        rounds_needed = {r: 2 for r in self.stats.ranks}
        seen: dict[int, float | None] = {r: None for r in self.stats.ranks}
        while time.monotonic() < deadline:
            for rank, s in self.stats.ranks.items():
                if s.round_at is not None and s.round_at != seen[rank]:
                    seen[rank] = s.round_at
                    rounds_needed[rank] -= 1
            connected = [r for r in self.stats.ranks if self.fleet[r].status.connected]
            if connected and self.sampled() and all(rounds_needed[r] <= 0 for r in connected):
                return True
            self.changed.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.changed.wait(), 0.25)
        return False
