"""The cluster's life after the first launch, on the demo cluster over SSH: a stop is a stop, a hung engine
is noticed, the rank that failed first is blamed, one launcher at a time, a host lost during `docker run`,
a stop with the head unreachable, and a second cockpit's stop seen by the first."""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import json
import os
import pty
import struct
import subprocess
import sys
import termios
import threading
import time
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from test_launch_demo import _launch, cli, prepare_hosts

from cockpit.hosts import Fleet
from cockpit.recipe import launch as L
from cockpit.recipe.ledger import Ledger
from cockpit.recipe.stop import execute_stop, plan_stop
from cockpit.recipe.watch import ClusterWatcher


@pytest.fixture(autouse=True)
def _state_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    (tmp_path / "cluster").mkdir(exist_ok=True)


async def _prepared(cluster) -> None:  # type: ignore[no-untyped-def]
    async with Fleet(cluster.config) as fleet:
        assert await fleet.wait_connected(20)
        await prepare_hosts(fleet, cluster.config)


def _status(cluster) -> tuple[int, dict]:  # type: ignore[no-untyped-def]
    res = cli(cluster, "status", "--json")
    return res.returncode, json.loads(res.stdout)


def cli_on_a_terminal(cluster, *args: str, timeout: float = 180) -> tuple[int, str]:  # type: ignore[no-untyped-def]
    """A command with its stdout on a pseudo-terminal of 100 columns: (exit code, what it wrote there)."""
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 40, 100, 0, 0))
    env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES")}
    proc = subprocess.Popen([sys.executable, "-m", "cockpit", "--config", str(cluster.config_path), *args],
                            stdin=subprocess.DEVNULL, stdout=slave, stderr=subprocess.DEVNULL, env=env)
    os.close(slave)
    chunks: list[bytes] = []

    def read() -> None:
        while True:
            try:
                data = os.read(master, 65536)
            except OSError:       # EIO: the command closed the terminal
                return
            if not data:
                return
            chunks.append(data)

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    try:
        code = proc.wait(timeout)
    finally:
        proc.kill()
        reader.join(10)
        os.close(master)
    return code, b"".join(chunks).decode("utf-8", "replace")


async def test_a_traceback_while_stopping_is_still_a_stop(fresh_demo_cluster) -> None:
    await _prepared(fresh_demo_cluster)
    # the launch on a terminal: every rank's boot in a row of its own, rewritten in place (cursor up,
    # clear line), cut to the 100 columns; the result printed for good below the rows
    code, shown = cli_on_a_terminal(fresh_demo_cluster, "launch", "--yes")
    assert code == 0, shown
    assert "F\x1b[2K" in shown and "loading weights" in shown, shown
    rows, below = shown.rsplit("\x1b[2K", 1)
    assert "result: " in below and "result: " not in rows
    live = [part.split("\n")[0].rstrip("\r") for part in shown.split("\x1b[2K")[1:]]
    assert max(map(len, live)) <= 99 and any(row.endswith("rank 0 → ready") for row in live)
    assert "== launching: 4/4 ranks started" in live
    for rank in range(4):
        fresh_demo_cluster.fault(rank, "traceback-on-stop")
    stop = cli(fresh_demo_cluster, "stop", "--yes")
    assert stop.returncode == 0, stop.stdout + stop.stderr
    logs = cli(fresh_demo_cluster, "logs", "--rank", "0")
    assert "Traceback (most recent call last)" in logs.stdout     # it did print one while shutting down
    code, report = _status(fresh_demo_cluster)
    assert code == 0 and report["verdict"]["state"] == "stopped", report["verdict"]
    assert [r["condition"] for r in report["ranks"]] == ["stopped"] * 4
    assert all(r["failure"] is None for r in report["ranks"])


def _decoding(watcher: ClusterWatcher) -> bool:
    """The watcher's last /metrics sample shows a request running and tokens generated."""
    sample = watcher._last_sample
    return sample is not None and sample.running > 0 and sample.generation_tokens_total > 0


@contextlib.asynccontextmanager
async def streaming_answer(cluster, timeout_s: int = 300) -> AsyncIterator[None]:  # type: ignore[no-untyped-def]
    """A long answer (`chat`, 4 000 tokens) decoding on the cluster while the block runs: entered once a
    watcher's /metrics sample shows it running with tokens; the chat is killed on the way out."""
    cfg = cluster.config
    chat = subprocess.Popen([sys.executable, "-m", "cockpit", "--config", str(cluster.config_path), "chat",
                             "--timeout", str(timeout_s), "--max-tokens", "4000", "--no-thinking",
                             "write a long story"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL)
    try:
        async with Fleet(cfg) as fleet:
            assert await fleet.wait_connected(20)
            async with ClusterWatcher(fleet, cfg) as watcher:
                assert await watcher.first_look(30)
                t0 = time.monotonic()
                while not _decoding(watcher):
                    assert time.monotonic() - t0 < 60, watcher.timeline.liveness
                    await asyncio.sleep(0.2)
        yield
    finally:
        chat.kill()
        chat.wait(timeout=30)


def _finished(proc: subprocess.Popen[str], t0: float) -> tuple[float, str, str]:
    """Wait for the process; seconds it ran from t0, and its output."""
    out, err = proc.communicate(timeout=60)
    return time.monotonic() - t0, out, err


async def test_hang_is_reported_and_chat_never_waits_forever(fresh_demo_cluster) -> None:
    """An engine hangs mid-answer: the live model (the TUI's watcher, /metrics every 2 s) and a one-off
    `status` (the head's 10 s stats lines, the hang dated within its interval and confirmed until now by
    /metrics) both say hung within hang_after_s + 5 s; a new chat gives up at its deadline."""
    await _prepared(fresh_demo_cluster)
    assert cli(fresh_demo_cluster, "launch", "--yes").returncode == 0
    cfg = fresh_demo_cluster.config
    hang_after = cfg.engine.hang_after_s
    base = [sys.executable, "-m", "cockpit", "--config", str(fresh_demo_cluster.config_path), "chat"]
    async with Fleet(cfg) as fleet:
        assert await fleet.wait_connected(20)
        async with ClusterWatcher(fleet, cfg) as watcher:
            assert await watcher.first_look(30)
            # an answer is streaming when the engine hangs (its tokens stop mid-answer)
            held = subprocess.Popen([*base, "--timeout", "120", "--max-tokens", "4000", "--no-thinking",
                                     "write a long story"],
                                    stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            quick = held
            try:
                t_held = time.monotonic()
                while not _decoding(watcher):
                    assert time.monotonic() - t_held < 30, watcher.timeline.liveness
                    await asyncio.sleep(0.2)
                await asyncio.sleep(3)
                fresh_demo_cluster.fault(0, "hang")
                t0 = time.monotonic()
                t_quick = time.monotonic()
                quick = subprocess.Popen([*base, "--timeout", "10", "count to ten"], stdout=subprocess.PIPE,
                                         stderr=subprocess.PIPE, text=True)
                quick_done = asyncio.create_task(asyncio.to_thread(_finished, quick, t_quick))
                while watcher.timeline.compute_verdict().state != "hung":
                    assert time.monotonic() - t0 < hang_after + 5, watcher.timeline.engine_liveness()
                    await asyncio.sleep(0.2)
                took, out, err = await quick_done
                assert quick.returncode == 1, out + err
                assert took < 60, (took, err)      # the 10 s deadline plus a busy machine's start-up
                while True:
                    code, report = await asyncio.to_thread(_status, fresh_demo_cluster)
                    if report["engine"] == "hung" or time.monotonic() - t0 > hang_after + 5:
                        break
                    await asyncio.sleep(1)
                assert report["engine"] == "hung", report
                assert code == 1 and report["verdict"]["state"] == "hung"
                assert "logs --rank 0 -n 200" in report["verdict"]["remedy"]
            finally:
                held.kill()
                quick.kill()
                fresh_demo_cluster.fault(0, "hang", on=False)


@pytest.mark.parametrize("run", range(5))
async def test_crash_after_ready_on_rank_3_blames_rank_3(fresh_demo_cluster, run: int) -> None:
    await _prepared(fresh_demo_cluster)
    fresh_demo_cluster.fault(3, "crash-after-ready")
    res = cli(fresh_demo_cluster, "launch", "--yes", "--json")
    events = [json.loads(line) for line in res.stdout.splitlines()]
    verdicts = [e for e in events if e["event"] == "VerdictChanged" and e["state"] == "down"]
    t0 = time.monotonic()
    while True:
        code, report = _status(fresh_demo_cluster)
        if report["verdict"]["state"] == "down" or time.monotonic() - t0 > 60:
            break
        time.sleep(1)
    assert code == 1 and report["verdict"]["first_failed"] == 3, report["verdict"]
    assert report["ranks"][3]["condition"] == "failed"
    # the launch saw the cluster ready, then one settled verdict, never a wrong one first
    # (a "down" verdict names nobody while another rank's log is still being read up to the failure)
    named = [v["first_failed"] for v in verdicts if v["first_failed"] is not None]
    assert named == [3] * len(named), verdicts


async def test_two_launches_at_once_exactly_one_launches(fresh_demo_cluster) -> None:
    await _prepared(fresh_demo_cluster)
    base = [sys.executable, "-m", "cockpit", "--config", str(fresh_demo_cluster.config_path), "launch",
            "--yes"]
    procs = [subprocess.Popen(base, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for _ in range(2)]
    outs = [p.communicate(timeout=240) for p in procs]
    codes = sorted(p.returncode for p in procs)
    assert codes == [0, 3], outs
    loser = next(o for p, o in zip(procs, outs, strict=True) if p.returncode == 3)
    text = loser[0] + loser[1]
    assert "another cockpit holds the cluster lock" in text and "pid" in text, text
    _, report = _status(fresh_demo_cluster)
    assert report["verdict"]["state"] == "ready"


async def test_host_lost_during_docker_run_is_unknown_then_recorded_and_stopped(fresh_demo_cluster) -> None:
    cfg = fresh_demo_cluster.config
    fresh_demo_cluster.fault(2, "lost-during-run")
    rec = []
    fleet, launcher = await _launch(fresh_demo_cluster, rec.append)
    try:
        assert not await launcher.launch()
        tl = launcher.timeline[2]
        assert tl.condition == "unknown" and "host lost during docker run" in tl.unknown
        assert launcher.timeline.compute_verdict().state == "unknown"
        assert 1 not in launcher.booting and 0 not in launcher.booting      # nothing later was launched
        fresh_demo_cluster.fault(2, "host-down", on=False)
        assert await launcher.run_until(lambda t: t[2].owner == "cockpit" and t[2].container is not None,
                                        timeout=60)
        assert Ledger(cfg).owns(2, launcher.timeline[2].container.id)  # type: ignore[union-attr]
        t0 = time.monotonic()
        while True:   # the link that was down may still drop the old connection once: ask again then
            plan = await plan_stop(fleet, cfg, Ledger(cfg))
            if not any(i.action == "unreachable" for i in plan) or time.monotonic() - t0 > 40:
                break
            await fleet[2].wait_connected(10)
        assert [i.rank for i in plan if i.action == "stop"] == [2, 3], [(i.rank, i.reason) for i in plan]
        outcomes = await execute_stop(fleet, plan, Ledger(cfg))
        assert all(o.ok for o in outcomes) and {o.rank for o in outcomes} == {2, 3}
    finally:
        await launcher.close()
        await fleet.close()


async def test_stop_with_the_head_unreachable_stops_nothing_and_fails(fresh_demo_cluster) -> None:
    await _prepared(fresh_demo_cluster)
    assert cli(fresh_demo_cluster, "launch", "--yes").returncode == 0
    fresh_demo_cluster.fault(0, "host-down")
    try:
        stop = cli(fresh_demo_cluster, "stop", "--yes", "--json")
        assert stop.returncode == 1, stop.stdout + stop.stderr
        data = json.loads(stop.stdout)
        head = next(o for o in data["stopped"] if o["rank"] == 0)
        assert not head["ok"] and "rank 0 NOT stopped" in head["message"]
        assert all(not o["ok"] for o in data["stopped"])                # the workers were left running
    finally:
        fresh_demo_cluster.fault(0, "host-down", on=False)
    async with Fleet(fresh_demo_cluster.config) as fleet:
        assert await fleet.wait_connected(30)
        for rank in (1, 2, 3):
            state = await L.inspect_container(fleet, rank, "ds41_r37")
            assert state is not None and state.running


async def test_a_stop_by_a_second_cockpit_shows_in_the_first_within_two_seconds(fresh_demo_cluster) -> None:
    await _prepared(fresh_demo_cluster)
    assert cli(fresh_demo_cluster, "launch", "--yes").returncode == 0
    cfg = fresh_demo_cluster.config
    async with Fleet(cfg) as fleet:
        assert await fleet.wait_connected(20)
        async with ClusterWatcher(fleet, cfg) as watcher:
            assert await watcher.first_look(30)
            await watcher.probe()
            assert watcher.timeline.compute_verdict().state == "ready"
            other = await asyncio.create_subprocess_exec(
                sys.executable, "-m", "cockpit", "--config", str(fresh_demo_cluster.config_path), "stop",
                "--yes", stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.DEVNULL)
            assert await other.wait() == 0
            t0 = time.monotonic()
            while watcher.timeline.compute_verdict().state != "stopped":
                assert time.monotonic() - t0 < 2.0, watcher.timeline.compute_verdict()
                await asyncio.sleep(0.05)


async def test_ctrl_c_during_launch_names_the_booting_containers(fresh_demo_cluster) -> None:
    import signal

    await _prepared(fresh_demo_cluster)
    proc = subprocess.Popen([sys.executable, "-m", "cockpit", "--config", str(fresh_demo_cluster.config_path),
                             "launch", "--yes"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    for line in proc.stdout:
        if "rank 2 launched" in line:
            break
    proc.send_signal(signal.SIGINT)
    _out, err = proc.communicate(timeout=30)
    assert proc.returncode == 130, err
    assert "these containers keep booting: rank 2 (" in err and "rank 3 (" in err
    assert "`r37-cockpit stop`" in err
    stop = cli(fresh_demo_cluster, "stop", "--yes", "--json")
    assert stop.returncode == 0 and {o["rank"] for o in json.loads(stop.stdout)["stopped"]} >= {2, 3}
