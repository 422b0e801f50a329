"""Preflight against a provisioned demo cluster whose hosts hold hostile or broken things: a shard truncated
alike on every host, files with odd names in the model and Engram directories, host text with terminal
escapes, a host that does not answer (unknown checks: exit 1, the launch gate closed)."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from simcluster import SimCluster
from test_preflight_demo import provisioned_cluster, run

from cockpit.hosts import Fleet
from cockpit.recipe import launch as L
from cockpit.recipe.checks import CheckResult, Verdict
from cockpit.sim import layout
from cockpit.sim.faults import set_fault

SHARD = "model-00005-of-00048.safetensors"
EVIL = "\x1b]52;c;cm0gLXJmIH4=\x07\x1b]0;pwned\x07\x1b[2J\x1b]8;;http://evil.example/\x1b\\click\x1b]8;;\x1b\\"
ODD_NAMES = [b"notes-caf\xe9.txt", b"a file with spaces.txt", b"line\nbreak.txt", b"tab\tname.safetensors",
             b"weird\xff.safetensors", b"\nleading"]
EMPTY = b"junk\nmodel-00001-of-00048.safetensors"   # an empty file that once posed as shard 1


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SimCluster]:
    yield from provisioned_cluster(tmp_path_factory, "pf-hostile")


def local(sim: SimCluster, rank: int, path: str) -> Path:
    """Where a host path of the demo lives on this machine (relative paths are under the host's HOME)."""
    return Path(path) if path.startswith("/") else layout.home_dir(sim.root(rank)) / path


def cli(sim: SimCluster, *args: str) -> subprocess.CompletedProcess[bytes]:
    cmd = [sys.executable, "-m", "cockpit", "--config", str(sim.config_path), *args]
    return subprocess.run(cmd, capture_output=True, timeout=180, stdin=subprocess.DEVNULL)


async def test_a_shard_truncated_alike_on_every_host_fails_on_every_host(cluster: SimCluster) -> None:
    cfg = cluster.config
    before = await run(cfg, only=["checkpoint"])
    assert {r.verdict for r in before.results} == {Verdict.PASS}
    shards = [local(cluster, r, cfg.model_path(r)) / SHARD for r in cfg.ranks]
    saved = [p.read_bytes() for p in shards]
    try:
        for p, data in zip(shards, saved, strict=True):
            os.truncate(p, len(data) - 100)          # the same cut on every host: sizes still agree
        final = await run(cfg, only=["checkpoint"])
    finally:
        for p, data in zip(shards, saved, strict=True):
            p.write_bytes(data)
    assert {(r.rank, r.verdict) for r in final.results} == {(r, Verdict.FAIL) for r in cfg.ranks}
    for r in final.results:
        assert SHARD in r.value and "truncated" in r.value, r
        assert f"r37-cockpit setup checkpoint --rank {r.rank}" in r.remedy
    assert not final.ok


async def test_odd_file_names_do_not_confuse_the_storage_checks(cluster: SimCluster) -> None:
    cfg = cluster.config
    planted: list[bytes] = []
    for r in cfg.ranks:
        dirs = [cfg.model_path(r)] + ([cfg.engram_path(r)] if r != 0 else [])
        for d in dirs:
            for name in [*ODD_NAMES, EMPTY]:
                path = os.fsencode(local(cluster, r, d)) + b"/" + name
                with open(path, "wb") as f:
                    f.write(b"" if name == EMPTY else b"not a checkpoint\n")
                planted.append(path)
    try:
        final = await run(cfg)
    finally:
        for path in planted:
            os.unlink(path)
    bad = [r for r in final.results if r.verdict is not Verdict.PASS]
    assert bad == [] and final.ok
    assert {r.check for r in final.results} >= {"checkpoint", "engram", "disk"}


def test_preflight_text_output_carries_no_terminal_escape(cluster: SimCluster) -> None:
    """Host text with OSC 52, title, clear-screen and hyperlink escapes (a revision marker naming a
    hostile repo): the text output shows it inert, --json escapes it."""
    cfg = cluster.config
    marker = local(cluster, 1, cfg.model_path(1)) / ".r37-revision"
    marker.write_text(json.dumps({"repo": "evil/" + EVIL, "revision": "a" * 40}) + "\n")
    try:
        text = cli(cluster, "preflight", "--only", "checkpoint")
        doc = cli(cluster, "preflight", "--only", "checkpoint", "--json")
    finally:
        marker.unlink()
    assert text.returncode == 1, text.stderr
    assert b"\x1b" not in text.stdout and b"\x07" not in text.stdout
    assert "evil/␛]52;c;cm0gLXJmIH4=␇".encode() in text.stdout
    assert doc.returncode == 1
    result = next(r for r in json.loads(doc.stdout)["results"] if r["rank"] == 1)
    assert result["verdict"] == "fail" and EVIL in result["value"] and result["code"] == "preflight-failed"


def test_setup_text_output_carries_no_terminal_escape(cluster: SimCluster) -> None:
    """`setup env` shows the diff of the host's cluster.env: host text, neutralised."""
    cfg = cluster.config
    env = local(cluster, 2, cfg.recipe_dir(2)) / "cluster.env"
    env.write_text(f"NODE_RANK=2\nNOTE='{EVIL}'\n")
    try:
        res = cli(cluster, "setup", "env", "--rank", "2")
    finally:
        env.unlink()
    assert res.returncode == 3, res.stderr
    assert b"NOTE=" in res.stdout and b"\x1b" not in res.stdout and b"\x07" not in res.stdout
    assert "␛]0;pwned".encode() in res.stdout


def test_unknown_checks_exit_1_with_their_code(cluster: SimCluster) -> None:
    """A host that does not answer, the ssh check left out: before, every check was unknown and
    `preflight` exited 0."""
    set_fault(cluster.root(2), "host-down", True)
    try:
        from concurrent.futures import ThreadPoolExecutor
        with ThreadPoolExecutor(2) as pool:     # both wait out the connect timeout: at the same time
            doc_f = pool.submit(cli, cluster, "preflight", "--only", "arch,gpu", "--rank", "2", "--json")
            text_f = pool.submit(cli, cluster, "preflight", "--only", "arch,gpu", "--rank", "2")
            doc, text = doc_f.result(), text_f.result()
    finally:
        set_fault(cluster.root(2), "host-down", False)
    assert doc.returncode == 1, doc.stderr
    out = json.loads(doc.stdout)
    assert out["ok"] is False and out["code"] == "preflight-unknown" and out["unknown"] == 2
    assert {(r["check"], r["verdict"], r["code"]) for r in out["results"]} == {
        ("arch", "unknown", "preflight-unknown"), ("gpu", "unknown", "preflight-unknown")}
    assert text.returncode == 1
    shown = text.stdout.decode()
    assert "unknown: arch on rank 2: host not reachable over SSH" in shown and "never a pass" in shown


async def test_the_launch_gate_blocks_on_unknown_checks_like_on_failed_ones(cluster: SimCluster) -> None:
    cfg = cluster.config
    unknown = [CheckResult("gpu", 1, 1, "GPU visible", Verdict.UNKNOWN, "no answer: timed out",
                           "re-run once the host answers")]
    failures = L.preflight_failures(unknown)
    async with Fleet(cfg) as fleet:
        assert await fleet.wait_connected(15)
        closed, overridden, clean = await asyncio.gather(
            L.launch_gate(fleet, cfg, preflight_failures=failures),
            L.launch_gate(fleet, cfg, preflight_failures=failures, override_preflight=True),
            L.launch_gate(fleet, cfg, preflight_failures=[]))
    assert not closed.open
    assert [b.reason for b in closed.blockers if b.rank is None] == [
        "1 preflight problem(s) (1 unknown): rank 1: GPU visible: UNKNOWN (not a pass): no answer: timed out "
        "(re-run once the host answers)"]
    assert overridden.open and overridden.preflight_failures == failures     # the operator's one override
    assert clean.open
