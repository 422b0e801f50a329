"""The Stats alerts: one set of rules over the stats model and the live cluster model.

`findings` says what is wrong now; `AlertBook` turns findings into `Alert`s that carry when each began,
and holds the ones that come from a single change (RDMA errors, preemptions) for HOLD_ROUNDS intervals, so
an error that happened is seen and does not blink. A rank whose readings are stale is not judged on them
(unknown is never pass, nor fail): it gets a `no-readings` alert instead while its host is connected.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Literal

from cockpit.config import StatsSection
from cockpit.hosts.state import HostStatus
from cockpit.recipe.checks_host import CLOCK_REMEDY
from cockpit.recipe.timeline import ClusterTimeline
from cockpit.telemetry.cluster_stats import Alert, ClusterStats
from cockpit.telemetry.gpu import GpuReading, clock_verdicts
from cockpit.telemetry.gpu_events import BAD_REASONS, REASON_REMEDY, THERMAL, reason_label

GIB = 1 << 30
HOLD_ROUNDS = 10              # a one-off change (a counter that grew) stays listed this many intervals ...
HOLD_MIN_S = 5.0              # ... and at least this long
HELD_KINDS = frozenset({"rdma-errors", "preemptions"})


@dataclass(frozen=True)
class Finding:
    kind: str
    rank: int | None
    message: str
    remedy: str
    severity: Literal["warn", "fail"] = "fail"


def _gpu_findings(stats: ClusterStats, fresh: dict[int, GpuReading]) -> list[Finding]:
    out = []
    for rank, verdict in clock_verdicts(fresh).items():
        if verdict.state == "latched":
            out.append(Finding("clock-latched", rank, f"SM clock latched: {verdict.why}", CLOCK_REMEDY))
    for rank, s in stats.ranks.items():
        if s.error and s.error.startswith("nvidia-smi") and s.sampler == "sampling":
            out.append(Finding("gpu-unreadable", rank, s.error,
                               "nvidia-smi cannot read the GPU on this host: check the driver "
                               "(`nvidia-smi` on the host); the sampler tries again every few seconds"))
    return out


def _throttle_findings(stats: ClusterStats, cfg: StatsSection, fresh: Iterable[int],
                       now: float) -> list[Finding]:
    """A throttling reason (thermal, power brake, HW slowdown) active for `throttle_hold_s` or longer."""
    out = []
    for rank in fresh:
        held = {name: since for name, since in stats.ranks[rank].reasons_since.items()
                if name in BAD_REASONS and now - since >= cfg.throttle_hold_s}
        if not held:
            continue

        def what(names: Iterable[str], _held: dict[str, float] = held) -> str:
            return ", ".join(f"{reason_label(n)} for {now - _held[n]:.0f} s" for n in names)

        thermal = [n for n in THERMAL if n in held]
        if thermal:
            out.append(Finding("gpu-thermal", rank, f"clocks slowed: {what(thermal)}",
                               REASON_REMEDY["thermal"], "fail" if "hw_thermal_slowdown" in held else "warn"))
        if "hw_power_brake_slowdown" in held:
            out.append(Finding("gpu-power-brake", rank, f"clocks slowed: {what(['hw_power_brake_slowdown'])}",
                               REASON_REMEDY["hw_power_brake_slowdown"]))
        if "hw_slowdown" in held and not thermal and "hw_power_brake_slowdown" not in held:
            out.append(Finding("gpu-hw-slowdown", rank, f"clocks slowed: {what(['hw_slowdown'])}",
                               REASON_REMEDY["hw_slowdown"]))
    return out


def _xid_findings(stats: ClusterStats, cfg: StatsSection, now: float) -> list[Finding]:
    """An NVRM Xid line younger than `xid_alert_s` by the host's clock: one alert per rank, the newest
    critical Xid first (a critical one makes it a failure)."""
    out = []
    for rank, s in stats.ranks.items():
        recent = [x for x in s.xids if (age := s.xid_age(x, now)) is not None and age <= cfg.xid_alert_s]
        if not recent:
            continue
        worst = max(recent, key=lambda x: (x.critical, x.at or 0.0))
        age = s.xid_age(worst, now) or 0.0
        others = sorted({x.xid for x in recent} - {worst.xid})
        more = f" (also Xid {', '.join(map(str, others))})" if others else ""
        detail = f": {worst.detail[:120]}" if worst.detail else ""
        out.append(Finding("gpu-xid", rank, f"Xid {worst.xid} {worst.name} on {worst.pci}, {age:.0f} s ago"
                                            f"{more}{detail}",
                           f"Xid {worst.xid}: {worst.remedy}", "fail" if worst.critical else "warn"))
    return out


def _memory_findings(stats: ClusterStats, cfg: StatsSection, fresh: Iterable[int]) -> list[Finding]:
    out = []
    for rank in fresh:
        m = stats.ranks[rank].memory
        if m is None or m.available_bytes is None:
            continue
        if m.available_bytes < cfg.min_available_gib * GIB:
            out.append(Finding(
                "memory-low", rank,
                f"MemAvailable {m.available_bytes / GIB:.1f} GiB, below the "
                f"{cfg.min_available_gib:g} GiB guard",
                "find what else holds memory on the host (`ps aux --sort=-rss | head`); the engine may be "
                "OOM-killed; lower --gpu-memory-utilization before the next launch"))
    return out


def _port_findings(stats: ClusterStats, fresh: Iterable[int]) -> list[Finding]:
    out = []
    for rank in fresh:
        for p in stats.ranks[rank].ports:
            where = f"{p.hca}/{p.port}"
            if p.active is False:
                out.append(Finding("rdma-port-down", rank, f"{where} is {p.state_word}, not ACTIVE",
                                   f"check the cable and switch port of {where} (`rdma link show`, "
                                   "`ibv_devinfo`); the cockpit never changes networking"))
            if p.errors:
                grew = ", ".join(f"{k} +{v}" for k, v in p.errors.items())
                out.append(Finding("rdma-errors", rank, f"{where}: {grew}",
                                   f"RDMA errors or retransmits on {where} slow every rank: check the link "
                                   "(`rdma statistic show`, cable, switch port, PFC/ECN settings)"))
    return out


def _engine_findings(stats: ClusterStats, cfg: StatsSection, timeline: ClusterTimeline | None,
                     now: float) -> list[Finding]:
    out = []
    head = min(stats.ranks)
    e = stats.engine
    if e is not None and stats.engine_current(now):
        if e.kv_cache_usage is not None and e.kv_cache_usage * 100 > cfg.kv_cache_alert_pct:
            out.append(Finding("kv-cache-full", head,
                               f"KV cache {e.kv_cache_usage * 100:.1f} % full (alert above "
                               f"{cfg.kv_cache_alert_pct:g} %)",
                               "new requests wait or preempt others: lower the client concurrency",
                               "warn"))
        if e.preemptions:
            out.append(Finding("preemptions", head,
                               f"{e.preemptions:.0f} preemption(s) since the last sample",
                               "the KV cache ran out and requests are being recomputed: lower the client "
                               "concurrency or --max-num-seqs", "warn"))
    if timeline is None:
        return out
    live = timeline.engine_liveness()
    if live is not None and live.state == "hung":
        out.append(Finding("engine-hung", head, live.message, live.remedy))
    running = [r for r, tl in timeline.ranks.items() if tl.container is not None and tl.container.running]
    if running:
        for rank, tl in timeline.ranks.items():
            c = tl.container
            if c is None or c.running or tl.stop_began is not None or tl.stopped or tl.host_lost_since:
                continue
            out.append(Finding("container-down", rank,
                               f"container {c.name} is {c.status} ({c.exit_reason()}) while rank(s) "
                               f"{', '.join(map(str, running))} still run",
                               f"the engine cannot serve with a rank missing: read its log (pane 5, "
                               f"`r37-cockpit logs --rank {rank}`), then stop the cluster and relaunch"))
    return out


def findings(stats: ClusterStats, cfg: StatsSection, timeline: ClusterTimeline | None,
             statuses: Iterable[HostStatus], now: float) -> list[Finding]:
    """Everything wrong now, by the rules of the module doc."""
    connected = {s.rank for s in statuses if s.connected}
    fresh = [r for r, s in stats.ranks.items() if not s.stale(stats.interval_s, now)]
    out: list[Finding] = []
    for rank, s in stats.ranks.items():
        if rank in connected and rank not in fresh and s.last_at is not None:
            out.append(Finding("no-readings", rank, f"no readings for {s.age(now):.0f} s"
                               + (f": {s.error}" if s.error else ""),
                               "the host is connected but its sampler is silent: see pane 1 (Hosts)", "warn"))
    gpus = {r: g for r in fresh if (g := stats.ranks[r].gpu) is not None}
    out += _gpu_findings(stats, gpus)
    out += _throttle_findings(stats, cfg, fresh, now)
    out += _xid_findings(stats, cfg, now)
    out += _memory_findings(stats, cfg, fresh)
    out += _port_findings(stats, fresh)
    out += _engine_findings(stats, cfg, timeline, now)
    return out


class AlertBook:
    """Active alerts with the time each began (see the module doc for the hold)."""

    def __init__(self) -> None:
        self._active: dict[tuple[str, int | None], Alert] = {}
        self._seen: dict[tuple[str, int | None], float] = {}

    def update(self, found: Iterable[Finding], now: float, interval_s: float) -> tuple[Alert, ...]:
        hold = max(HOLD_MIN_S, HOLD_ROUNDS * interval_s)
        keys = set()
        for f in found:
            key = (f.kind, f.rank)
            keys.add(key)
            old = self._active.get(key)
            since = old.since if old is not None else now
            self._active[key] = Alert(f.kind, f.rank, since, f.message, f.remedy, f.severity)
            self._seen[key] = now
        for key in list(self._active):
            if key in keys:
                continue
            if key[0] in HELD_KINDS and now - self._seen.get(key, 0.0) < hold:
                continue
            del self._active[key]
            self._seen.pop(key, None)
        order = sorted(self._active.values(), key=lambda a: (a.severity != "fail", a.since, a.rank or 0))
        return tuple(order)
