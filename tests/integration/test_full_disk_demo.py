"""A full disk under the state directory (a 64 KiB tmpfs, filled): `stop` still stops every container this
cockpit started, then says the launch ledger could not be written (`write-failed`, the file and the cause),
exit 1, no traceback. Needs root for the mount (skipped otherwise; CI runs as root)."""

from __future__ import annotations

import contextlib
import errno
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from simcluster import SimCluster, prepare_hosts

from cockpit.hosts import Fleet
from cockpit.recipe import launch as L
from cockpit.recipe.ledger import Ledger


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
