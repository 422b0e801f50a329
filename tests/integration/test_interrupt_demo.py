"""Ctrl-C during `stop` and `launch` on the demo cluster, and a stop that finds a stale lock.

`stop` takes over a lock left by a cockpit whose process is gone and says so (a warning, as for a launch);
interrupted (SIGINT as soon as it holds the lock), it says per rank how far it got, and what it says
matches the hosts: a rank "stopped" is not running, a rank whose turn had not come still runs. A launch
interrupted while a rank's `docker run` is in flight names that rank: its container may be running.
"""

from __future__ import annotations

import asyncio
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from simcluster import SimCluster, prepare_hosts

from cockpit.hosts import Fleet
from cockpit.recipe import launch as L
from cockpit.recipe import lock as K
from cockpit.recipe.ledger import Ledger
from cockpit.recipe.stop import STOP_IN_FLIGHT, STOP_PENDING
from cockpit.sim import layout

DEADLINE = 120.0


@pytest.fixture(autouse=True)
def _state_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    (tmp_path / "cluster").mkdir(exist_ok=True)


def dead_pid() -> int:
    proc = subprocess.Popen(["true"])
    proc.wait()
    return proc.pid


async def test_an_interrupted_stop_says_per_rank_how_far_it_got(fresh_demo_cluster: SimCluster) -> None:
    cfg = fresh_demo_cluster.config
    name = cfg.cluster.container_name
    ledger = Ledger(cfg)
    async with Fleet(cfg) as fleet:
        assert await fleet.wait_connected(20)
        await prepare_hosts(fleet, cfg)
        for rank in cfg.ranks:
            res = await fleet[rank].run(L.launch_command(cfg, rank), timeout=60)
            assert res.ok, res.stderr
            state = await L.inspect_container(fleet, rank, name)
            assert state is not None and state.running
            ledger.record(rank, state.id, name, fleet[rank].target)
        # a stop's lock left by a cockpit on this box whose process is gone
        here = K.this_box()
        d = layout.home_dir(fresh_demo_cluster.root(0)) / K.lock_path(cfg)
        d.mkdir(parents=True)
        t = K._utc(time.time())
        (d / K.RECORD_NAME).write_text(K.record_text(K.Holder("alice", here.host, dead_pid(), "stop", t, t,
                                                              "ab" * 16, here.boot_id)))

        config = str(fresh_demo_cluster.config_path)
        proc = subprocess.Popen([sys.executable, "-m", "cockpit", "--config", config, "stop", "--yes"],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                stdin=subprocess.DEVNULL, env=dict(os.environ))
        try:
            assert proc.stderr is not None
            first = await asyncio.wait_for(asyncio.to_thread(proc.stderr.readline), DEADLINE)
            assert first.startswith("warning: took over a stale cluster lock from alice@"), first
            assert "is gone" in first
            proc.send_signal(signal.SIGINT)
            out, err = await asyncio.to_thread(proc.communicate, timeout=DEADLINE)
        finally:
            if proc.poll() is None:
                proc.kill()
        assert proc.returncode == 130, out + err
        assert "Traceback" not in err
        said: dict[int, str] = {}
        if "interrupted before any container was stopped" not in err:
            assert "interrupted: the stop got this far:" in err, err
            said = {int(m[1]): m[2] for m in re.finditer(r"^  rank (\d+): (.*)$", err, re.MULTILINE)}
            assert sorted(said) == cfg.ranks, err
        for rank in cfg.ranks:
            state = await L.inspect_container(fleet, rank, name)
            assert state is not None
            told = said.get(rank, STOP_PENDING)
            if told.startswith("stopped "):
                assert not state.running, f"rank {rank} said stopped but runs"
            elif told == STOP_PENDING:
                assert state.running, f"rank {rank} said not stopped but is not running"
            else:
                assert told == STOP_IN_FLIGHT, told

        again = subprocess.run([sys.executable, "-m", "cockpit", "--config",
                                str(fresh_demo_cluster.config_path), "stop", "--yes"],
                               capture_output=True, text=True, timeout=DEADLINE, env=dict(os.environ))
        assert again.returncode == 0, again.stdout + again.stderr
        for rank in cfg.ranks:
            state = await L.inspect_container(fleet, rank, name)
            assert state is not None and not state.running


async def test_an_interrupted_launch_knows_the_rank_whose_docker_run_was_in_flight(
        fresh_demo_cluster: SimCluster) -> None:
    cfg = fresh_demo_cluster.config
    async with Fleet(cfg) as fleet:
        assert await fleet.wait_connected(20)
        await prepare_hosts(fleet, cfg)
        launcher = L.Launcher(fleet, cfg, poll_interval=0.3)
        try:
            task = asyncio.create_task(launcher.launch())
            deadline = time.monotonic() + DEADLINE
            while not launcher.in_flight:
                assert time.monotonic() < deadline and not task.done()
                await asyncio.sleep(0.005)
            task.cancel()            # what Ctrl-C does to the command's task
            with pytest.raises(asyncio.CancelledError):
                await task
        finally:
            await launcher.close()
        first = L.launch_order(cfg.ranks)[0]
        assert launcher.booting == {} and launcher.in_flight == {first}
