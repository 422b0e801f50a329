"""`[alerts] command`: a real program receives every alert raised and cleared as JSON on stdin, never a
secret, never blocking the cockpit (bounded queue, rate limit, a timeout that kills the process group),
and `stats --watch` runs it on the demo cluster when a fault raises an alert."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from simcluster import SimCluster

from cockpit.config import load_config
from cockpit.telemetry.cluster_stats import Alert
from cockpit.telemetry.notify import AlertNotifier

RECORDER = """
import json, os, sys
data = json.loads(sys.stdin.read())
data["env"] = sorted(os.environ)
data["pid"] = os.getpid()
with open(sys.argv[1], "a") as f:
    f.write(json.dumps(data) + "\\n")
"""


def recorder(tmp_path: Path) -> tuple[list[str], Path]:
    script = tmp_path / "record.py"
    script.write_text(RECORDER)
    out = tmp_path / "events.jsonl"
    return [sys.executable, str(script), str(out)], out


def events(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def alert(kind: str, rank: int | None, message: str = "m", remedy: str = "r") -> Alert:
    return Alert(kind, rank, 1000.0, message, remedy, "fail")


async def test_raised_then_cleared_each_once_with_no_secret(tmp_path: Path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.setenv("OPENAI_API_KEY", "sk-planted0123456789")
    monkeypatch.setenv("HF_TOKEN", "hf_plantedplantedplanted")
    argv, out = recorder(tmp_path)
    n = AlertNotifier(argv, "r37", timeout_s=30)
    n.start()
    try:
        hung = alert("engine-hung", 0, "stuck; Authorization: Bearer sk-planted0123456789 seen",
                     "export HF_TOKEN=hf_plantedplantedplanted then relaunch")
        assert n.observe([hung]) == 1
        assert n.observe([hung]) == 0                     # still active: no second event
        assert n.observe([]) == 1
        assert await n.drain(60)
    finally:
        await n.close()
    got = events(out)
    assert [(e["event"], e["kind"], e["rank"]) for e in got] == [("raised", "engine-hung", 0),
                                                                ("cleared", "engine-hung", 0)]
    raw = out.read_text()
    assert "planted" not in raw
    assert got[0]["cluster"] == "r37" and got[0]["severity"] == "fail" and got[0]["dropped"] == 0
    assert "OPENAI_API_KEY" not in got[0]["env"] and "HF_TOKEN" not in got[0]["env"]
    assert [d.exit_status for d in n.history] == [0, 0]


async def test_observe_never_waits_and_a_flood_drops_the_oldest_with_a_count(tmp_path: Path) -> None:
    argv, out = recorder(tmp_path)
    n = AlertNotifier(argv, "r37", timeout_s=30, queue=3)
    t0 = time.perf_counter()
    for i in range(10):                               # not started: nothing is delivered meanwhile
        n.observe([alert("rdma-errors", i)])
    assert time.perf_counter() - t0 < 1.0
    assert n.pending == 3 and n.dropped == 16        # 10 raised + 9 cleared = 19 events, 3 kept
    n.start()
    try:
        assert await n.drain(60)
    finally:
        await n.close()
    got = events(out)
    assert len(got) == 3 and got[0]["dropped"] == 16 and got[1]["dropped"] == 0
    assert [(e["event"], e["rank"]) for e in got] == [("cleared", 7), ("raised", 9), ("cleared", 8)]


async def test_rate_limit_holds_the_rest_in_the_queue(tmp_path: Path) -> None:
    argv, out = recorder(tmp_path)
    n = AlertNotifier(argv, "r37", timeout_s=30, max_per_minute=2)
    n.start()
    try:
        n.observe([alert("memory-low", 1), alert("memory-low", 2), alert("memory-low", 3)])
        deadline = time.monotonic() + 60
        while len(events(out)) < 2 and time.monotonic() < deadline:
            await asyncio.sleep(0.1)
        await asyncio.sleep(1.0)
        assert len(events(out)) == 2 and n.pending == 1     # the third waits for the minute to pass
    finally:
        await n.close()


async def test_a_hanging_command_is_killed_with_its_children(tmp_path: Path) -> None:
    script = tmp_path / "hang.sh"
    pidfile = tmp_path / "child.pid"
    script.write_text(f"#!/bin/sh\nsleep 300 &\necho $! > {pidfile}\nwait\n")
    script.chmod(0o755)
    n = AlertNotifier([str(script)], "r37", timeout_s=1.0)
    n.start()
    try:
        n.observe([alert("engine-hung", 0)])
        assert await n.drain(60)
    finally:
        await n.close()
    assert n.history[0].exit_status is None and "timeout" in n.history[0].error
    child = int(pidfile.read_text())
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        try:
            os.kill(child, 0)
        except ProcessLookupError:
            break
        await asyncio.sleep(0.1)
    else:
        raise AssertionError("the command's child survived its kill")


async def test_a_missing_program_is_recorded_not_raised(tmp_path: Path) -> None:
    n = AlertNotifier([str(tmp_path / "no-such-program")], "r37")
    n.start()
    try:
        n.observe([alert("engine-hung", 0)])
        assert await n.drain(30)
    finally:
        await n.close()
    assert n.history[0].exit_status is None and "cannot start" in n.history[0].error


def test_stats_watch_runs_the_command_when_a_fault_raises_an_alert(demo_cluster: SimCluster,
                                                                   tmp_path: Path) -> None:
    argv, out = recorder(tmp_path)
    toml = tmp_path / "cluster.toml"
    toml.write_text(demo_cluster.config_path.read_text() + "\n[alerts]\ncommand = " + json.dumps(argv) + "\n")
    assert load_config(toml).alerts.command == argv
    demo_cluster.fault(2, "rdma-port-down")
    proc = subprocess.Popen([sys.executable, "-m", "cockpit", "--config", str(toml), "stats", "--watch",
                             "--interval", "0.5"], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                            stdin=subprocess.DEVNULL, text=True)
    try:
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline:
            if any(e["kind"] == "rdma-port-down" and e["rank"] == 2 for e in events(out)):
                break
            time.sleep(0.3)
        demo_cluster.fault(2, "rdma-port-down", on=False)
        while time.monotonic() < deadline:
            if any(e["event"] == "cleared" and e["kind"] == "rdma-port-down" for e in events(out)):
                break
            time.sleep(0.3)
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=30)
    finally:
        demo_cluster.fault(2, "rdma-port-down", on=False)
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    got = [(e["event"], e["kind"], e["rank"]) for e in events(out)]
    assert ("raised", "rdma-port-down", 2) in got and ("cleared", "rdma-port-down", 2) in got, (got, err)
    assert proc.returncode == 0, err
