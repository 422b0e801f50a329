"""`sim up --lab --hosts 8`: eight namespaces with their own sshd, each answering as its own rank on its
own management and fabric address; the cockpit sees eight hosts; `sim down` removes all eight."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from simcluster import TEST_SPEED, lab_available

from cockpit.config import load_config
from cockpit.sim.cluster import Manifest
from cockpit.sim.lab import LabNames, netns_list

pytestmark = [pytest.mark.lab, pytest.mark.skipif(lab_available() is not None, reason=lab_available() or "")]
N = 8


def cli(*args: str, timeout: float = 180) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "cockpit", *args], capture_output=True, text=True,
                          timeout=timeout, stdin=subprocess.DEVNULL)


def ssh(cluster_dir: Path, rank: int, command: str) -> str:
    res = subprocess.run(["ssh", "-F", str(cluster_dir / "ssh_config"), "-o", "BatchMode=yes",
                          "-o", "ConnectTimeout=5", f"spark-{rank}", command], capture_output=True, text=True,
                         timeout=30, stdin=subprocess.DEVNULL)
    assert res.returncode == 0, f"rank {rank}: {res.stderr}"
    return res.stdout


def test_an_eight_host_lab_comes_up_answers_per_rank_and_goes_down(tmp_path: Path) -> None:
    up = cli("sim", "up", "--lab", "--hosts", str(N), "--dir", str(tmp_path), "--speed", str(TEST_SPEED),
             "--json")
    assert up.returncode == 0, up.stdout + up.stderr
    manifest = Manifest.load(tmp_path)
    assert manifest is not None
    names = LabNames(str(manifest.extra["lab_id"]), len(manifest.netns))
    try:
        assert json.loads(up.stdout)["hosts"] == N
        assert manifest.netns == names.all_netns and len(manifest.netns) == N
        assert set(manifest.netns) <= set(netns_list())
        cfg = load_config(tmp_path / "cluster.toml")
        assert [h.rank for h in cfg.by_rank()] == list(range(N))
        fabric = cfg.fabric_ips()
        mgmt = [str(ip) for ip in manifest.extra["mgmt_ips"]]  # type: ignore[union-attr]
        assert len(set(fabric)) == len(set(mgmt)) == N
        for rank in range(N):
            out = ssh(tmp_path, rank, "hostname; ip -4 -o addr show | awk '{print $4}'")
            name, addrs = out.split("\n", 1)
            assert name == f"spark-{rank}"
            assert {a.split("/")[0] for a in addrs.split()} >= {fabric[rank], mgmt[rank]}
            spec = json.loads(ssh(tmp_path, rank, "cat /var/lib/r37-sim/sim.json"))
            assert (spec["rank"], spec["nranks"], spec["peers"]) == (rank, N, fabric)
        hosts = cli("--config", str(tmp_path / "cluster.toml"), "hosts", "--json", timeout=60)
        assert hosts.returncode == 0, hosts.stdout + hosts.stderr
        data = json.loads(hosts.stdout)
        assert data["connected"] == N
        assert [h["hostname"] for h in data["hosts"]] == [f"spark-{r}" for r in range(N)]
    finally:
        down = cli("sim", "down", "--dir", str(tmp_path))
    assert down.returncode == 0, down.stderr
    assert not set(names.all_netns) & set(netns_list())
