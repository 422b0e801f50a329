"""`r37-cockpit fabric` on the demo cluster over real SSH: the perftest stand-ins connect server↔client over
TCP on the fabric IPs; healthy pairs pass, each fault is named on its rank with its remedy, a server whose
client failed is ended by its pid, and the test is refused while the engine's container runs."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from simcluster import SimCluster, prepare_hosts

from cockpit.config import load_config
from cockpit.hosts import Fleet, command
from cockpit.recipe.fabric import gate_failure
from cockpit.sim.cluster import sim_processes


def fabric(cluster: SimCluster, *args: str, timeout: float = 240) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "cockpit", "--config", str(cluster.config_path), "fabric",
                           *args], capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL)


def perftest_processes(cluster: SimCluster) -> list[str]:
    """This cluster's perftest processes (other tests may run their own fabric tests at the same time)."""
    found = []
    for pid in sim_processes(cluster.dir):
        try:
            cmd = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if "cockpit.sim.tools.ib_write_" in cmd or " ib_write_bw -d " in cmd or " ib_write_lat -d " in cmd:
            found.append(f"{pid}: {cmd}")
    return found


def test_every_pair_passes_at_the_ports_rate(demo_cluster: SimCluster) -> None:
    res = fabric(demo_cluster, "--json")
    assert res.returncode == 0, res.stdout + res.stderr
    data = json.loads(res.stdout)
    assert data["ok"] is True and data["slow_rank"] is None
    assert data["rates_gbps"] == {"0": 200.0, "1": 200.0, "2": 200.0, "3": 200.0}
    assert [(p["server"], p["client"]) for p in data["pairs"]] == [(0, 1), (0, 2), (0, 3), (1, 2), (1, 3),
                                                                   (2, 3)]
    for p in data["pairs"]:
        assert p["verdict"] == "pass" and 180 < p["bw_gbps"] <= 200 and 1.0 < p["lat_us"] < 3.0
        assert p["size"] == 1 << 20 and len(p["commands"]) == 4


def test_the_commands_are_shown_before_the_results(demo_cluster: SimCluster) -> None:
    res = fabric(demo_cluster, "--pairs", "ring", "--size", "65536")
    assert res.returncode == 0, res.stdout + res.stderr
    out = res.stdout
    shown = out.index("rank 0: sh -c 'echo R37PID $$; exec timeout -k 2 30 ib_write_bw -d rocep1s0f0")
    assert shown < out.index("pair 0↔1:") < out.index("PASSED:")
    assert "-s 65536" in out and "bandwidth (Gb/s" in out and "latency (µs" in out


@pytest.mark.parametrize(("fault", "verdict", "problem", "remedy"), [
    ("fabric-degraded", "slow", "below 80% of the ports' active rate 200 Gb/s", "cable"),
    ("wrong-gid", "fail", "GID index 3", "gid_index"),
    ("rdma-port-down", "fail", "is down on rank 2", "cable"),
])
def test_a_fault_on_rank_2_names_rank_2s_link(demo_cluster: SimCluster, fault: str, verdict: str,
                                              problem: str, remedy: str) -> None:
    demo_cluster.fault(2, fault)
    try:
        res = fabric(demo_cluster, "--pairs", "ring", "--json")
    finally:
        demo_cluster.fault(2, fault, on=False)
    assert res.returncode == 1, res.stdout + res.stderr
    data = json.loads(res.stdout)
    assert data["ok"] is False and data["code"] == "fabric-failed" and data["slow_rank"] == 2
    by_pair = {(p["server"], p["client"]): p for p in data["pairs"]}
    assert by_pair[(0, 1)]["verdict"] == "pass" and by_pair[(3, 0)]["verdict"] == "pass"
    for key in ((1, 2), (2, 3)):
        assert by_pair[key]["verdict"] == verdict and problem in by_pair[key]["problem"], by_pair[key]
    assert remedy in data["remedy"] and "rank 2" in data["summary"]
    deadline = time.monotonic() + 15
    while perftest_processes(demo_cluster) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert perftest_processes(demo_cluster) == []          # every server ended, also one whose client failed


def test_refused_while_the_engine_container_runs_unless_yes(fresh_demo_cluster: SimCluster) -> None:
    cfg = fresh_demo_cluster.config

    async def start() -> None:
        async with Fleet(cfg) as fleet:
            assert await fleet.wait_connected(20)
            await prepare_hosts(fleet, cfg)
            res = await fleet[1].run(command(["docker", "run", "-d", "--name", cfg.cluster.container_name,
                                              cfg.runtime.image_tag, "sleep", "300"]))
            assert res.ok, res.stderr

    asyncio.run(start())
    res = fabric(fresh_demo_cluster, "--pairs", "ring", "--json")
    assert res.returncode == 3, res.stdout + res.stderr
    assert "the engine runs on rank(s) 1" in res.stderr and "--yes" in res.stderr
    res = fabric(fresh_demo_cluster, "--pairs", "ring", "--json", "--yes")
    assert res.returncode == 0, res.stdout + res.stderr


def test_launch_gate_requires_a_passed_fabric_test(fresh_demo_cluster: SimCluster, tmp_path: Path) -> None:
    demo_cluster = fresh_demo_cluster
    cfg = demo_cluster.config

    async def prepare() -> None:
        async with Fleet(cfg) as fleet:
            assert await fleet.wait_connected(20)
            await prepare_hosts(fleet, cfg)

    asyncio.run(prepare())
    toml = tmp_path / "cluster.toml"
    toml.write_text(demo_cluster.config_path.read_text() + "\n[fabric]\nrequire_passed = true\n")
    env = dict(os.environ, XDG_STATE_HOME=str(tmp_path / "state"))

    def cli(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "cockpit", "--config", str(toml), *args],
                              capture_output=True, text=True, timeout=240, env=env, stdin=subprocess.DEVNULL)

    res = cli("launch", "--dry-run")
    assert res.returncode == 3 and "no fabric test of this cluster is on record" in res.stdout + res.stderr
    demo_cluster.fault(1, "rdma-port-down")
    try:
        assert cli("fabric", "--pairs", "ring").returncode == 1
    finally:
        demo_cluster.fault(1, "rdma-port-down", on=False)
    res = cli("launch", "--dry-run")
    assert res.returncode == 3 and "fabric test: the last one did not pass" in res.stdout + res.stderr
    assert cli("fabric", "--pairs", "ring").returncode == 0
    assert gate_failure(load_config(toml), tmp_path / "state" / "r37-cockpit") is None   # a pass opens it


def test_a_host_that_is_down_is_named_before_anything_runs(demo_cluster: SimCluster) -> None:
    before = set(perftest_processes(demo_cluster))     # a server of an earlier test may still be ending
    demo_cluster.fault(3, "host-down")
    try:
        res = fabric(demo_cluster, "--json")
    finally:
        demo_cluster.fault(3, "host-down", on=False)
    assert res.returncode == 1, res.stdout + res.stderr
    assert json.loads(res.stdout)["error"]["code"] == "host-unreachable"
    assert "rank(s) 3 not connected" in res.stderr and "Traceback" not in res.stderr
    assert [p for p in perftest_processes(demo_cluster) if p not in before] == []
