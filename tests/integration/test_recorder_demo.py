"""The flight recorder on a demo cluster over real SSH: a launch, a `stats --watch`, a bench run, a stop and
a `status --watch-engine` land in the cluster's recording (who launched and stopped, samples of every rank,
verdicts, where the bench records are), `events` prints them in order and filters them, and the command log
keeps the host-changing sessions apart."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from simcluster import SimCluster, prepare_hosts

from cockpit.hosts import Fleet
from cockpit.locations import sessions_dir
from cockpit.recipe.lock import local_host, local_user
from cockpit.recipe.recording import path_for
from cockpit.telemetry.recorder import read_samples


@pytest.fixture(autouse=True)
def _state_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))


def cli(cluster: SimCluster, *args: str, timeout: float = 180) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "cockpit", "--config", str(cluster.config_path), *args],
                          capture_output=True, text=True, timeout=timeout, env=dict(os.environ),
                          stdin=subprocess.DEVNULL)


def watch_rounds(cluster: SimCluster, lines_wanted: int) -> subprocess.CompletedProcess[str]:
    """`stats --watch` until it printed `lines_wanted` lines (a line per rank per round), then Ctrl-C."""
    proc = subprocess.Popen([sys.executable, "-m", "cockpit", "--config", str(cluster.config_path), "stats",
                             "--watch", "--interval", "0.5"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, stdin=subprocess.DEVNULL, env=dict(os.environ))
    seen: list[str] = []
    try:
        assert proc.stdout is not None
        deadline = time.monotonic() + 120
        while len(seen) < lines_wanted and time.monotonic() < deadline:
            line = proc.stdout.readline()
            if not line:
                break
            seen.append(line)
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    return subprocess.CompletedProcess(proc.args, proc.returncode, "".join(seen) + out, err)


def bench_cancelled(cluster: SimCluster, out: Path) -> int:
    """A `bench` run through the cluster's tunnel, cancelled (Ctrl-C) once it has begun sending."""
    proc = subprocess.Popen([sys.executable, "-m", "cockpit", "--config", str(cluster.config_path), "bench",
                             "--out", str(out)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            stdin=subprocess.DEVNULL, env=dict(os.environ))
    try:
        assert proc.stderr is not None
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            line = proc.stderr.readline()
            if not line or "records in" in line:
                break
        time.sleep(0.5)
        proc.send_signal(signal.SIGINT)
        proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    return proc.returncode


async def test_launch_watch_stop_status_are_recorded_and_events_tells_them_in_order(
        fresh_demo_cluster: SimCluster) -> None:
    cluster = fresh_demo_cluster
    cfg = cluster.config
    async with Fleet(cfg) as fleet:
        assert await fleet.wait_connected(20)
        await prepare_hosts(fleet, cfg)
    res = cli(cluster, "launch", "--yes")
    assert res.returncode == 0, res.stdout + res.stderr
    res = watch_rounds(cluster, 4 * 6)
    assert res.returncode == 0, res.stdout + res.stderr
    assert bench_cancelled(cluster, cluster.dir / "bench") == 130
    res = cli(cluster, "stop", "--yes")
    assert res.returncode == 0, res.stdout + res.stderr
    res = cli(cluster, "status", "--watch-engine", "1")
    assert "warning" not in res.stderr, res.stderr

    res = cli(cluster, "events", "--json")
    assert res.returncode == 0, res.stderr
    data = json.loads(res.stdout)
    events = data["events"]
    assert data["recording"] == str(path_for(cfg))
    assert [e["t"] for e in events] == sorted(e["t"] for e in events)
    who = f"{local_user()}@{local_host()}"
    launched = [e for e in events if e["kind"] == "launch"]
    assert sorted(e["rank"] for e in launched) == [0, 1, 2, 3]
    assert all(e["data"]["who"] == who and who in e["summary"] for e in launched)
    stopped = [e for e in events if e["kind"] == "stop"]
    assert sorted(e["rank"] for e in stopped) == [0, 1, 2, 3] and all(e["data"]["ok"] for e in stopped)
    assert min(e["t"] for e in stopped) > max(e["t"] for e in launched)
    ran = next((e for e in events if e["kind"] == "bench"), None)
    assert ran is not None, [e["kind"] for e in events]
    assert ran["data"]["records"] == str(cluster.dir / "bench") and ran["data"]["status"] == "cancelled"
    begins = [e["summary"] for e in events if e["kind"] == "recorder" and "begins" in e["summary"]]
    assert any("stats --watch" in s for s in begins) and any("status --watch-engine" in s for s in begins)
    verdicts = [e["data"]["state"] for e in events if e["kind"] == "verdict"]
    assert "ready" in verdicts and "stopped" in verdicts[verdicts.index("ready"):], verdicts
    conditions = [e for e in events if e["kind"] == "condition"]
    assert {e["rank"] for e in conditions} == {0, 1, 2, 3}

    samples = read_samples(path_for(cfg))
    for rank in cfg.ranks:
        mine = [s for s in samples if s["rank"] == rank]
        # a point's GPU figures are None while its reading is stale (a loaded machine): most are fresh
        assert len(mine) >= 3 and sum(bool(s["sm_mhz"]) for s in mine) >= 2, (rank, mine)
    assert len({(s["rank"], s["t"]) for s in samples}) == len(samples)      # no sample twice
    window = json.loads(cli(cluster, "stats", "--since", "1h", "--json").stdout)    # connects to nothing
    assert {r: len(p) for r, p in window["ranks"].items()} == {
        str(r): len([s for s in samples if s["rank"] == r]) for r in cfg.ranks}

    ranked = json.loads(cli(cluster, "events", "--rank", "2", "--json").stdout)["events"]
    assert ranked and {e["rank"] for e in ranked} <= {2, None} and any(e["rank"] == 2 for e in ranked)
    text = cli(cluster, "events", "--since", "1h")
    assert text.returncode == 0 and "launched container" in text.stdout and "\x1b" not in text.stdout
    assert len(text.stdout.splitlines()) == len(events)
    empty = cli(cluster, "events", "--until", "2001-01-01")
    assert empty.returncode == 0 and "no event recorded in that range" in empty.stdout
    bad = cli(cluster, "events", "--since", "yesterday-ish")
    assert bad.returncode == 2 and "not a time" in bad.stderr

    names = {p.name for p in sessions_dir().iterdir()}
    host = {n for n in names if n.endswith(".host.jsonl")}
    assert len(host) == 2                                   # the launch and the stop, not stats or status
    assert len(names) - len(host) >= 2
