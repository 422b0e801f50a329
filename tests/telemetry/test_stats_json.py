"""The stats JSON: every field of the model per rank, null (never 0) for what is not known."""

from __future__ import annotations

import json

from cockpit.telemetry.cluster_stats import Alert, ClusterStats, MemoryStats
from cockpit.telemetry.engine_stats import EngineStatsReading
from cockpit.telemetry.gpu import GpuReading
from cockpit.telemetry.host_sample import GpuApp
from cockpit.telemetry.rdma import PortStats
from cockpit.telemetry.stats_json import GPU_FIELDS, MEMORY_FIELDS, stats_dict

NOW = 1_000_000.0


def model() -> ClusterStats:
    st = ClusterStats([0, 1], 1.0, "c1")
    st.update(0, sampler="sampling", gpu_at=NOW - 0.5, round_at=NOW - 0.2,
              gpu=GpuReading(util=87, sm=2400, max_sm=3003, power_w=61.5, temp_c=55, pstate="P0",
                             name="NVIDIA GB10", timestamp="2026/12/01 10:00:00.000", memory_asked=True),
              apps=(GpuApp(305, "python3", None), GpuApp(306, "vllm", 1024)),
              memory=MemoryStats("unified", 128 << 30, 20 << 30, None),
              ports=(PortStats("rocep1s0f0", 1, "4: ACTIVE", True, 12.5, None, {"np_cnp_sent": 3}),))
    st.set_engine(EngineStatsReading(at=NOW - 1, running=2, kv_cache_usage=0.5,
                                     request_success={"stop": 1.0}))
    st.set_alerts((Alert("memory-low", 0, NOW - 10, "MemAvailable 3.0 GiB", "free memory"),
                   Alert("engine-hung", None, NOW - 2, "no progress", "look", "warn")))
    return st


def test_every_field_per_rank_and_the_values() -> None:
    data = stats_dict(model(), NOW, {0: "spark-0", 1: "spark-1"})
    assert (data["cluster"], data["at"], data["interval_s"]) == ("c1", NOW, 1.0)
    assert [r["rank"] for r in data["ranks"]] == [0, 1]
    r0 = data["ranks"][0]
    assert set(r0) == {"rank", "host", "sampler", "error", "stale", "age_s", "gpu", "processes", "memory",
                       "ports", "clock_events", "xid"}
    assert (r0["host"], r0["sampler"], r0["stale"]) == ("spark-0", "sampling", False)
    assert abs(r0["age_s"] - 0.2) < 1e-9
    assert r0["gpu"] == {"util": 87, "sm_mhz": 2400, "max_sm_mhz": 3003, "power_w": 61.5, "temp_c": 55,
                         "pstate": "P0", "name": "NVIDIA GB10", "timestamp": "2026/12/01 10:00:00.000"}
    assert r0["processes"] == [{"pid": 305, "name": "python3", "used_mib": None},
                               {"pid": 306, "name": "vllm", "used_mib": 1024}]
    assert r0["memory"] == {"kind": "unified", "total_bytes": 128 << 30, "available_bytes": 20 << 30,
                            "engine_bytes": None, "gpu_total_mib": None, "gpu_used_mib": None}
    assert r0["ports"] == [{"hca": "rocep1s0f0", "port": 1, "state": "4: ACTIVE", "active": True,
                            "tx_gbps": 12.5, "rx_gbps": None, "changes": {"np_cnp_sent": 3}}]
    json.dumps(data)   # plain JSON, nothing that needs `default=`


def test_a_rank_never_read_is_null_and_stale_not_zero() -> None:
    r1 = stats_dict(model(), NOW)["ranks"][1]
    assert r1["host"] is None and r1["sampler"] == "starting"
    assert r1["stale"] is True and r1["age_s"] is None
    assert r1["gpu"] == dict.fromkeys(GPU_FIELDS) and r1["memory"] == dict.fromkeys(MEMORY_FIELDS)
    assert r1["processes"] == [] and r1["ports"] == []


def test_engine_has_every_reading_field_and_stale() -> None:
    data = stats_dict(model(), NOW)
    engine = data["engine"]
    assert set(engine) == set(EngineStatsReading.__dataclass_fields__) | {"stale"}
    assert engine["running"] == 2 and engine["kv_cache_usage"] == 0.5 and engine["waiting"] is None
    assert engine["ttft_p99_s"] is None and engine["request_success"] == {"stop": 1.0}
    assert engine["stale"] is False
    assert stats_dict(model(), NOW + 60)["engine"]["stale"] is True
    assert stats_dict(ClusterStats([0], 1.0), NOW)["engine"] is None


def test_alerts_carry_every_field() -> None:
    alerts = stats_dict(model(), NOW)["alerts"]
    assert alerts == [
        {"kind": "memory-low", "rank": 0, "since": NOW - 10, "message": "MemAvailable 3.0 GiB",
         "remedy": "free memory", "severity": "fail"},
        {"kind": "engine-hung", "rank": None, "since": NOW - 2, "message": "no progress", "remedy": "look",
         "severity": "warn"}]


def test_a_stale_rank_keeps_its_last_values_marked_stale() -> None:
    r0 = stats_dict(model(), NOW + 30)["ranks"][0]
    assert r0["stale"] is True and r0["gpu"]["util"] == 87 and r0["age_s"] > 29
