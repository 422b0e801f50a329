"""What the hardware and the engine did during one benchmark cell: GPU power, SM clock, RDMA rates per rank
(the stats sampler's history, :class:`cockpit.telemetry.cluster_stats.ClusterStats`, read only) and the
engine's KV cache usage (rank 0's ``/metrics``, read by the bench itself every ``interval_s`` while the
cell runs), with the energy per generated token where every rank's power is known.

A figure with no reading in the cell's window is None ("unknown"), never 0; energy per token is None unless
every rank had a power reading (a rank without one would make the sum too small).
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from statistics import fmean
from typing import TYPE_CHECKING, Any

from cockpit.telemetry.cluster_stats import stale_after

if TYPE_CHECKING:
    from cockpit.api.client import ApiClient
    from cockpit.telemetry.cluster_stats import ClusterStats

RANK_FIGURES = ("power_w", "sm_mhz", "tx_gbps", "rx_gbps")


def _r(x: float | None, nd: int = 2) -> float | None:
    return None if x is None else round(x, nd)


def _num(v: Any) -> float | None:
    return float(v) if isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v) else None


@dataclass(frozen=True, slots=True)
class RankTelemetry:
    """Means over the cell's window of one rank's readings (None: no reading in the window)."""

    rank: int
    samples: int
    power_w: float | None
    sm_mhz: float | None
    tx_gbps: float | None
    rx_gbps: float | None

    def to_dict(self) -> dict[str, Any]:
        return {"rank": self.rank, "samples": self.samples, "power_w": _r(self.power_w),
                "sm_mhz": _r(self.sm_mhz, 0), "tx_gbps": _r(self.tx_gbps, 3), "rx_gbps": _r(self.rx_gbps, 3)}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> RankTelemetry:
        rank = d.get("rank")
        samples = d.get("samples")
        return cls(rank if isinstance(rank, int) else -1, samples if isinstance(samples, int) else 0,
                   *(_num(d.get(k)) for k in RANK_FIGURES))


@dataclass(frozen=True, slots=True)
class CellTelemetry:
    """One cell's window: per rank readings, the engine's KV cache usage, energy per token."""

    started_at: float
    ended_at: float
    ranks: tuple[RankTelemetry, ...]
    kv_cache_pct_max: float | None
    kv_cache_pct_mean: float | None
    completion_tokens: int | None
    energy_j_per_token: float | None
    energy_unknown: str | None = None      # why there is no energy figure

    @property
    def wall_s(self) -> float:
        return max(self.ended_at - self.started_at, 0.0)

    @property
    def power_w(self) -> float | None:
        """The cluster's power in the window: the sum over ranks, when every rank's is known."""
        powers = [r.power_w for r in self.ranks]
        return sum(p for p in powers if p is not None) if powers and None not in powers else None

    def to_dict(self) -> dict[str, Any]:
        return {"started_at": round(self.started_at, 3), "ended_at": round(self.ended_at, 3),
                "ranks": [r.to_dict() for r in self.ranks],
                "power_w": _r(self.power_w),
                "kv_cache_pct_max": _r(self.kv_cache_pct_max),
                "kv_cache_pct_mean": _r(self.kv_cache_pct_mean),
                "completion_tokens": self.completion_tokens,
                "energy_j_per_token": _r(self.energy_j_per_token, 4),
                "energy_unknown": self.energy_unknown}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> CellTelemetry:
        ranks = d.get("ranks")
        tokens = d.get("completion_tokens")
        why = d.get("energy_unknown")
        return cls(_num(d.get("started_at")) or 0.0, _num(d.get("ended_at")) or 0.0,
                   tuple(RankTelemetry.from_dict(r) for r in ranks if isinstance(r, Mapping))
                   if isinstance(ranks, list) else (),
                   _num(d.get("kv_cache_pct_max")), _num(d.get("kv_cache_pct_mean")),
                   tokens if isinstance(tokens, int) else None, _num(d.get("energy_j_per_token")),
                   why if isinstance(why, str) else None)


def window_means(times: list[float], values: list[float | None], t0: float, t1: float,
                 before_s: float = 0.0) -> tuple[int, float | None]:
    """(points, the mean of the known values) in [t0, t1]; when none is known there (a cell shorter than
    the sampler's interval), those of the ``before_s`` seconds before t0 (readings still current)."""
    def mean_in(lo: float, hi: float) -> tuple[int, float | None]:
        inside = [v for t, v in zip(times, values, strict=False) if lo <= t <= hi]
        known = [v for v in inside if v is not None and math.isfinite(v)]
        return len(inside), (fmean(known) if known else None)

    points, mean = mean_in(t0, t1)
    if mean is None and before_s > 0:
        points, mean = mean_in(t0 - before_s, t0)
    return points, mean


def energy(ranks: tuple[RankTelemetry, ...], wall_s: float,
           tokens: int | None) -> tuple[float | None, str | None]:
    """Joules per generated token (Σ mean power × wall time / tokens), or None and why."""
    if not ranks:
        return None, "no rank was sampled"
    missing = [r.rank for r in ranks if r.power_w is None]
    if missing:
        return None, "no power reading from rank " + ", ".join(map(str, missing))
    if not tokens:
        return None, "no tokens generated"
    return sum(r.power_w or 0.0 for r in ranks) * wall_s / tokens, None


@dataclass
class TelemetrySource:
    """Reads a cell's window: the sampler's model (``stats``, optional) and rank 0's ``/metrics``
    through ``client`` (optional) every ``interval_s`` while the cell runs."""

    stats: ClusterStats | None = None
    client: ApiClient | None = None
    interval_s: float = 1.0
    _kv: list[float] = field(default_factory=list)
    _task: asyncio.Task[None] | None = None
    _t0: float = 0.0

    def begin(self) -> None:
        self._t0 = time.time()
        self._kv = []
        if self.client is not None:
            self._task = asyncio.create_task(self._poll(self.client), name="bench-kv")

    async def _poll(self, client: ApiClient) -> None:
        from cockpit.api.liveness import KV_USAGE
        from cockpit.telemetry.engine_stats import read_snapshot
        while True:
            with contextlib.suppress(Exception):      # a missed read is a missed point, never the run's end
                snap = await read_snapshot(client)
                kv = next((snap.values[n] for n in KV_USAGE if snap.values.get(n)), None)
                usage = max(kv.values()) if kv else None     # the fullest engine's, as the Stats pane
                if usage is not None and math.isfinite(usage):
                    self._kv.append(usage * 100)
            await asyncio.sleep(self.interval_s)

    async def end(self, tokens: int | None) -> CellTelemetry:
        t1 = time.time()
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._task
            self._task = None
        ranks: list[RankTelemetry] = []
        if self.stats is not None:
            # the sampler's rounds land every interval: a cell shorter than that gets the readings that
            # were still current when it started (younger than the stats model's stale age)
            current = stale_after(self.stats.interval_s)
            for rank, hist in sorted(self.stats.history.items()):
                times = list(hist.times)
                got = [window_means(times, hist.values(name), self._t0, t1, current) for name in RANK_FIGURES]
                ranks.append(RankTelemetry(rank, got[0][0], *(mean for _, mean in got)))
        joules, why = energy(tuple(ranks), t1 - self._t0, tokens)
        kv = self._kv
        return CellTelemetry(self._t0, t1, tuple(ranks), max(kv) if kv else None, fmean(kv) if kv else None,
                             tokens, joules, why)
