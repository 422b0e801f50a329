"""The stats model as plain JSON: what `r37-cockpit stats --json` prints, one object per sample.

Unknown values are null, never 0: a rank that has not sent a GPU line has `gpu` fields all null, a port
whose rate needs a second round has `tx_gbps` null. Strings are the parsers' (bounded) text as read;
JSON escapes control characters by itself.
"""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

from cockpit.telemetry.cluster_stats import (
    Alert,
    ClusterStats,
    MemoryStats,
    RankStats,
    stale_after,
)
from cockpit.telemetry.engine_stats import EngineStatsReading
from cockpit.telemetry.gpu import GpuReading
from cockpit.telemetry.gpu_events import reasons_of
from cockpit.telemetry.rdma import PortStats

GPU_FIELDS = ("util", "sm_mhz", "max_sm_mhz", "power_w", "temp_c", "pstate", "name", "timestamp")
MEMORY_FIELDS = ("kind", "total_bytes", "available_bytes", "engine_bytes", "gpu_total_mib", "gpu_used_mib")


def gpu_dict(g: GpuReading | None) -> dict[str, Any]:
    if g is None:
        return dict.fromkeys(GPU_FIELDS)
    return {"util": g.util, "sm_mhz": g.sm, "max_sm_mhz": g.max_sm, "power_w": g.power_w, "temp_c": g.temp_c,
            "pstate": g.pstate, "name": g.name, "timestamp": g.timestamp}


def memory_dict(m: MemoryStats | None) -> dict[str, Any]:
    if m is None:
        return dict.fromkeys(MEMORY_FIELDS)
    return {name: getattr(m, name) for name in MEMORY_FIELDS}


def port_dict(p: PortStats) -> dict[str, Any]:
    return {"hca": p.hca, "port": p.port, "state": p.state, "active": p.active, "tx_gbps": p.tx_gbps,
            "rx_gbps": p.rx_gbps, "changes": dict(p.changes)}


def clock_events_dict(s: RankStats, now: float) -> dict[str, Any]:
    """The clock event reasons of the newest GPU reading: `mask` null and `active` null when not reported
    (GB10 `[N/A]`, or no reading), never an empty list for "unknown"."""
    mask = s.gpu.event_reasons if s.gpu is not None else None
    names = reasons_of(mask)
    return {"mask": None if mask is None else f"{mask:#018x}",
            "active": None if names is None else list(names),
            "active_for_s": {name: max(0.0, now - since) for name, since in s.reasons_since.items()}}


def xid_dict(s: RankStats, now: float) -> dict[str, Any]:
    """Can the kernel log be read (`readable` null: not known yet, false: with `reason`), the newest Xid
    lines read (age by the host's clock) and how many of each Xid were read."""
    return {"source": s.klog.source, "readable": s.klog.readable, "reason": s.klog.reason or None,
            "recent": [{"xid": x.xid, "name": x.name, "pci": x.pci, "at": x.at, "age_s": s.xid_age(x, now),
                        "critical": x.critical, "detail": x.detail, "remedy": x.remedy} for x in s.xids],
            "total": {str(k): v for k, v in sorted(s.xid_total.items())}}


def rank_dict(s: RankStats, interval_s: float, now: float, host: str | None) -> dict[str, Any]:
    return {
        "rank": s.rank, "host": host, "sampler": s.sampler, "error": s.error,
        "stale": s.stale(interval_s, now), "age_s": s.age(now),
        "gpu": gpu_dict(s.gpu),
        "clock_events": clock_events_dict(s, now),
        "xid": xid_dict(s, now),
        "processes": [{"pid": a.pid, "name": a.name, "used_mib": a.used_mib} for a in s.apps],
        "memory": memory_dict(s.memory),
        "ports": [port_dict(p) for p in s.ports],
    }


def engine_dict(e: EngineStatsReading | None, interval_s: float, now: float) -> dict[str, Any] | None:
    """Every EngineStatsReading field, and `stale` (its newest read is as old as a stale rank's); None:
    never read."""
    if e is None:
        return None
    data = asdict(e)
    data["stale"] = now - e.at > stale_after(interval_s)
    return data


def alert_dict(a: Alert) -> dict[str, Any]:
    return {"kind": a.kind, "rank": a.rank, "since": a.since, "message": a.message, "remedy": a.remedy,
            "severity": a.severity}


def stats_dict(stats: ClusterStats, now: float, hosts: dict[int, str] | None = None) -> dict[str, Any]:
    """One sample of the whole model at `now` (time.time()); `hosts`: rank -> host name to show."""
    hosts = hosts or {}
    return {
        "cluster": stats.cluster, "at": now, "interval_s": stats.interval_s,
        "ranks": [rank_dict(s, stats.interval_s, now, hosts.get(r)) for r, s in sorted(stats.ranks.items())],
        "engine": engine_dict(stats.engine, stats.interval_s, now),
        "alerts": [alert_dict(a) for a in stats.alerts],
    }
