"""A two-host (TP2) demo cluster: `sim up --hosts 2`, the recipe's steps, a launch reaching READY with a
world size of two (tensor-parallel size and nnodes from cluster.env's NODE_IPS), then a stop."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from simcluster import TEST_SPEED, SimCluster, prepare_hosts

from cockpit.hosts import Fleet
from cockpit.sim import cluster


@pytest.fixture
def two_hosts(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[SimCluster]:
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))     # a launch ledger of the test's own
    toml = cluster.demo_up(tmp_path / "cluster", n=2, speed=TEST_SPEED)
    try:
        yield SimCluster(tmp_path / "cluster", toml, "demo")
    finally:
        cluster.down(tmp_path / "cluster")


def cli(sim: SimCluster, *args: str, timeout: float = 180) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "cockpit", "--config", str(sim.config_path), *args],
                          capture_output=True, text=True, timeout=timeout, env=dict(os.environ))


async def test_a_two_host_demo_launches_to_ready_with_world_size_two(two_hosts: SimCluster) -> None:
    cfg = two_hosts.config
    assert cfg.ranks == [0, 1]
    async with Fleet(cfg) as fleet:
        assert await fleet.wait_connected(20)
        await prepare_hosts(fleet, cfg)

    dry = cli(two_hosts, "launch", "--dry-run", "--json")
    assert dry.returncode == 0, dry.stdout + dry.stderr
    runs = [e for e in map(json.loads, dry.stdout.splitlines()) if e["event"] == "DryRun"]
    assert [e["rank"] for e in runs] == [1, 0]
    for e in runs:
        assert "--tensor-parallel-size 2 " in e["output"] and "--nnodes 2 " in e["output"]
        assert f"--node-rank {e['rank']} " in e["output"]

    res = cli(two_hosts, "launch", "--yes", "--json")
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr
    events = [json.loads(line) for line in res.stdout.splitlines()]
    assert [e["rank"] for e in events if e["event"] == "RankLaunched"] == [1, 0]
    assert events[-1]["event"] == "Result" and events[-1]["ok"] and events[-1]["state"] == "ready"
    head_log = (two_hosts.dir / "hosts" / "rank-0" / "docker").rglob("*-json.log")
    text = "".join(p.read_text(errors="replace") for p in head_log)
    assert "world_size=2" in text and "world_size=4" not in text

    status = cli(two_hosts, "status", "--json")
    assert status.returncode == 0, status.stdout + status.stderr
    report = json.loads(status.stdout)
    assert report["api"]["ready"] and report["verdict"]["state"] == "ready"
    assert len(report["ranks"]) == 2 and all(r["container"]["status"] == "running" for r in report["ranks"])

    stop = cli(two_hosts, "stop", "--yes", "--json")
    assert stop.returncode == 0, stop.stdout + stop.stderr
    assert [s["rank"] for s in json.loads(stop.stdout)["stopped"]] == [0, 1]
