"""`sim up` never overwrites a file it did not write; `sim down` deletes only its own unchanged files."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from simcluster import TEST_SPEED

from cockpit.config import load_config
from cockpit.sim import cluster
from cockpit.sim.cluster import MANIFEST, DirInUse, Manifest, demo_up, down
from cockpit.sim.demo_addresses import BLOCK_KEY, claims_dir


def cli(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "cockpit", *args], capture_output=True, text=True,
                          timeout=120, cwd=cwd)


def snapshot(d: Path) -> dict[str, bytes | None]:
    """Every path under d with its content (None for a directory)."""
    return {str(p.relative_to(d)): (None if p.is_dir() else p.read_bytes()) for p in sorted(d.rglob("*"))}


def test_sim_up_dot_refuses_a_real_cluster_toml_and_writes_nothing(tmp_path: Path) -> None:
    real = tmp_path / "cluster.toml"
    real.write_text("# my real cluster\n")
    before = snapshot(tmp_path)
    res = cli("sim", "up", "--dir", ".", "--json", cwd=tmp_path)
    assert res.returncode == 3, res.stderr
    err = json.loads(res.stdout)["error"]
    assert err["code"] == "file-exists"
    assert str(real) in err["message"] and "was not written by `sim up`" in err["message"]
    assert snapshot(tmp_path) == before                  # not even a manifest or a key was written
    down_res = cli("sim", "down", "--dir", ".", cwd=tmp_path)
    assert down_res.returncode == 1 and "no simulated cluster" in down_res.stderr
    assert real.read_text() == "# my real cluster\n"


@pytest.mark.parametrize("name", ["known_hosts", "ssh_config", "id_ed25519", "id_ed25519.pub",
                                  "demo-plan.json", "demo-ready.json", "demo.log"])
def test_sim_up_refuses_any_file_it_would_write(tmp_path: Path, name: str) -> None:
    (tmp_path / name).write_text("the operator's\n")
    before = snapshot(tmp_path)
    with pytest.raises(DirInUse) as info:
        demo_up(tmp_path, speed=TEST_SPEED)
    assert info.value.path == tmp_path / name
    assert snapshot(tmp_path) == before


@pytest.mark.parametrize("name", ["hostkeys", "bin", "hub", "hosts", "lab"])
def test_sim_up_refuses_a_directory_it_did_not_make(tmp_path: Path, name: str) -> None:
    (tmp_path / name).mkdir()
    (tmp_path / name / "keep").write_text("x")
    before = snapshot(tmp_path)
    with pytest.raises(DirInUse, match="was not made by `sim up`"):
        demo_up(tmp_path, speed=TEST_SPEED)
    assert snapshot(tmp_path) == before


def test_sim_up_refuses_a_foreign_manifest_and_a_symlink(tmp_path: Path) -> None:
    (tmp_path / MANIFEST).write_text("[1, 2]")
    with pytest.raises(DirInUse, match="not the manifest of a simulated cluster"):
        demo_up(tmp_path, speed=TEST_SPEED)
    (tmp_path / MANIFEST).unlink()
    target = tmp_path / "elsewhere.toml"
    target.write_text("mine")
    (tmp_path / "cluster.toml").symlink_to(target)
    with pytest.raises(DirInUse, match="is not a file `sim up` wrote"):
        demo_up(tmp_path, speed=TEST_SPEED)
    assert target.read_text() == "mine"


def test_sim_up_refuses_a_dir_its_config_could_not_hold(tmp_path: Path) -> None:
    res = cli("sim", "up", "--dir", str(tmp_path / "my sims"), "--json")
    assert res.returncode == 2, res.stderr
    assert json.loads(res.stdout)["error"]["code"] == "usage"
    assert "contains a space" in res.stdout and not (tmp_path / "my sims").exists()


def test_up_down_up_on_its_own_dir_and_an_edited_config_is_kept(tmp_path: Path) -> None:
    d = tmp_path / "sim"
    d.mkdir()
    (d / "notes.txt").write_text("the operator's notes")
    toml = demo_up(d, speed=TEST_SPEED)
    try:
        load_config(toml)
        m = Manifest.load(d)
        assert m is not None and m.state == "up"
        assert set(m.files) >= {"cluster.toml", "known_hosts", "ssh_config", "id_ed25519", "id_ed25519.pub",
                                "demo-plan.json", "demo-ready.json", "demo.log"}
        assert m.files["cluster.toml"] == cluster.sha256_file(toml) and m.files["demo.log"] is None
        assert "notes.txt" not in m.files and set(m.dirs) == {"hostkeys", "bin", "hub", "hosts"}
        assert oct((d / "id_ed25519").stat().st_mode & 0o777) == "0o600"
        block = m.extra[BLOCK_KEY]               # its own 127.A.B block, claimed for it on this machine
        assert (claims_dir() / block).read_text() == str(d.resolve())
        assert all(h.fabric_ip.startswith(block + ".") for h in load_config(toml).hosts)
    finally:
        stopped = down(d)
    assert not [s for s in stopped if s.startswith("kept ")]
    assert not (claims_dir() / block).exists()           # released with the cluster
    assert not (d / "cluster.toml").exists() and not (d / "demo-ready.json").exists()
    assert (d / "notes.txt").read_text() == "the operator's notes"
    assert (d / "known_hosts").exists() and (d / "hosts").is_dir()    # kept for the next `sim up`
    m = Manifest.load(d)
    assert m is not None and m.state == "down" and m.pids == [] and "cluster.toml" not in m.files
    with pytest.raises(cluster.SimError, match="no simulated cluster running"):
        down(d)
    ident = (d / "id_ed25519").read_bytes()

    toml = demo_up(d, speed=TEST_SPEED)                 # idempotent on its own directory
    try:
        assert (d / "id_ed25519").read_bytes() == ident   # its own unchanged key is reused
        load_config(toml)
        toml.write_text(toml.read_text() + "# my edit\n")
    finally:
        stopped = down(d)
    assert stopped[-1] == f"kept {toml} (changed since `sim up` wrote it)"
    assert toml.read_text().endswith("# my edit\n")
    with pytest.raises(DirInUse, match="was changed since `sim up` wrote it"):
        demo_up(d, speed=TEST_SPEED)
    assert toml.read_text().endswith("# my edit\n")
    assert not [p for p in os.listdir(d) if p.endswith(".tmp")]
