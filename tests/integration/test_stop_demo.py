"""Stopping a serving cluster on the demo cluster over SSH: the CLI and the TUI show the same StopPlan (a lost
worker, a lost head); the stop waits for rank 0's answers under way before SIGTERM and they complete; a stop
that docker ends with SIGKILL (exit 137, the engine waiting for its open streams as real vLLM does) is a
stop, said with how long it took, never a crash."""

from __future__ import annotations

import asyncio
import json
import os
import re
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


def _same(text: str) -> str:
    """A plan's text with the transport's own words for a lost host left out (each side's connection
    says it its way: refused, reset, not connected)."""
    return re.sub(r"(host (?:un|not )reachable): [^;]*;", r"\1: …;", text)


async def test_the_cli_and_the_tui_show_the_same_stop_plan(fresh_demo_cluster) -> None:
    """A lost worker: the same commands (head first), the same 'left alone' and the same word about rank 0's
    requests; then the head lost too: the same refusal. Nothing is stopped by either."""
    from cockpit.tui.app import CockpitApp
    from cockpit.tui.dialogs import ConfirmCommands
    from cockpit.tui.panes.launch import LaunchPane

    cluster = fresh_demo_cluster
    await _launched(cluster)
    app = CockpitApp(cluster.config, cluster.config_path)

    def notice() -> str:
        return str(app.query_one(LaunchPane).query_one("#launch-notice").render())

    async def until(pilot, pred, timeout: float = 60) -> None:  # type: ignore[no-untyped-def]
        end = time.monotonic() + timeout
        while not pred():
            await pilot.pause(0.2)
            assert time.monotonic() < end, f"timed out; the notice: {notice()}"

    try:
        async with app.run_test(size=(160, 48)) as pilot:
            await until(pilot, lambda: all(s.connected for s in app.fleet.statuses), 30)
            app.set_focus(None)
            app.action_show_pane("launch")
            pane = app.query_one(LaunchPane)
            await until(pilot, lambda: pane.timeline.verdict.state == "ready")

            cluster.fault(2, "host-down")
            await until(pilot, lambda: not app.fleet[2].status.connected)
            shown = cli(cluster, "stop")          # not a terminal: the plan, then no stop without --yes
            assert shown.returncode == 3 and "add --yes" in shown.stderr, shown.stdout + shown.stderr
            await pilot.press("s")
            await until(pilot, lambda: isinstance(app.screen, ConfirmCommands))
            screen = app.screen
            assert isinstance(screen, ConfirmCommands)
            targets = {r: app.fleet[r].target for r in range(4)}
            assert [label for label, _ in screen.commands] == [
                f"rank 0 ({targets[0]}) — head, first", f"rank 1 ({targets[1]})", f"rank 3 ({targets[3]})"]
            cli_lines = shown.stdout.splitlines()
            for label, line in screen.commands:
                assert f"{label}: stop" in cli_lines and f"    {line}" in cli_lines, shown.stdout
            assert screen.title_text.startswith("Stop 3 container(s), head first?")
            note = screen.note.splitlines()
            assert note[0].startswith("left alone: rank 2: host unreachable") and note[1:] == [
                "rank 0 serves no request: nothing to wait for"]
            assert [_same(n) for n in note] == [_same(c) for c in cli_lines
                                                if c.startswith(("left alone:", "rank 0 serves"))]
            await pilot.press("escape")

            cluster.fault(0, "host-down")
            await until(pilot, lambda: not app.fleet[0].status.connected)
            refused = cli(cluster, "stop")
            assert refused.returncode == 1, refused.stdout + refused.stderr
            cli_refusal = next(line for line in refused.stderr.splitlines() if line.startswith("rank 0 NOT"))
            await pilot.press("s")
            await until(pilot, lambda: notice().startswith("rank 0 NOT stopped"))
            assert _same(notice()) == _same(cli_refusal), (notice(), cli_refusal)
            assert not isinstance(app.screen, ConfirmCommands)
    finally:
        cluster.fault(0, "host-down", on=False)
        cluster.fault(2, "host-down", on=False)
    async with Fleet(cluster.config) as fleet:
        assert await fleet.wait_connected(30)
        for rank in range(4):
            res = await fleet[rank].run(["docker", "inspect", "-f", "{{.State.Running}}", "ds41_r37"])
            assert res.stdout.strip() == "true"   # neither face stopped anything
