"""Staged launch against the simulated cluster: phases in order, faults turn the right rank red, a second
launch is refused, stop is head first. Each test prepares its own fresh cluster (launches change hosts)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from simcluster import prepare_hosts

from cockpit.hosts import Fleet
from cockpit.recipe import launch as L
from cockpit.recipe.ledger import Ledger
from cockpit.recipe.phases import Phase
from cockpit.recipe.status import cluster_status
from cockpit.recipe.stop import execute_stop, plan_stop
from cockpit.recipe.timeline import Failure, HostChanged, LaunchEvent, RankFailed, settled

HEAD_PHASES = [Phase.LAUNCHED, Phase.RUNNING, Phase.DIST_INIT, Phase.LOADING, Phase.KV_CACHE,
               Phase.CUDA_GRAPHS, Phase.API_START, Phase.READY]
WORKER_PHASES = [Phase.LAUNCHED, Phase.RUNNING, Phase.DIST_INIT, Phase.ENGRAM, Phase.LOADING, Phase.KV_CACHE,
                 Phase.CUDA_GRAPHS, Phase.WAIT_HEAD, Phase.READY]


@pytest.fixture(autouse=True)
def _state_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A launch ledger of the test's own; and the directory fresh_demo_cluster expects to exist."""
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    (tmp_path / "cluster").mkdir(exist_ok=True)


class Recorder:
    def __init__(self) -> None:
        self.events: list[LaunchEvent] = []

    def __call__(self, event: LaunchEvent) -> None:
        self.events.append(event)

    def failures(self) -> list[Failure]:
        return [e.failure for e in self.events if isinstance(e, RankFailed)]


async def _launch(cluster, recorder: Recorder, **kw):  # type: ignore[no-untyped-def]
    cfg = cluster.config
    fleet = Fleet(cfg)
    fleet.start()
    assert await fleet.wait_connected(20)
    await prepare_hosts(fleet, cfg)
    launcher = L.Launcher(fleet, cfg, emit=recorder, poll_interval=0.3, **kw)
    return fleet, launcher


def cli(cluster, *args: str, timeout: float = 180) -> subprocess.CompletedProcess[str]:  # type: ignore[no-untyped-def]
    return subprocess.run([sys.executable, "-m", "cockpit", "--config", str(cluster.config_path), *args],
                          capture_output=True, text=True, timeout=timeout, env=dict(os.environ))


async def test_full_launch_all_phases_refused_relaunch_and_head_first_stop(fresh_demo_cluster) -> None:
    cfg = fresh_demo_cluster.config
    async with Fleet(cfg) as fleet:
        assert await fleet.wait_connected(20)
        await prepare_hosts(fleet, cfg)
    dry = cli(fresh_demo_cluster, "launch", "--dry-run", "--json")
    assert dry.returncode == 0, dry.stdout + dry.stderr
    dry_events = [json.loads(line) for line in dry.stdout.splitlines()]
    runs = [e for e in dry_events if e["event"] == "DryRun"]
    assert [e["rank"] for e in runs] == [3, 2, 1, 0]
    assert all(e["output"].startswith("docker run -d --name ds41_r37") for e in runs)
    assert "--headless" in runs[0]["output"] and "--headless" not in runs[3]["output"]

    res = cli(fresh_demo_cluster, "launch", "--yes", "--json")
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr
    events = [json.loads(line) for line in res.stdout.splitlines()]
    assert any(e["event"] == "PreflightPass" and e["preflight"] == "full preflight" for e in events)
    launched = [e["rank"] for e in events if e["event"] == "RankLaunched"]
    assert launched == [3, 2, 1, 0]
    for rank, expected in ((0, HEAD_PHASES), *((r, WORKER_PHASES) for r in (1, 2, 3))):
        seen = [e["phase"] for e in events if e["event"] == "PhaseEntered" and e["rank"] == rank]
        assert seen == [p.value for p in expected], (rank, seen)
    progress = [e["done"] for e in events if e["event"] == "ProgressChanged" and e["rank"] == 0]
    assert progress[-1] == 48 and progress == sorted(progress)
    assert events[-1] == {"event": "Result", "ok": True, "state": "ready", "summary": events[-1]["summary"],
                          "remedy": "", "code": None}

    status = cli(fresh_demo_cluster, "status", "--json")
    assert status.returncode == 0, status.stdout + status.stderr
    report = json.loads(status.stdout)
    assert report["api"]["ready"] and report["verdict"]["state"] == "ready"
    assert [r["owner"] for r in report["ranks"]] == ["cockpit"] * 4
    assert all(r["container"]["status"] == "running" for r in report["ranks"])

    again = cli(fresh_demo_cluster, "launch", "--yes")
    assert again.returncode == 3
    assert "still has a container named ds41_r37" in again.stdout and "stop it first" in again.stdout

    stop = cli(fresh_demo_cluster, "stop", "--yes", "--json")
    assert stop.returncode == 0, stop.stdout + stop.stderr
    data = json.loads(stop.stdout)
    assert data["stopped"][0]["rank"] == 0 and len(data["stopped"]) == 4
    # the order the hosts saw: rank 0's container finished before any worker's
    async with Fleet(cfg) as fleet:
        assert await fleet.wait_connected(20)
        finished = {}
        for rank in cfg.ranks:
            state = await L.inspect_container(fleet, rank, cfg.cluster.container_name)
            assert state is not None and state.exited
            finished[rank] = state.finished_at
    assert all(finished[0] <= finished[r] for r in (1, 2, 3)), finished
    assert "docker rm" not in (stop.stdout + res.stdout)

    # a stop is a stop: not a crash, whatever the ranks printed while shutting down
    stopped = cli(fresh_demo_cluster, "status", "--json")
    assert stopped.returncode == 0, stopped.stdout + stopped.stderr
    report = json.loads(stopped.stdout)
    assert report["verdict"]["state"] == "stopped", report["verdict"]
    assert [r["condition"] for r in report["ranks"]] == ["stopped"] * 4
    assert all(r["failure"] is None for r in report["ranks"])
    refused = cli(fresh_demo_cluster, "launch", "--yes")
    assert refused.returncode == 3 and "--replace-stopped" in refused.stdout

    # relaunch from the cockpit: logs archived first, then only those containers removed
    dry2 = cli(fresh_demo_cluster, "launch", "--replace-stopped", "--dry-run", "--json")
    assert dry2.returncode == 0, dry2.stdout + dry2.stderr
    plan = [json.loads(line) for line in dry2.stdout.splitlines()]
    plan = [e for e in plan if e["event"] == "ReplacePlan"]
    assert [e["rank"] for e in plan] == [0, 1, 2, 3]
    assert all(e["commands"] == [f"docker logs -t {e['container_id']}", f"docker rm {e['container_id']}"]
               for e in plan)
    old_ids = {e["rank"]: e["container_id"] for e in plan}
    relaunch = cli(fresh_demo_cluster, "launch", "--yes", "--replace-stopped", "--json")
    assert relaunch.returncode == 0, relaunch.stdout[-3000:] + relaunch.stderr
    events = [json.loads(line) for line in relaunch.stdout.splitlines()]
    replaced = [e for e in events if e["event"] == "Replaced"]
    assert [e["rank"] for e in replaced] == [0, 1, 2, 3] and all(e["ok"] for e in replaced)
    for e in replaced:
        text = Path(e["archive_path"]).read_text()
        assert "Application shutdown complete" in text or e["rank"] != 0
        assert e["archived_lines"] == len(text.splitlines()) > 20
    assert events[-1]["state"] == "ready"
    new_ids = {e["rank"]: e["container_id"] for e in events if e["event"] == "RankLaunched"}
    assert not set(new_ids.values()) & set(old_ids.values())


async def test_nccl_timeout_turns_that_rank_red_first(fresh_demo_cluster) -> None:
    fresh_demo_cluster.fault(2, "nccl-timeout")
    rec = Recorder()
    fleet, launcher = await _launch(fresh_demo_cluster, rec)
    try:
        assert await launcher.launch()
        assert await launcher.run_until(settled, timeout=120)
        verdict = launcher.timeline.compute_verdict()
        assert verdict.state == "down" and verdict.first_failed == 2
        f = launcher.timeline[2].failure
        assert f is not None and f.label.startswith("RoCE connection timed out")
        assert "ibv_modify_qp failed with 110" in f.cause and f.context[-1] == f.cause
        assert launcher.timeline[2].phase is Phase.DIST_INIT
    finally:
        await launcher.close()
        await fleet.close()


async def test_oom_at_load_is_red_with_oom_cause_and_exit(fresh_demo_cluster) -> None:
    fresh_demo_cluster.fault(1, "oom-at-load")
    rec = Recorder()
    fleet, launcher = await _launch(fresh_demo_cluster, rec)
    try:
        assert await launcher.launch()
        assert await launcher.run_until(lambda t: t[1].failure is not None and bool(t[1].failure.exit_reason),
                                        timeout=120)
        tl = launcher.timeline[1]
        assert tl.failure is not None and tl.failure.label == "out of memory"
        assert "CUDA out of memory" in tl.failure.cause
        assert "out-of-memory killer" in tl.failure.exit_reason
        assert tl.phase is Phase.LOADING and tl.progress is not None and tl.progress[0] < 48
        # named once every other rank's log is read up to rank 1's failure
        assert await launcher.run_until(lambda t: t.compute_verdict().first_failed is not None, timeout=60)
        assert launcher.timeline.compute_verdict().first_failed == 1
    finally:
        await launcher.close()
        await fleet.close()


async def test_crash_after_ready_turns_that_rank_red_and_cluster_down(fresh_demo_cluster) -> None:
    rec = Recorder()
    fleet, launcher = await _launch(fresh_demo_cluster, rec)
    try:
        assert await launcher.launch()
        assert await launcher.run_until(settled, timeout=120)
        assert launcher.timeline.verdict.state == "ready"
        fresh_demo_cluster.fault(3, "crash-after-ready")
        assert await launcher.run_until(lambda t: t.verdict.first_failed is not None, timeout=60)
        assert launcher.timeline.verdict.state == "down" and launcher.timeline.verdict.first_failed == 3
        f = launcher.timeline[3].failure
        assert f is not None and "illegal memory access" in f.cause
        assert len(f.context) > 3
    finally:
        await launcher.close()
        await fleet.close()


async def test_host_lost_mid_launch_is_marked_and_followed_again(fresh_demo_cluster) -> None:
    rec = Recorder()
    fleet, launcher = await _launch(fresh_demo_cluster, rec)
    try:
        assert await launcher.launch()
        fresh_demo_cluster.fault(2, "host-down")
        try:
            assert await launcher.run_until(lambda t: t[2].host_lost_since is not None, timeout=30)
            assert launcher.timeline.verdict.state == "host-lost"
            assert launcher.timeline[0].failure is None
        finally:
            fresh_demo_cluster.fault(2, "host-down", on=False)
        assert await launcher.run_until(settled, timeout=120)
        assert launcher.timeline.verdict.state == "ready"
        # the head can be serving before rank 2's follower (backing off while its host was silent) has
        # read what rank 2 logged meanwhile: wait for that catch-up, then every phase must be there
        assert await launcher.run_until(lambda t: t[2].phase is Phase.READY, timeout=60)
        assert [s.phase for s in launcher.timeline[2].spans] == WORKER_PHASES
        assert any(isinstance(e, HostChanged) and e.rank == 2 and not e.lost for e in rec.events)
    finally:
        await launcher.close()
        await fleet.close()


async def test_stop_touches_only_what_the_cockpit_started(fresh_demo_cluster) -> None:
    cfg = fresh_demo_cluster.config
    async with Fleet(cfg) as fleet:
        assert await fleet.wait_connected(20)
        await prepare_hosts(fleet, cfg)
        # a cluster launched by hand (not through the cockpit): rank 3 only is enough
        res = await fleet[3].run(L.launch_command(cfg, 3), timeout=60)
        assert res.ok, res.stderr
        ledger = Ledger(cfg)
        plan = await plan_stop(fleet, cfg, ledger)
        assert [i.action for i in plan] == ["skip"] * 4
        assert "not started by this cockpit" in plan.items[3].reason
        assert await execute_stop(fleet, plan, ledger) == []
        report = await cluster_status(fleet, cfg, ledger)
        assert report.ranks[3].owner == "by hand" and report.ranks[3].container is not None
        assert not any("docker stop" in rec.command for rec in fleet.command_log)


async def test_tui_launch_override_stop_relaunch_and_quit_asks(fresh_demo_cluster) -> None:
    """In the TUI: a launch runs the stale preflight first and needs the override while it fails; the
    pane follows the launch to READY, a stop to STOPPED, and R relaunches over the stopped containers
    (their logs archived first); q during a launch asks first."""
    import asyncio
    import time

    from cockpit.recipe.replace import default_archive_root
    from cockpit.tui.app import CockpitApp
    from cockpit.tui.dialogs import Confirm, ConfirmCommands
    from cockpit.tui.panes.launch import LaunchPane

    cfg = fresh_demo_cluster.config
    async with Fleet(cfg) as fleet:
        assert await fleet.wait_connected(20)
        await prepare_hosts(fleet, cfg)
    app = CockpitApp(cfg, fresh_demo_cluster.config_path)

    async def until(pilot, pred, timeout: float) -> None:  # type: ignore[no-untyped-def]
        t0 = time.monotonic()
        while not pred():
            await pilot.pause(0.2)
            if time.monotonic() - t0 > timeout:
                pane = app.query_one(LaunchPane)
                notice = pane.query_one("#launch-notice").render()
                ranks = [(r, t.condition, t.container_id) for r, t in pane.timeline.ranks.items()]
                raise AssertionError(f"timed out: {pane.timeline.compute_verdict()} — {notice} — {ranks}")

    async def dialog(pilot) -> ConfirmCommands:  # type: ignore[no-untyped-def]
        await until(pilot, lambda: isinstance(app.screen, ConfirmCommands), 60)
        assert isinstance(app.screen, ConfirmCommands)
        return app.screen

    fresh_demo_cluster.fault(1, "slow-clocks")   # a preflight failure that does not stop the engine
    async with app.run_test(size=(130, 44)) as pilot:
        await until(pilot, lambda: all(s.connected for s in app.fleet.statuses), 20)
        app.set_focus(None)
        app.action_show_pane("launch")
        await pilot.pause(0.3)
        pane = app.query_one(LaunchPane)
        assert app.focused is pane.keyboard_widget
        await until(pilot, lambda: pane.timeline.verdict.state == "idle" and app.ctx.watcher.looked(), 20)
        await pilot.press("d")
        await until(pilot, lambda: len(pane.dry) == 4, 30)
        assert all(d.ok for d in pane.dry.values()) and pane.blockers[0].rank is None   # only preflight
        await pilot.press("l")
        screen = await dialog(pilot)                # preflight ran first (none had): slow clocks on rank 1
        assert app.ctx.preflight is not None and ("clocks", 1) in app.ctx.preflight.failed
        assert screen.override_label is not None
        assert [line for _, line in screen.commands] == [L.launch_command(cfg, r).line for r in (3, 2, 1, 0)]
        await pilot.press("enter")                  # refused: the override is not ticked
        await pilot.pause()
        assert app.screen is screen
        fresh_demo_cluster.fault(1, "slow-clocks", on=False)
        await pilot.press("o", "enter")
        await until(pilot, lambda: pane.launching, 10)
        await pilot.press("q")                      # quitting mid-launch asks first
        await until(pilot, lambda: isinstance(app.screen, Confirm), 5)
        await pilot.press("n")
        await until(pilot, lambda: pane.timeline.verdict.state == "ready", 120)
        assert all(pane.timeline[r].ready for r in range(4))
        assert "READY" in str(app.query_one("#cluster-header").render())

        await pilot.press("s")
        screen = await dialog(pilot)
        assert screen.commands[0][1].startswith("docker stop ")
        await pilot.press("y")
        await until(pilot, lambda: pane.timeline.verdict.state == "stopped", 60)
        assert all(pane.timeline[r].condition == "stopped" for r in range(4))
        old = {r: pane.timeline[r].container_id for r in range(4)}

        await pilot.press("R")
        screen = await dialog(pilot)
        lines = [line for _, line in screen.commands]
        assert lines[:2] == [f"docker logs -t {old[0]}", f"docker rm {old[0]}"]
        assert lines[-4:] == [L.launch_command(cfg, r).line for r in (3, 2, 1, 0)]
        assert screen.override_label is not None     # the last preflight (a minute ago) still fails clocks
        await pilot.press("o", "y")
        await until(pilot, lambda: pane.timeline.verdict.state == "ready"
                    and pane.timeline[0].container_id not in (None, old[0]), 120)
        archived = sorted(default_archive_root().glob("*/*/rank-*.log"))
        assert [p.name for p in archived] == [f"rank-{r}.log" for r in range(4)]

        # a second cockpit stops the cluster: this one's pane and header show it within 2 s
        other = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "cockpit", "--config", str(fresh_demo_cluster.config_path), "stop", "--yes",
            stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.DEVNULL)
        assert await other.wait() == 0
        t0 = time.monotonic()
        await until(pilot, lambda: pane.timeline.verdict.state == "stopped"
                    and "stopped" in str(app.query_one("#cluster-header").render()), 2.0)
        assert time.monotonic() - t0 < 2.0
