"""A full disk (a 64 KiB tmpfs, filled): `stop` still stops every container this cockpit started, then says
the launch ledger could not be written (`write-failed`, the file and the cause), exit 1; `bench` names every
record file it could not write and the cause (`write-failed`), prints its summary, exit 1 — never exit 70
or a traceback. Needs root for the mount (skipped otherwise; CI runs as root)."""

from __future__ import annotations

import contextlib
import errno
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest
from simcluster import SimCluster, prepare_hosts

from cockpit.api.client import ApiClient
from cockpit.bench import prompts as P
from cockpit.bench.runner import BenchEvent, CellStarted, Runner
from cockpit.bench.store import RunStore
from cockpit.bench.suite import plan_for
from cockpit.hosts import Fleet
from cockpit.recipe import launch as L
from cockpit.recipe.ledger import Ledger
from cockpit.sim.engine.spawn import ready_engine


def fill(directory: Path) -> None:
    """Write into `directory` until its file system is full."""
    with (directory / "filler").open("wb", buffering=0) as f, contextlib.suppress(OSError):
        while True:
            f.write(b"\0" * 4096)
    with pytest.raises(OSError) as full:
        (directory / "probe").write_bytes(b"x" * 8192)
    assert full.value.errno == errno.ENOSPC


@pytest.fixture
def small_tmpfs(tmp_path: Path) -> Iterator[Path]:
    """A 64 KiB tmpfs of the test's own, unmounted afterwards."""
    if os.geteuid() != 0:
        pytest.skip("mounting a tmpfs needs root")
    mount = tmp_path / "small"
    mount.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k,mode=0700", "tmpfs", str(mount)], check=True)
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=False)


def cli(cluster: SimCluster, state: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "cockpit", "--config", str(cluster.config_path), *args],
                          capture_output=True, text=True, timeout=180, stdin=subprocess.DEVNULL,
                          env={**os.environ, "XDG_STATE_HOME": str(state)})


async def test_stop_on_a_full_disk_stops_first_then_says_the_ledger_was_not_written(
        fresh_demo_cluster: SimCluster, small_tmpfs: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_STATE_HOME", str(small_tmpfs))
    cfg = fresh_demo_cluster.config
    name = cfg.cluster.container_name
    ledger = Ledger(cfg)
    async with Fleet(cfg) as fleet:
        assert await fleet.wait_connected(20)
        await prepare_hosts(fleet, cfg)
        for rank in cfg.ranks:   # started as the cockpit does (the launcher), recorded as it records them
            res = await fleet[rank].run(L.launch_command(cfg, rank), timeout=60)
            assert res.ok, res.stderr
            state = await L.inspect_container(fleet, rank, name)
            assert state is not None and state.running
            ledger.record(rank, state.id, name, fleet[rank].target)
        before = ledger.path.read_bytes()
        fill(small_tmpfs)

        done = cli(fresh_demo_cluster, small_tmpfs, "stop", "--yes")
        assert done.returncode == 1, done.stdout + done.stderr
        assert "Traceback" not in done.stderr
        for rank in cfg.ranks:
            assert f"rank {rank}: ok: stopped" in done.stdout, done.stdout
            state = await L.inspect_container(fleet, rank, name)
            assert state is not None and not state.running, f"rank {rank} still runs"
        told = [line for line in done.stderr.splitlines() if str(ledger.path) in line]
        assert told == [f"r37-cockpit: error (write-failed): the launch ledger {ledger.path} could not be "
                        "written (No space left on device): what this command did (the stop) is not recorded "
                        "in it"], done.stderr                # once, not once per rank nor again by a logger
        # the command log cannot be written either: one warning, and no half-made session file left
        assert done.stderr.count("command log") == 1, done.stderr
        assert list((small_tmpfs / "r37-cockpit" / "sessions").iterdir()) == []
        assert ledger.path.read_bytes() == before        # the old ledger is intact (no half write)
        assert sorted(p.name for p in ledger.path.parent.iterdir() if p.name.endswith(".tmp")) == []

        again = cli(fresh_demo_cluster, small_tmpfs, "stop", "--yes", "--json")
        data = json.loads(again.stdout)
        assert again.returncode == 0, again.stdout + again.stderr   # nothing runs now: nothing to stop
        assert [i["action"] for i in data["plan"]] == ["skip"] * len(cfg.ranks)


@pytest.fixture(scope="module")
def engine(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    with ready_engine(tmp_path_factory.mktemp("engine") / "engine.log", "--speed", "40") as url:
        yield url


def test_bench_into_a_full_disk_names_the_files_and_the_cause(engine: str, small_tmpfs: Path) -> None:
    fill(small_tmpfs)
    out = small_tmpfs / "run"
    done = subprocess.run([sys.executable, "-m", "cockpit", "bench", "--api-url", engine, "--out", str(out)],
                          capture_output=True, text=True, timeout=180, stdin=subprocess.DEVNULL,
                          env=dict(os.environ))
    assert done.returncode == 1, done.stdout + done.stderr
    assert "Traceback" not in done.stderr and "internal error" not in done.stderr
    assert done.stdout.startswith("benchmark failed: "), done.stdout          # the summary, on the terminal
    assert "r37-cockpit: error (write-failed): " in done.stderr
    assert f"{out / 'config.json'}: No space left on device" in done.stderr, done.stderr
    assert f"{out / 'summary.json'}: No space left on device" in done.stderr
    assert "benchmark failed: the records cannot be written" in done.stderr
    assert "records kept" not in done.stderr
    assert [p.name for p in out.iterdir() if p.name.endswith(".tmp")] == []   # no temp file left behind


async def test_a_disk_that_fills_during_a_run_keeps_the_run_and_names_what_was_lost(
        engine: str, small_tmpfs: Path) -> None:
    prompts = P.load()
    plan = replace(plan_for("quick", prompts), checks=False, concurrency=(1,), ceiling=(),
                   prefill_sizes=(), needles=())
    filled: list[bool] = []

    def emit(event: BenchEvent) -> None:
        if isinstance(event, CellStarted) and not filled:   # after config.json: the disk fills up
            fill(small_tmpfs)
            filled.append(True)

    async with ApiClient(engine) as client:
        runner = Runner(client, "deepseek-v4.1-flash", plan, prompts, store=RunStore(small_tmpfs / "run"),
                        emit=emit)
        await runner.run()
    assert filled and runner.status == "complete", runner.reason
    assert runner.summary is not None and runner.summary.status == "complete" and runner.decode   # measured
    assert (small_tmpfs / "run" / "config.json").exists()
    assert {"requests.jsonl", "summary.json", "summary.md", "report.html"} <= set(runner.unwritten)
    assert set(runner.unwritten.values()) == {"No space left on device"}
    assert any("summary.json could not be written: No space left on device" in n for n in runner.notes)


async def test_a_launch_onto_a_full_disk_starts_nothing_and_names_the_ledger(
        fresh_demo_cluster: SimCluster, small_tmpfs: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_STATE_HOME", str(small_tmpfs))
    cfg = fresh_demo_cluster.config
    ledger = Ledger(cfg)
    async with Fleet(cfg) as fleet:
        assert await fleet.wait_connected(20)
        await prepare_hosts(fleet, cfg)
        ledger.path.parent.mkdir(parents=True, exist_ok=True)
        fill(small_tmpfs)
        launcher = L.Launcher(fleet, cfg, ledger=ledger, poll_interval=0.3)
        try:
            assert await launcher.launch() is False          # was an OSError: exit 70
        finally:
            await launcher.close()
        first = L.launch_order(cfg.ranks)[0]
        failure = launcher.timeline.ranks[first].failure
        assert failure is not None and f"the launch ledger {ledger.path} cannot be written (No space left " \
            "on device)" in failure.cause, failure
        assert launcher.booting == {} and launcher.in_flight == set()
        for rank in cfg.ranks:                                # nothing was started that stop could not stop
            assert await L.inspect_container(fleet, rank, cfg.cluster.container_name) is None
