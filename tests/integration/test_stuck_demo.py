"""Which rank is stuck, on the demo cluster over SSH: a tensor-parallel deadlock on rank 2 (the sim's
`tp-deadlock` fault: rank 2 never enters the collective, the others spin in NCCL) is named by `status --json`
with its evidence, its stacks (the py-spy stand-in inside the container) and a remedy; cleared, it is gone."""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path

import pytest
from test_launch_demo import cli, prepare_hosts
from test_lifecycle_demo import streaming_answer

from cockpit.hosts import Fleet
from cockpit.sim.faults import set_fault
from cockpit.tui.app import CockpitApp
from cockpit.tui.panes.launch import LaunchPane
from cockpit.tui.panes.stats import StatsPane
from cockpit.tui.widgets.stuck_view import StuckView


@pytest.fixture(autouse=True)
def _state_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))


def _status(cluster, *extra: str) -> tuple[int, dict]:  # type: ignore[no-untyped-def]
    res = cli(cluster, "status", "--json", *extra)
    assert res.stdout, res.stderr
    return res.returncode, json.loads(res.stdout)


async def _tui_names_rank_2_and_reads_stacks(cluster) -> None:  # type: ignore[no-untyped-def]
    """The TUI on the same cluster: the Launch pane's block names rank 2 (its own watcher and sampler), `k`
    reads the stacks into it, and the Stats pane marks rank 2."""
    app = CockpitApp(cluster.config, cluster.config_path)
    async with app.run_test(size=(160, 48)) as pilot:
        app.action_show_pane("launch")
        pane = app.query_one(LaunchPane)
        view = pane.query_one(StuckView)
        t0 = time.monotonic()
        while "rank 2 idle at 0 %" not in str(view.render()):
            assert time.monotonic() - t0 < 90, (pane.timeline.verdict, str(view.render()))
            await pilot.pause(0.5)
        await pilot.press("k")
        t0 = time.monotonic()
        while "acquire_read" not in str(view.render()):
            assert time.monotonic() - t0 < 60, str(view.render())
            await pilot.pause(0.5)
        assert "active in all_reduce" in str(view.render())
        app.action_show_pane("stats")
        await pilot.pause(0.5)
        stats = app.query_one(StatsPane)
        stats.refresh_view()
        await pilot.pause()
        assert "rank 2 idle at 0 %" in str(stats.query_one(StuckView).render())


async def test_tp_deadlock_on_rank_2_is_named_with_remedy_and_gone_when_cleared(fresh_demo_cluster) -> None:
    cluster = fresh_demo_cluster
    cfg = cluster.config
    async with Fleet(cfg) as fleet:
        assert await fleet.wait_connected(20)
        await prepare_hosts(fleet, cfg)
    assert cli(cluster, "launch", "--yes").returncode == 0
    hang_after = cfg.engine.hang_after_s
    try:
        async with streaming_answer(cluster):
            await asyncio.sleep(3)
            set_fault(cluster.root(0), "tp-deadlock", True, {"rank_idle": 2})
            t0 = time.monotonic()
            while True:
                code, report = await asyncio.to_thread(_status, cluster, "--stacks")
                if report["verdict"]["state"] == "hung" or time.monotonic() - t0 > hang_after + 60:
                    break
                await asyncio.sleep(1)
            assert report["verdict"]["state"] == "hung", report["verdict"]
            assert code == 1
            stuck = report["stuck"]
            assert stuck is not None and stuck["state"] == "odd", stuck
            assert stuck["odd"] == [2], stuck
            assert "logs --rank 2" in stuck["remedy"] and "stop" in stuck["remedy"]
            ev = {e["rank"]: e for e in stuck["ranks"]}
            assert ev[2]["load"] == "idle" and ev[2]["util"] == 0, ev[2]
            assert all(ev[r]["load"] == "busy" for r in (0, 1, 3)), ev
            assert ev[2]["sm_mhz"] < min(ev[r]["sm_mhz"] for r in (0, 1, 3)), ev
            assert ev[0]["last_line"], ev[0]           # the head's last engine line and its age are shown
            assert ev[0]["last_line_age_s"] is not None
            # the stacks: rank 2's worker waits for work, the others spin in NCCL's all_reduce
            assert ev[2]["stacks"]["state"] == "read", ev[2]["stacks"]
            assert any("idle in acquire_read" in s for s in ev[2]["stacks"]["summary"]), ev[2]["stacks"]
            for r in (0, 1, 3):
                assert any("active in all_reduce" in s for s in ev[r]["stacks"]["summary"]), ev[r]["stacks"]
                assert ev[r]["stacks"]["text"].startswith("Process 1: "), ev[r]["stacks"]["text"][:200]
            text = cli(cluster, "status")
            assert "which rank is stuck: rank 2 idle at 0 %" in text.stdout, text.stdout
            assert "logs --rank 2 -n 200" in text.stdout
            await _tui_names_rank_2_and_reads_stacks(cluster)
            # cleared: the engine moves again, nothing is stuck
            set_fault(cluster.root(0), "tp-deadlock", False)
            t0 = time.monotonic()
            while True:
                code, report = await asyncio.to_thread(_status, cluster)
                if report["verdict"]["state"] == "ready" or time.monotonic() - t0 > 60:
                    break
                await asyncio.sleep(1)
            assert report["verdict"]["state"] == "ready", report["verdict"]
            assert report["stuck"] is None
    finally:
        set_fault(cluster.root(0), "tp-deadlock", False)
