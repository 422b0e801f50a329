"""The Stats alert rules and the alert book, on models built by hand (the demo tests drive real faults)."""

from __future__ import annotations

from pathlib import Path

from cockpit.api.liveness import Liveness
from cockpit.config import StatsSection
from cockpit.hosts.state import HostState, HostStatus
from cockpit.recipe.alerts import AlertBook, findings
from cockpit.recipe.containers import ContainerState
from cockpit.recipe.timeline import ClusterTimeline
from cockpit.telemetry.cluster_stats import ClusterStats, MemoryStats, RankStats
from cockpit.telemetry.engine_stats import EngineStatsReading
from cockpit.telemetry.gpu import parse_gpu_line
from cockpit.telemetry.rdma import PortStats

SAMPLES = Path(__file__).parents[1] / "fixtures" / "samples" / "h200"
LOOP_LOADED = ["timestamp", "index", "pstate", "utilization.gpu", "power.draw", "clocks.sm", "clocks.max.sm",
               "temperature.gpu", "memory.used"]
LOOP_IDLE = ["timestamp", "index", "utilization.gpu", "power.draw", "clocks.sm", "temperature.gpu"]
NOW = 1_000_000.0
GIB = 1 << 30
CFG = StatsSection()


def _statuses(ranks=range(4), state=HostState.CONNECTED):  # type: ignore[no-untyped-def]
    return [HostStatus(r, f"spark-{r}", state) for r in ranks]


def _stats(gpus, at: float = NOW, **per_rank) -> ClusterStats:  # type: ignore[no-untyped-def]
    stats = ClusterStats(list(range(4)), 1.0)
    for rank in range(4):
        extra = per_rank.get(f"r{rank}", {})
        mem = MemoryStats("unified", 128 * GIB, 60 * GIB, None)
        stats.put(RankStats(rank, "sampling", gpu=gpus[rank], gpu_at=at, round_at=at,
                            memory=extra.get("memory", mem), ports=extra.get("ports", ())))
    return stats


def _kinds(found) -> set[tuple[str, int | None]]:  # type: ignore[no-untyped-def]
    return {(f.kind, f.rank) for f in found}


def _h200(name: str, fields: list[str]):  # type: ignore[no-untyped-def]
    return [parse_gpu_line(line, fields) for line in (SAMPLES / name).read_text().splitlines() if line]


def test_real_h200_readings_loaded_and_idle_raise_no_clock_alert() -> None:
    loaded = _h200("smi-loop-loaded.csv", LOOP_LOADED)     # 1440-1530 of 1980 MHz at its 700 W cap
    idle = _h200("smi-loop.csv", LOOP_IDLE)                # P0, 0 %, 345 MHz
    for readings in (loaded[:4], idle[:4]):
        assert findings(_stats(readings), CFG, None, _statuses(), NOW) == []


def test_a_rank_far_below_its_loaded_peers_is_latched() -> None:
    loaded = _h200("smi-loop-loaded.csv", LOOP_LOADED)[:4]
    slow = parse_gpu_line("2026/12/01 07:56:19.870, 0, P0, 100, 300.0, 780, 1980, 50, 1011", LOOP_LOADED)
    found = findings(_stats([*loaded[:2], slow, loaded[3]]), CFG, None, _statuses(), NOW)
    assert _kinds(found) == {("clock-latched", 2)}
    assert "780 MHz" in found[0].message and "nvidia-smi -q" in found[0].remedy


def test_memory_guard_kv_cache_and_preemptions() -> None:
    gpus = _h200("smi-loop.csv", LOOP_IDLE)[:4]
    stats = _stats(gpus, r1={"memory": MemoryStats("unified", 128 * GIB, 3 * GIB, None)})
    stats.set_engine(EngineStatsReading(at=NOW, kv_cache_usage=0.97, preemptions=2.0))
    kinds = _kinds(findings(stats, CFG, None, _statuses(), NOW))
    assert kinds == {("memory-low", 1), ("kv-cache-full", 0), ("preemptions", 0)}
    # an engine reading from long ago is not judged (stale is not current)
    stats.set_engine(EngineStatsReading(at=NOW - 60, kv_cache_usage=0.99))
    assert _kinds(findings(stats, CFG, None, _statuses(), NOW)) == {("memory-low", 1)}


def test_rdma_port_down_and_errors() -> None:
    gpus = _h200("smi-loop.csv", LOOP_IDLE)[:4]
    down = PortStats("rocep1s0f0", 1, "1: DOWN", False, 0.0, 0.0,
                     {"local_ack_timeout_err": 1, "np_cnp_sent": 4})
    cnp = PortStats("rocep1s0f0", 1, "4: ACTIVE", True, 20.0, 20.0, {"np_cnp_sent": 9})
    stats = _stats(gpus, r3={"ports": (down,)}, r0={"ports": (cnp,)})
    found = findings(stats, CFG, None, _statuses(), NOW)
    assert _kinds(found) == {("rdma-port-down", 3), ("rdma-errors", 3)}      # congestion alone: no alert
    assert "local_ack_timeout_err +1" in next(f.message for f in found if f.kind == "rdma-errors")


def test_stale_ranks_are_not_judged_but_said() -> None:
    gpus = _h200("smi-loop.csv", LOOP_IDLE)[:4]
    stats = _stats(gpus, r2={"memory": MemoryStats("unified", 128 * GIB, 1 * GIB, None)})
    stats.update(2, gpu_at=NOW - 30, round_at=NOW - 30)
    found = findings(stats, CFG, None, _statuses(), NOW)
    assert _kinds(found) == {("no-readings", 2)}              # its old low memory is not news now
    # a host that is down is the Hosts pane's news, not a silent sampler's
    statuses = [*_statuses([0, 1, 3]), HostStatus(2, "spark-2", HostState.LOST)]
    assert findings(stats, CFG, None, statuses, NOW) == []


def _container(running: bool, code: int | None = None) -> ContainerState:
    return ContainerState("c1", "ds41_r37", "running" if running else "exited", running, code)


def test_hung_engine_and_a_rank_whose_container_died() -> None:
    gpus = _h200("smi-loop.csv", LOOP_IDLE)[:4]
    tl = ClusterTimeline(range(4))
    for rank in range(4):
        tl[rank].container = _container(rank != 1, None if rank != 1 else 1)
    tl.liveness = Liveness("hung", NOW - 100, "2 requests running, no token for 100 s", "stop and relaunch")
    found = findings(_stats(gpus), CFG, tl, _statuses(), NOW)
    assert _kinds(found) == {("engine-hung", 0), ("container-down", 1)}
    # a rank being stopped is a stop, not a crash
    tl.liveness = None
    tl[1].stop_began = NOW - 1
    assert findings(_stats(gpus), CFG, tl, _statuses(), NOW) == []


def test_book_keeps_the_start_time_and_holds_one_off_changes() -> None:
    gpus = _h200("smi-loop.csv", LOOP_IDLE)[:4]
    book = AlertBook()
    low = _stats(gpus, r1={"memory": MemoryStats("unified", 128 * GIB, 3 * GIB, None)})
    low.set_engine(EngineStatsReading(at=NOW, preemptions=1.0))
    first = book.update(findings(low, CFG, None, _statuses(), NOW), NOW, 1.0)
    assert {a.key for a in first} == {("memory-low", 1), ("preemptions", 0)}
    assert first[0].severity == "fail" and first[0].kind == "memory-low"      # fail before warn
    low = _stats(gpus, NOW + 5, r1={"memory": MemoryStats("unified", 128 * GIB, 3 * GIB, None)})
    later = book.update(findings(low, CFG, None, _statuses(), NOW + 5), NOW + 5, 1.0)
    assert {a.key: a.since for a in later}[("memory-low", 1)] == NOW         # began then, still on
    healed = _stats(gpus, NOW + 6)
    healed.set_engine(EngineStatsReading(at=NOW + 6))
    held = book.update(findings(healed, CFG, None, _statuses(), NOW + 6), NOW + 6, 1.0)
    assert {a.key for a in held} == {("preemptions", 0)}                      # a one-off is held a while
    healed = _stats(gpus, NOW + 20)
    gone = book.update(findings(healed, CFG, None, _statuses(), NOW + 20), NOW + 20, 1.0)
    assert gone == ()
