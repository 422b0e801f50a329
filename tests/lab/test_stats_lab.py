"""The stats sampler under real OpenSSH sshd: the same channel as on a real host reads every rank, and a
fault moves the files it reads (the builtins-only loop reads them under the host's R37_SIM_ROOT)."""

from __future__ import annotations

import asyncio
import time

import pytest

from cockpit.hosts import Fleet
from cockpit.recipe.monitor import StatsMonitor
from cockpit.sim.faults import set_fault

pytestmark = pytest.mark.lab
GIB = 1 << 30


async def test_every_rank_is_sampled_and_a_fault_shows(lab_cluster) -> None:
    cfg = lab_cluster.config
    async with Fleet(cfg) as fleet:
        assert await fleet.wait_connected(20)
        async with StatsMonitor(fleet, cfg, None, 0.5) as mon:
            assert await mon.first_sample(30)
            for rank, s in mon.stats.ranks.items():
                assert s.sampler == "sampling" and s.gpu is not None, (rank, s.error)
                assert s.gpu.name == "NVIDIA GB10" and s.gpu.max_sm == 3003
                assert s.memory is not None and s.memory.kind == "unified" and s.memory.total_bytes
                assert [p.active for p in s.ports] == [True] * len(cfg.host(rank).ib_hca)
            set_fault(lab_cluster.root(2), "low-memory", True, {"available_gib": 3})
            set_fault(lab_cluster.root(3), "rdma-port-down", True)
            try:
                t0 = time.monotonic()
                while {a.key for a in mon.stats.alerts} != {("memory-low", 2), ("rdma-port-down", 3)}:
                    assert time.monotonic() - t0 < 15, mon.stats.alerts
                    await asyncio.sleep(0.2)
                mem = mon.stats.ranks[2].memory
                assert mem is not None and mem.available_bytes is not None and mem.available_bytes <= 3 * GIB
            finally:
                set_fault(lab_cluster.root(2), "low-memory", False)
                set_fault(lab_cluster.root(3), "rdma-port-down", False)
            assert set(mon.sampler.starts.values()) == {1}
