"""`sim up --hosts N`: a demo cluster of N hosts, each answering over SSH as its own rank; a bad N is a
usage error; a DIR reused with fewer hosts shows only the new cluster's ranks."""

from __future__ import annotations

import json
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
from simcluster import TEST_SPEED

from cockpit.config import load_config
from cockpit.sim.cluster import demo_up, down
from cockpit.sim.size import MAX_HOSTS, MIN_HOSTS, BadHostCount, check_host_count


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "cockpit", *args], capture_output=True, text=True,
                          timeout=120)


def ssh(cluster_dir: Path, rank: int, command: str) -> str:
    res = subprocess.run(["ssh", "-F", str(cluster_dir / "ssh_config"), "-o", "BatchMode=yes",
                          f"spark-{rank}", command], capture_output=True, text=True, timeout=30,
                         stdin=subprocess.DEVNULL)
    assert res.returncode == 0, f"rank {rank}: {res.stderr}"
    return res.stdout


@pytest.mark.parametrize("n", [2, 8])
def test_a_demo_of_n_hosts_answers_as_n_ranks(tmp_path: Path, n: int) -> None:
    res = cli("sim", "up", "--dir", str(tmp_path), "--hosts", str(n), "--speed", str(TEST_SPEED), "--json")
    assert res.returncode == 0, res.stderr
    try:
        assert json.loads(res.stdout)["hosts"] == n
        toml = tomllib.loads((tmp_path / "cluster.toml").read_text())
        assert [h["rank"] for h in toml["hosts"]] == list(range(n))
        cfg = load_config(tmp_path / "cluster.toml")
        fabric = cfg.fabric_ips()
        assert len(set(fabric)) == n
        assert len((tmp_path / "known_hosts").read_text().splitlines()) == n
        assert (tmp_path / "ssh_config").read_text().count("\nHost spark-") + 1 == n
        for rank in range(n):
            name, ips = ssh(tmp_path, rank, "hostname; hostname -I").splitlines()
            assert name == f"spark-{rank}"
            assert fabric[rank] in ips.split()
            spec = json.loads(ssh(tmp_path, rank, 'cat "$R37_SIM_ROOT/sim.json"'))
            assert (spec["rank"], spec["nranks"], spec["peers"]) == (rank, n, fabric)
        faults = cli("sim", "faults", "--dir", str(tmp_path), "--json")
        assert json.loads(faults.stdout)["ranks"] == list(range(n))
        beyond = cli("sim", "fault", str(n), "no-gpu", "--dir", str(tmp_path))
        assert beyond.returncode == 2 and f"no simulated host of rank {n}" in beyond.stderr
    finally:
        down(tmp_path)


@pytest.mark.parametrize("bad", ["1", "17", "0", "-4"])
def test_a_bad_host_count_is_a_usage_error_that_writes_nothing(tmp_path: Path, bad: str) -> None:
    res = cli("sim", "up", "--dir", str(tmp_path / "c"), "--hosts", bad, "--json")
    assert res.returncode == 2, res.stderr
    err = json.loads(res.stdout)["error"]
    assert err["code"] == "usage" and f"{MIN_HOSTS} to {MAX_HOSTS} hosts" in err["message"]
    assert not (tmp_path / "c").exists()
    lab = cli("sim", "up", "--lab", "--dir", str(tmp_path / "c"), "--hosts", bad)
    assert lab.returncode == 2 and f"{MIN_HOSTS} to {MAX_HOSTS} hosts" in lab.stderr
    demo = cli("demo", "--dir", str(tmp_path / "c"), "--hosts", bad)
    assert demo.returncode == 2 and f"{MIN_HOSTS} to {MAX_HOSTS} hosts" in demo.stderr
    assert not (tmp_path / "c").exists()


@pytest.mark.parametrize("n", [1, 17, True, 4.0, "4"])
def test_check_host_count_refuses_what_is_not_2_to_16(n: object) -> None:
    with pytest.raises(BadHostCount, match="2 to 16 hosts"):
        check_host_count(n)
    assert [check_host_count(k) for k in (2, 4, 16)] == [2, 4, 16]
    with pytest.raises(ValueError):
        demo_up(Path("/nonexistent/never-made"), n=17)
    assert not Path("/nonexistent").exists()


def test_a_dir_reused_with_fewer_hosts_shows_only_the_new_ranks(tmp_path: Path) -> None:
    demo_up(tmp_path, n=6, speed=TEST_SPEED)
    down(tmp_path)
    demo_up(tmp_path, n=2, speed=TEST_SPEED)
    try:
        assert [h.rank for h in load_config(tmp_path / "cluster.toml").by_rank()] == [0, 1]
        faults = cli("sim", "faults", "--dir", str(tmp_path), "--json")
        assert json.loads(faults.stdout)["ranks"] == [0, 1]
        info = json.loads(cli("sim", "info", "--dir", str(tmp_path), "--json").stdout)
        assert info["cluster"]["hosts"] == 2
        stale = cli("sim", "fault", "3", "no-gpu", "--dir", str(tmp_path))
        assert stale.returncode == 2 and "no simulated host of rank 3" in stale.stderr
        assert not (tmp_path / "hosts" / "rank-3" / "faults" / "no-gpu").exists()
    finally:
        down(tmp_path)


PREPARE_ENGRAM = Path(__file__).resolve().parents[2] / "cockpit/sim/recipe_repo/tools/prepare-engram.py"


@pytest.mark.parametrize(("nranks", "workers"), [(2, 1), (8, 7), (16, 15), (None, 3), ("8", 3)])
def test_prepare_engram_takes_the_host_world_size(tmp_path: Path, nranks: object, workers: int) -> None:
    if nranks is not None:
        (tmp_path / "sim.json").write_text(json.dumps({"rank": 1, "nranks": nranks}))

    def run(rank: int) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, str(PREPARE_ENGRAM), str(rank), str(tmp_path / "m"),
                               str(tmp_path / "e")], capture_output=True, text=True, timeout=30,
                              env={"R37_SIM_ROOT": str(tmp_path), "PATH": "/usr/bin:/bin"})
    beyond = run(workers + 1)
    assert beyond.returncode == 2 and f"workers are 1..{workers})" in beyond.stderr
    last = run(workers)                    # in range: it gets as far as the (missing) checkpoint
    assert last.returncode == 1 and "cannot read the checkpoint index" in last.stderr
    head = run(0)
    assert head.returncode == 2 and f"worker ranks 1..{workers} only" in head.stderr
