"""The Stats sampler and its alerts on a serving demo cluster, over SSH and HTTP: values move with load,
each fault raises its alert on the rank it was set on, and healing clears it."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import asynccontextmanager
from pathlib import Path

import pytest
from simcluster import TEST_SPEED, SimCluster
from test_launch_demo import cli, prepare_hosts

from cockpit.hosts import Fleet
from cockpit.recipe.monitor import StatsMonitor
from cockpit.recipe.watch import ClusterWatcher
from cockpit.sim.faults import set_fault

INTERVAL = 0.5


@pytest.fixture(scope="module")
def serving(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SimCluster]:
    """One demo cluster, launched and serving, for the whole module (tests run in file order; the last
    one crashes the engine)."""
    from cockpit.sim import cluster as sim

    tmp = tmp_path_factory.mktemp("stats")
    old = os.environ.get("XDG_STATE_HOME")
    os.environ["XDG_STATE_HOME"] = str(tmp / "state")
    toml = sim.demo_up(tmp / "cluster", speed=TEST_SPEED)
    cluster = SimCluster(tmp / "cluster", toml, "demo")
    try:
        async def prepare() -> None:
            async with Fleet(cluster.config) as fleet:
                assert await fleet.wait_connected(20)
                await prepare_hosts(fleet, cluster.config)
        asyncio.run(prepare())
        res = cli(cluster, "launch", "--yes")
        assert res.returncode == 0, res.stdout + res.stderr
        yield cluster
    finally:
        sim.down(tmp / "cluster")
        if old is None:
            os.environ.pop("XDG_STATE_HOME", None)
        else:
            os.environ["XDG_STATE_HOME"] = old


@asynccontextmanager
async def _monitor(cluster: SimCluster):  # type: ignore[no-untyped-def]
    cfg = cluster.config
    async with Fleet(cfg) as fleet:
        assert await fleet.wait_connected(20)
        async with ClusterWatcher(fleet, cfg) as watcher, StatsMonitor(fleet, cfg, watcher, INTERVAL) as mon:
            assert await watcher.first_look(30)
            assert await mon.first_sample(30)
            yield mon


async def _until(mon: StatsMonitor, what: Callable[[], object], timeout: float, why: str) -> None:
    t0 = time.monotonic()
    while not what():
        assert time.monotonic() - t0 < timeout, f"{why}: alerts {mon.stats.alerts}"
        await asyncio.sleep(0.2)


def _alerts(mon: StatsMonitor) -> set[tuple[str, int | None]]:
    return {a.key for a in mon.stats.alerts}


def _load(cluster: SimCluster) -> subprocess.Popen[bytes]:
    """A long streamed answer through the cockpit's own chat command (the real client over the tunnel)."""
    argv = [sys.executable, "-m", "cockpit", "--config", str(cluster.config_path), "chat",
            "--timeout", "120", "--max-tokens", "4000", "--no-thinking", "write a long story"]
    return subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def _loaded(mon: StatsMonitor) -> bool:
    ranks = mon.stats.ranks.values()
    return all(s.gpu is not None and (s.gpu.util or 0) >= 20 for s in ranks)


async def test_values_move_with_a_chat_load(serving: SimCluster) -> None:
    async with _monitor(serving) as mon:
        await _until(mon, lambda: mon.stats.engine is not None and mon.stats.engine.running == 0, 20,
                     "idle")
        idle = {r: s.gpu for r, s in mon.stats.ranks.items()}
        assert all(g is not None and g.util == 0 for g in idle.values()), idle
        assert _alerts(mon) == set()
        for s in mon.stats.ranks.values():
            assert s.memory is not None and s.memory.kind == "unified"          # GB10: [N/A] GPU memory
            assert s.memory.engine_bytes and s.memory.engine_bytes > 10 << 30    # the engine holds its share
            assert s.apps and s.ports and s.ports[0].active is True
        load = _load(serving)
        try:
            await _until(mon, lambda: _loaded(mon), 30, "load on every rank")
            await _until(mon, lambda: (mon.stats.engine.generation_tokens_per_s or 0) > 10, 20, "tokens/s")
            await _until(mon, lambda: all((s.ports[0].tx_gbps or 0) > 0 for s in mon.stats.ranks.values()),
                         10, "RDMA traffic")
            for r, s in mon.stats.ranks.items():
                assert s.gpu and idle[r] and s.gpu.sm > idle[r].sm and s.gpu.power_w > idle[r].power_w
            assert mon.stats.engine.running == 1 and mon.stats.engine.itl_p50_s is not None
            await _until(mon, lambda: len([v for v in mon.stats.history[0].values("util") if v]) >= 3, 10,
                         "history")
            assert _alerts(mon) == set()
        finally:
            load.kill()
            load.wait()
        assert set(mon.sampler.starts.values()) == {1}       # one channel per host, never a new exec


async def _fault_under_load(cluster: SimCluster, rank: int, fault: str, expect: set[tuple[str, int | None]],
                            params: dict | None = None) -> None:
    async with _monitor(cluster) as mon:
        assert _alerts(mon) == set()
        load = _load(cluster)
        try:
            await _until(mon, lambda: _loaded(mon), 30, "load")
            set_fault(cluster.root(rank), fault, True, params)
            await _until(mon, lambda: expect <= _alerts(mon), 20, f"{fault} alert")
            assert {k for k in _alerts(mon) if k[1] != rank} == set(), "only the faulty rank alerts"
            set_fault(cluster.root(rank), fault, False)
            await _until(mon, lambda: not _alerts(mon), 20, f"{fault} healed")
        finally:
            set_fault(cluster.root(rank), fault, False)
            load.kill()
            load.wait()


async def test_slow_clocks_alert_the_latched_rank(serving: SimCluster) -> None:
    await _fault_under_load(serving, 2, "slow-clocks", {("clock-latched", 2)})


async def test_low_memory_alerts_below_the_guard(serving: SimCluster) -> None:
    await _fault_under_load(serving, 1, "low-memory", {("memory-low", 1)}, {"available_gib": 3})


async def test_rdma_port_down_alerts_state_and_errors(serving: SimCluster) -> None:
    await _fault_under_load(serving, 3, "rdma-port-down", {("rdma-port-down", 3), ("rdma-errors", 3)})


async def test_hang_alerts_the_engine(serving: SimCluster) -> None:
    hang_after = serving.config.engine.hang_after_s
    async with _monitor(serving) as mon:
        load = _load(serving)
        try:
            await _until(mon, lambda: (mon.stats.engine.generation_tokens_per_s or 0) > 0, 30, "decoding")
            set_fault(serving.root(0), "hang", True)
            await _until(mon, lambda: ("engine-hung", 0) in _alerts(mon), hang_after + 10, "hung")
            set_fault(serving.root(0), "hang", False)
            await _until(mon, lambda: ("engine-hung", 0) not in _alerts(mon), 20, "hang healed")
        finally:
            set_fault(serving.root(0), "hang", False)
            load.kill()
            load.wait()


async def test_bench_through_the_tunnel_refuses_while_the_api_is_busy(serving: SimCluster,
                                                                       tmp_path: Path) -> None:
    """The benchmark's gate on a launched cluster: every rank up, but a request running: refused, with
    the reason, and nothing written."""
    async with _monitor(serving) as mon:
        load = _load(serving)
        try:
            await _until(mon, lambda: (mon.stats.engine.running or 0) > 0, 30, "a request running")
            res = await asyncio.to_thread(cli, serving, "bench", "--out", str(tmp_path / "run"))
        finally:
            load.kill()
            load.wait()
    assert res.returncode == 3, res.stdout + res.stderr
    assert "running" in res.stderr and not (tmp_path / "run").exists()


async def test_a_lost_host_goes_stale_and_its_channel_starts_again(serving: SimCluster) -> None:
    async with _monitor(serving) as mon:
        set_fault(serving.root(1), "host-down", True)
        try:
            await _until(mon, lambda: mon.stats.ranks[1].stale(INTERVAL), 30, "stale")
            assert not mon.stats.ranks[0].stale(INTERVAL)
            await _until(mon, lambda: mon.stats.ranks[1].sampler == "host down", 30, "host down")
            # silent while its connection still looks up, then down: the Hosts pane's news, no alert
            await _until(mon, lambda: ("no-readings", 1) not in _alerts(mon), 5, "host down is no alert")
        finally:
            set_fault(serving.root(1), "host-down", False)
        await _until(mon, lambda: not mon.stats.ranks[1].stale(INTERVAL), 60, "back")
        assert mon.sampler.starts[1] == 2 and mon.sampler.starts[0] == 1


async def test_crash_after_ready_alerts_the_dead_rank_and_a_stop_clears_it(serving: SimCluster) -> None:
    async with _monitor(serving) as mon:
        set_fault(serving.root(0), "crash-after-ready", True)
        try:
            await _until(mon, lambda: ("container-down", 0) in _alerts(mon), 30, "crash")
            assert {k for k in _alerts(mon) if k[0] == "container-down"} == {("container-down", 0)}
        finally:
            set_fault(serving.root(0), "crash-after-ready", False)
        stop = await asyncio.to_thread(cli, serving, "stop", "--yes")
        assert stop.returncode == 0, stop.stdout + stop.stderr
        await _until(mon, lambda: not {k for k in _alerts(mon) if k[0] == "container-down"}, 30, "stopped")


