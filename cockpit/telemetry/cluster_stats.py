"""The live stats of the cluster: per rank GPU, memory and RDMA ports, rank 0's engine, history, alerts.

One `ClusterStats` per cockpit, written by the stats sampler (`telemetry.sampler`) and the engine's
/metrics feed, its alerts set by `recipe.alerts`; the Stats pane, the header, `stats` and the Prometheus
endpoint all render it. A rank whose newest reading is older than `STALE_ROUNDS` intervals is stale:
shown with its age, never as current.
"""

from __future__ import annotations

import time
from collections import deque
from dataclasses import dataclass, field, replace
from typing import Literal

from cockpit.telemetry.engine_stats import EngineStatsReading
from cockpit.telemetry.gpu import GpuReading
from cockpit.telemetry.gpu_events import KlogStatus, XidEvent
from cockpit.telemetry.host_sample import GpuApp
from cockpit.telemetry.rdma import PortStats

MIB = 1 << 20
STALE_ROUNDS = 3              # intervals without a reading before a rank's figures are stale ...
STALE_MIN_S = 3.0             # ... and never less than this many seconds
MAX_XIDS = 32                 # Xid lines kept per rank (their counts are kept apart, unbounded by this)
HISTORY_POINTS = 300          # points kept per series (5 minutes at 1 s)
RANK_SERIES = ("util", "sm_mhz", "power_w", "temp_c", "mem_available_gib", "tx_gbps", "rx_gbps")
ENGINE_SERIES = ("gen_tps", "prompt_tps", "kv_pct", "running", "waiting")
SamplerState = Literal["starting", "sampling", "host down", "failed"]


def stale_after(interval_s: float) -> float:
    """Seconds without a reading after which a rank's (or the engine's) figures are stale."""
    return max(STALE_MIN_S, STALE_ROUNDS * interval_s)


@dataclass(frozen=True)
class MemoryStats:
    """A rank's memory. `kind` "unified": one pool for CPU and GPU (GB10), read from /proc/meminfo, the
    engine's share from its compute process; "discrete": the GPU reports its own memory as well."""

    kind: Literal["unified", "discrete"] | None
    total_bytes: int | None
    available_bytes: int | None
    engine_bytes: int | None            # memory the GPU's compute processes hold
    gpu_total_mib: int | None = None    # discrete GPUs only
    gpu_used_mib: int | None = None


@dataclass(frozen=True)
class RankStats:
    """Everything sampled of one rank; `*_at` are this machine's clock (time.time()) at arrival."""

    rank: int
    sampler: SamplerState = "starting"
    error: str | None = None            # why the sampler is not sampling, or what nvidia-smi said
    gpu: GpuReading | None = None
    gpu_at: float | None = None
    apps: tuple[GpuApp, ...] = ()
    memory: MemoryStats | None = None
    ports: tuple[PortStats, ...] = ()
    round_at: float | None = None
    host_clock: float | None = None     # the host's own clock (epoch s) when the round of `round_at` began
    # clock event reason -> when (this machine's clock) it was first seen active without a break
    reasons_since: dict[str, float] = field(default_factory=dict)
    klog: KlogStatus = field(default_factory=KlogStatus)  # can the kernel log (Xid lines) be read
    xids: tuple[XidEvent, ...] = ()     # the newest distinct Xid lines read (at most MAX_XIDS), oldest first
    xid_total: dict[int, int] = field(default_factory=dict)  # distinct Xid lines read per Xid

    def host_now(self, now: float) -> float | None:
        """The host's clock at `now` (this machine's), from the newest round; None: no round yet."""
        if self.host_clock is None or self.round_at is None:
            return None
        return self.host_clock + (now - self.round_at)

    def xid_age(self, x: XidEvent, now: float) -> float | None:
        """Seconds since an Xid line by the host's clock; None: no stamp, or no host clock yet."""
        host = self.host_now(now)
        return None if host is None or x.at is None else max(0.0, host - x.at)

    @property
    def last_at(self) -> float | None:
        times = [t for t in (self.gpu_at, self.round_at) if t is not None]
        return max(times) if times else None

    def age(self, now: float | None = None) -> float | None:
        last = self.last_at
        return None if last is None else max(0.0, (time.time() if now is None else now) - last)

    def stale(self, interval_s: float, now: float | None = None) -> bool:
        """No reading yet, or none for STALE_ROUNDS intervals (at least STALE_MIN_S seconds)."""
        age = self.age(now)
        return age is None or age > stale_after(interval_s)


@dataclass(frozen=True)
class Alert:
    """One active alert: what, where (rank None: the cluster), since when, why and what to do."""

    kind: str
    rank: int | None
    since: float
    message: str
    remedy: str
    severity: Literal["warn", "fail"] = "fail"

    @property
    def key(self) -> tuple[str, int | None]:
        return (self.kind, self.rank)


@dataclass
class History:
    """The last HISTORY_POINTS values of a few series (None: not known at that point)."""

    points: int = HISTORY_POINTS
    times: deque[float] = field(default_factory=deque)
    series: dict[str, deque[float | None]] = field(default_factory=dict)

    def add(self, at: float, values: dict[str, float | None]) -> None:
        if self.times.maxlen != self.points:
            self.times = deque(self.times, maxlen=self.points)
        self.times.append(at)
        for name, value in values.items():
            line = self.series.get(name)
            if line is None:
                line = self.series[name] = deque([None] * (len(self.times) - 1), maxlen=self.points)
            line.append(value)
        for name, line in self.series.items():
            if name not in values:
                line.append(None)

    def values(self, name: str) -> list[float | None]:
        return list(self.series.get(name, ()))


class ClusterStats:
    """The one stats model; replace a rank with `put`, read with `ranks`/`engine`/`alerts`."""

    def __init__(self, ranks: list[int], interval_s: float, cluster: str = "") -> None:
        self.cluster = cluster
        self.interval_s = interval_s
        self.ranks: dict[int, RankStats] = {r: RankStats(r) for r in ranks}
        self.history: dict[int, History] = {r: History() for r in ranks}
        self.engine: EngineStatsReading | None = None
        self.engine_note = ""           # why there is no engine reading: the API's state, from the live model
        self.engine_history = History()
        self.alerts: tuple[Alert, ...] = ()
        self.version = 0                  # grows with every change (a renderer can skip an unchanged model)

    def put(self, stats: RankStats) -> None:
        self.ranks[stats.rank] = stats
        self.version += 1

    def update(self, rank: int, **changes: object) -> RankStats:
        new = replace(self.ranks[rank], **changes)  # type: ignore[arg-type]
        self.put(new)
        return new

    def record(self, rank: int, at: float) -> None:
        """One history point of `rank` from its current readings."""
        s = self.ranks[rank]
        g, m = s.gpu, s.memory
        tx = [p.tx_gbps for p in s.ports if p.tx_gbps is not None]
        rx = [p.rx_gbps for p in s.ports if p.rx_gbps is not None]
        fresh_gpu = g is not None and s.gpu_at is not None and at - s.gpu_at <= stale_after(self.interval_s)
        avail = m.available_bytes if m else None
        self.history[rank].add(at, {
            "util": g.util if fresh_gpu and g else None,
            "sm_mhz": g.sm if fresh_gpu and g else None,
            "power_w": g.power_w if fresh_gpu and g else None,
            "temp_c": g.temp_c if fresh_gpu and g else None,
            "mem_available_gib": None if avail is None else avail / (1 << 30),
            "tx_gbps": sum(tx) if tx else None,
            "rx_gbps": sum(rx) if rx else None,
        })
        self.version += 1

    def set_engine(self, reading: EngineStatsReading) -> None:
        self.engine = reading
        kv = reading.kv_cache_usage
        self.engine_history.add(reading.at, {
            "gen_tps": reading.generation_tokens_per_s, "prompt_tps": reading.prompt_tokens_per_s,
            "kv_pct": None if kv is None else kv * 100,
            "running": reading.running, "waiting": reading.waiting,
        })
        self.version += 1

    def engine_current(self, now: float) -> bool:
        """Rank 0's engine figures were read without error and are not stale."""
        e = self.engine
        return e is not None and e.error is None and now - e.at <= stale_after(self.interval_s)

    def set_alerts(self, alerts: tuple[Alert, ...]) -> None:
        if alerts != self.alerts:
            self.alerts = alerts
            self.version += 1
