"""Stopping a serving cluster on the demo cluster over SSH: the CLI and the TUI show the same StopPlan (a lost
worker, a lost head); the stop waits for rank 0's answers under way before SIGTERM and they complete; a stop
that docker ends with SIGKILL (exit 137, the engine waiting for its open streams as real vLLM does) is a
stop, said with how long it took, never a crash."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from test_launch_demo import cli, prepare_hosts

from cockpit.hosts import Fleet
from cockpit.recipe.stop import InFlight, read_in_flight


@pytest.fixture(autouse=True)
def _state_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    (tmp_path / "cluster").mkdir(exist_ok=True)


async def _launched(cluster) -> None:  # type: ignore[no-untyped-def]
    async with Fleet(cluster.config) as fleet:
        assert await fleet.wait_connected(20)
        await prepare_hosts(fleet, cluster.config)
    res = cli(cluster, "launch", "--yes")
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr


def _chat(cluster, out: Path) -> subprocess.Popen[bytes]:  # type: ignore[no-untyped-def]
    """A streamed answer from the CLI in the background (its output in `out`)."""
    return subprocess.Popen([sys.executable, "-m", "cockpit", "--config", str(cluster.config_path), "chat",
                             "--timeout", "120", "--max-tokens", "300", "--no-thinking",
                             "write a short story"],
                            stdout=out.open("wb"), stderr=subprocess.STDOUT, env=dict(os.environ))


async def _requests(cluster, pred, timeout: float = 60) -> InFlight:  # type: ignore[no-untyped-def]
    """Rank 0's requests under way, read as the stop reads them, until `pred` holds."""
    async with Fleet(cluster.config) as fleet:
        assert await fleet.wait_connected(20)
        end = time.monotonic() + timeout
        while True:
            now = await read_in_flight(fleet, cluster.config)
            if pred(now):
                return now
            assert time.monotonic() < end, f"rank 0's requests never became as expected: {now}"
            await asyncio.sleep(0.3)


async def test_drain_waits_for_the_answers_under_way_then_stops(fresh_demo_cluster) -> None:
    cluster = fresh_demo_cluster
    await _launched(cluster)
    cluster.fault(0, "hang")        # the answer stays under way until the test lets it finish
    chat = _chat(cluster, cluster.root(0).parent / "chat.out")
    try:
        await _requests(cluster, lambda f: f.running >= 1)
        stop = subprocess.Popen([sys.executable, "-m", "cockpit", "--config", str(cluster.config_path),
                                 "stop", "--yes", "--json"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                text=True, env=dict(os.environ))
        await asyncio.sleep(4)
        assert stop.poll() is None                 # it waits for the answer (bounded: 120 s by default)
        async with Fleet(cluster.config) as fleet:
            assert await fleet.wait_connected(20)
            res = await fleet[0].run(["docker", "inspect", "-f", "{{.State.Running}}", "ds41_r37"])
            assert res.stdout.strip() == "true"   # nothing stopped yet
        cluster.fault(0, "hang", on=False)      # the engine answers again: the answer completes
        out, err = stop.communicate(timeout=120)
    finally:
        cluster.fault(0, "hang", on=False)
    assert stop.returncode == 0, out + err
    data = json.loads(out)
    assert data["in_flight"]["running"] >= 1 and data["drain"]["outcome"] == "drained", data
    assert data["drain"]["waited_s"] >= 3
    assert [o["rank"] for o in data["stopped"]] == [0, 1, 2, 3] and all(o["ok"] for o in data["stopped"])
    assert not any("killed" in o["message"] for o in data["stopped"])
    assert chat.wait(60) == 0, (cluster.root(0).parent / "chat.out").read_text()[-2000:]
    answer = (cluster.root(0).parent / "chat.out").read_text()
    assert answer.strip() and "abort" not in answer, answer[-2000:]


async def test_137_after_the_stop_is_stopped_with_the_kill_said(fresh_demo_cluster) -> None:
    """An answer stays open (hung engine): the drain gives up at its limit (never waits forever), the
    head's engine waits for its client as vLLM does, docker kills it after its 10 s: stopped, not a crash."""
    cluster = fresh_demo_cluster
    await _launched(cluster)
    cluster.fault(0, "hang")
    chat = _chat(cluster, cluster.root(0).parent / "chat.out")
    try:
        await _requests(cluster, lambda f: f.running >= 1)
        stop = cli(cluster, "stop", "--yes", "--json", "--drain=2")
    finally:
        cluster.fault(0, "hang", on=False)
        chat.wait(120)
    assert stop.returncode == 0, stop.stdout + stop.stderr
    data = json.loads(stop.stdout)
    assert data["drain"]["outcome"] == "timeout" and 2 <= data["drain"]["waited_s"] < 10, data["drain"]
    head = next(o for o in data["stopped"] if o["rank"] == 0)
    assert head["ok"] and "(killed after " in head["message"], head
    assert "did not exit on SIGTERM" in head["message"] and "not a crash" in head["message"]
    res = cli(cluster, "status", "--json")
    report = json.loads(res.stdout)
    assert res.returncode == 0 and report["verdict"]["state"] == "stopped", report["verdict"]
    rank0 = report["ranks"][0]
    assert rank0["container"]["exit_code"] == 137 and rank0["condition"] == "stopped"
    assert rank0["failure"] is None
    assert rank0["detail"].startswith("killed after ") and "did not exit on SIGTERM" in rank0["detail"]
    text = cli(cluster, "status")
    assert "rank 0: stopped (killed after " in text.stdout, text.stdout
    logs = cli(cluster, "logs", "--rank", "0")
    assert "Waiting for connections to close" in logs.stdout
