"""The truth at every moment, on the demo cluster over SSH (issue 22): no verdict before a read, none from a
failed read, none that depends on how long the cluster has lived or on which stream was served first.

Each test uses a short `[engine] phase_limit_s` so that "a cluster older than every stuck limit" is a few
seconds old, and a watcher sampled at every change (or every 100 ms) so that a transient lie is caught.
"""

from __future__ import annotations

import asyncio
import json
import time

import pytest
from test_launch_demo import cli, prepare_hosts
from test_lifecycle_demo import streaming_answer

from cockpit.hosts import Fleet
from cockpit.recipe import launch as L
from cockpit.recipe.ledger import Ledger
from cockpit.recipe.phases import Phase
from cockpit.recipe.replace import execute_replace, plan_replace
from cockpit.recipe.stop import execute_stop, plan_stop
from cockpit.recipe.timeline import LaunchEvent
from cockpit.recipe.watch import ClusterWatcher, phase_limits

LIMIT_S = 3.0


@pytest.fixture(autouse=True)
def _state_dir(tmp_path, monkeypatch: pytest.MonkeyPatch) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))


def _short_limits(cluster) -> None:  # type: ignore[no-untyped-def]
    """Every boot phase may last LIMIT_S: a cluster a few seconds old is past every stuck limit."""
    text = cluster.config_path.read_text()
    assert "hang_after_s = 15\n" in text
    cluster.config_path.write_text(text.replace("hang_after_s = 15\n",
                                                f"hang_after_s = 15\nphase_limit_s = {LIMIT_S}\n"))


async def _launched(cluster) -> None:  # type: ignore[no-untyped-def]
    _short_limits(cluster)
    async with Fleet(cluster.config) as fleet:
        assert await fleet.wait_connected(20)
        await prepare_hosts(fleet, cluster.config)
    res = cli(cluster, "launch", "--yes", "--json", "--phase-limit", "120")   # the boot has its time
    assert res.returncode == 0, res.stdout[-2000:] + res.stderr


def _status(cluster) -> tuple[int, dict]:  # type: ignore[no-untyped-def]
    res = cli(cluster, "status", "--json")
    return res.returncode, json.loads(res.stdout)


class Sampler:
    """Everything a watcher's model said, at every change and every 100 ms: (verdict, conditions)."""

    def __init__(self, watcher: ClusterWatcher):
        self.watcher = watcher
        self.seen: list[tuple[str, int | None, str, tuple[str, ...]]] = []
        watcher.subscribe(self._event)
        self._task = asyncio.create_task(self._loop())

    def _event(self, _event: LaunchEvent) -> None:
        self.take()

    def take(self) -> None:
        t = self.watcher.timeline
        v = t.compute_verdict()
        self.seen.append((v.state, v.first_failed, v.summary, tuple(x.condition for x in t.ranks.values())))

    async def _loop(self) -> None:
        while True:
            self.take()
            await asyncio.sleep(0.1)

    async def close(self) -> None:
        self._task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await self._task

    def states(self) -> set[str]:
        return {s[0] for s in self.seen}

    def conditions(self) -> set[str]:
        return {c for s in self.seen for c in s[3]}


async def test_a_cluster_past_every_stuck_limit_is_ready_whenever_the_tick_runs(fresh_demo_cluster) -> None:
    """Item 1: the tick runs at every change of the model — also between a rank's container being seen
    and its log being read — and the cluster, older than every stuck limit, is READY, never stuck."""
    await _launched(fresh_demo_cluster)
    await asyncio.sleep(LIMIT_S + 2)
    cfg = fresh_demo_cluster.config
    async with Fleet(cfg) as fleet:
        assert await fleet.wait_connected(20)
        watcher = ClusterWatcher(fleet, cfg)
        watcher.subscribe(lambda _e: watcher.tick())      # a tick at every moment the model changes
        sampler = Sampler(watcher)
        async with watcher:
            assert await watcher.first_look(30)
            await asyncio.sleep(LIMIT_S + 1)
        await sampler.close()
    assert sampler.states() <= {"unknown", "ready"}, sampler.states()
    assert not sampler.conditions() & {"failed", "followed"}
    assert sampler.seen[-1][0] == "ready"
    for _ in range(3):
        code, report = _status(fresh_demo_cluster)
        assert code == 0 and report["verdict"]["state"] == "ready", report["verdict"]
        assert all(r["failure"] is None for r in report["ranks"])


async def test_a_docker_outage_is_unknown_then_the_rank_is_read_again(fresh_demo_cluster) -> None:
    """Items 2 and 3: docker not answering on rank 1 is `unknown` (never "no container", never READY,
    never a reset rank); when it answers again the rank is what it was, and the stuck limit it crossed
    meanwhile judges nothing."""
    await _launched(fresh_demo_cluster)
    cfg = fresh_demo_cluster.config
    async with Fleet(cfg) as fleet:
        assert await fleet.wait_connected(20)
        watcher = ClusterWatcher(fleet, cfg)
        async with watcher:
            assert await watcher.first_look(30)
            assert watcher.timeline.verdict.state == "ready"
            sampler = Sampler(watcher)
            fresh_demo_cluster.fault(1, "docker-down")
            try:
                t0 = time.monotonic()
                while watcher.timeline[1].condition != "unknown" and time.monotonic() - t0 < 20:
                    await asyncio.sleep(0.1)
                assert "docker not answering" in watcher.timeline[1].unknown
                v = watcher.timeline.verdict
                assert v.state == "unknown" and v.code == "state-unknown", v
                code, report = _status(fresh_demo_cluster)
                assert code == 1 and report["verdict"]["state"] == "unknown", report["verdict"]
                assert report["verdict"]["code"] == "state-unknown"
                assert report["ranks"][1]["condition"] == "unknown"
                assert "Cannot connect to the Docker daemon" in report["ranks"][1]["detail"]
                await asyncio.sleep(LIMIT_S + 1)                  # past the stuck limit while blind
            finally:
                fresh_demo_cluster.fault(1, "docker-down", on=False)
            t0 = time.monotonic()
            while watcher.timeline.verdict.state != "ready" and time.monotonic() - t0 < 30:
                await asyncio.sleep(0.1)
            await asyncio.sleep(LIMIT_S + 1)
            await sampler.close()
            assert watcher.timeline.verdict.state == "ready"
            assert watcher.timeline[1].condition == "ready" and watcher.timeline[1].failure is None
    assert sampler.states() <= {"ready", "unknown"}, sampler.states()
    assert not sampler.conditions() & {"failed", "followed", "none"}


async def test_stats_once_reads_the_engine_twice_for_its_rates(fresh_demo_cluster) -> None:
    """Item 4: on a serving cluster `stats --once` has the engine, with rates (two /metrics reads)."""
    await _launched(fresh_demo_cluster)
    for _ in range(3):
        res = cli(fresh_demo_cluster, "stats", "--once", "--json")
        assert res.returncode == 0, res.stdout[-2000:] + res.stderr
        engine = json.loads(res.stdout)["engine"]
        assert engine is not None and engine["interval_s"] is not None, engine


async def test_the_rank_that_failed_first_is_named_when_its_host_answers_late(fresh_demo_cluster) -> None:
    """Item 5: rank 3 crashes after ready while its docker answers 6 s late (a busy host): the others'
    reports arrive first, yet no verdict ever names another rank, and the one named is rank 3."""
    _short_limits(fresh_demo_cluster)
    cfg = fresh_demo_cluster.config
    async with Fleet(cfg) as fleet:
        assert await fleet.wait_connected(20)
        await prepare_hosts(fleet, cfg)
    fresh_demo_cluster.fault(3, "crash-after-ready")
    (fresh_demo_cluster.root(3) / "faults" / "slow-docker").write_text('{"delay_s": 6}')
    res = cli(fresh_demo_cluster, "launch", "--yes", "--json", "--phase-limit", "120", timeout=300)
    events = [json.loads(line) for line in res.stdout.splitlines()]
    named = [e["first_failed"] for e in events if e["event"] == "VerdictChanged" and e["state"] == "down"
             and e["first_failed"] is not None]
    t0 = time.monotonic()
    while True:
        _, report = _status(fresh_demo_cluster)
        if report["verdict"]["first_failed"] is not None or time.monotonic() - t0 > 90:
            break
        time.sleep(1)
    assert report["verdict"]["first_failed"] == 3, report["verdict"]
    assert set(named) <= {3}, named
    failed = [e for e in events if e["event"] == "RankFailed"]
    assert all(e["secondary"] for e in failed if e["rank"] != 3), failed


async def test_stop_and_relaunch_tell_no_transient_lie(fresh_demo_cluster) -> None:
    """Item 6: sampled every 100 ms through the cockpit's own stop and relaunch: never DOWN, never a rank
    failed or followed, never READY once every rank stopped."""
    await _launched(fresh_demo_cluster)
    cfg = fresh_demo_cluster.config
    ledger = Ledger(cfg)
    async with Fleet(cfg) as fleet:
        assert await fleet.wait_connected(20)
        watcher = ClusterWatcher(fleet, cfg, ledger=ledger)
        async with watcher:
            assert await watcher.first_look(30)
            sampler = Sampler(watcher)
            plan = await plan_stop(fleet, cfg, ledger)
            outcomes = await execute_stop(fleet, plan, ledger, noted=watcher.expect_stop)
            assert all(o.ok for o in outcomes)
            t0 = time.monotonic()
            while watcher.timeline.verdict.state != "stopped" and time.monotonic() - t0 < 20:
                await asyncio.sleep(0.1)
            stop_seen = list(sampler.seen)
            assert watcher.timeline.verdict.state == "stopped"
            after_stop = len(sampler.seen)
            items = await plan_replace(fleet, cfg, ledger)
            assert [i.action for i in items] == ["replace"] * 4, items
            assert all(o.ok for o in await execute_replace(fleet, cfg, items, ledger))
            # the boot has its time, as `launch --phase-limit 120` gives it (a loaded machine boots slowly)
            launcher = L.Launcher(fleet, cfg, ledger=ledger, watcher=watcher, stuck_limits=phase_limits(120))
            assert await launcher.launch()
            assert await launcher.run_until(lambda t: t.verdict.state == "ready", timeout=120)
            await sampler.close()
    states = [s[0] for s in stop_seen]
    assert "down" not in states and not {c for s in stop_seen for c in s[3]} & {"failed", "followed"}
    first_all_stopped = next(i for i, s in enumerate(stop_seen) if set(s[3]) == {"stopped"})
    assert {s[0] for s in stop_seen[first_all_stopped:]} == {"stopped"}
    relaunch = sampler.seen[after_stop:]
    assert not {s[0] for s in relaunch} & {"down", "incomplete", "hung"}, {s[2] for s in relaunch}
    assert not {c for s in relaunch for c in s[3]} & {"failed", "followed"}


async def test_an_aborted_launch_is_incomplete_not_launching_forever(fresh_demo_cluster) -> None:
    """Item 6: a launch aborted by a host lost during `docker run`, then the host back: `status` says the
    launch is incomplete (exit 1, with the remedy), not "launching" forever."""
    _short_limits(fresh_demo_cluster)
    cfg = fresh_demo_cluster.config
    async with Fleet(cfg) as fleet:
        assert await fleet.wait_connected(20)
        await prepare_hosts(fleet, cfg)
    fresh_demo_cluster.fault(2, "lost-during-run")
    res = cli(fresh_demo_cluster, "launch", "--yes", "--json")
    assert res.returncode != 0
    fresh_demo_cluster.fault(2, "host-down", on=False)
    t0 = time.monotonic()
    while True:
        code, report = _status(fresh_demo_cluster)
        if report["verdict"]["state"] not in ("unknown", "host-lost") or time.monotonic() - t0 > 60:
            break
        time.sleep(1)
    v = report["verdict"]
    assert code == 1 and v["state"] == "incomplete" and v["code"] == "launch-incomplete", v
    assert "rank 0, 1 " in v["summary"] and "stop" in v["remedy"] and "launch again" in v["remedy"]


async def test_a_failing_watcher_loop_says_so_and_comes_back(fresh_demo_cluster, monkeypatch) -> None:
    """Issue 25, item 2: a bug in any of the watcher's loops (a rank's look, the tick, the API probe) is
    shown in the model — never the last state as if current — and the loop starts again by itself."""
    from cockpit.recipe import watch as W

    await _launched(fresh_demo_cluster)
    broken = {"frame": 1, "tick": 1, "probe": 1}
    real_frame, real_tick, real_probe = W.read_inspect_frame, W.ClusterWatcher.tick, W.ClusterWatcher.probe

    def frame(text, status):  # type: ignore[no-untyped-def]
        if broken["frame"] and "ds41_r37" in text and '"/ds41_r37"' in text:
            broken["frame"] -= 1
            raise RuntimeError("injected parser bug")
        return real_frame(text, status)

    def tick(self):  # type: ignore[no-untyped-def]
        if broken["tick"] and broken["frame"] == 0 and self.timeline.verdict.state == "ready":
            broken["tick"] -= 1
            raise OSError("injected ledger error")
        return real_tick(self)

    async def probe(self):  # type: ignore[no-untyped-def]
        if broken["probe"] and broken["tick"] == 0 and self.timeline.verdict.state == "ready":
            broken["probe"] -= 1
            raise ValueError("injected probe bug")
        return await real_probe(self)

    monkeypatch.setattr(W, "read_inspect_frame", frame)
    monkeypatch.setattr(W.ClusterWatcher, "tick", tick)
    monkeypatch.setattr(W.ClusterWatcher, "probe", probe)
    cfg = fresh_demo_cluster.config
    async with Fleet(cfg) as fleet:
        assert await fleet.wait_connected(20)
        watcher = ClusterWatcher(fleet, cfg)
        sampler = Sampler(watcher)
        async with watcher:
            t0 = time.monotonic()
            while any(broken.values()) or watcher.timeline.verdict.state != "ready":
                assert time.monotonic() - t0 < 90, (broken, watcher.timeline.verdict)
                await asyncio.sleep(0.1)
        await sampler.close()
    summaries = " | ".join(s[2] for s in sampler.seen)
    assert "its watcher failed: RuntimeError: injected parser bug" in summaries
    assert "the tick failed: OSError: injected ledger error" in summaries
    assert "the API probe failed: ValueError: injected probe bug" in summaries
    assert not {s[0] for s in sampler.seen} & {"down", "incomplete"}


async def test_a_head_judged_stuck_is_still_probed_and_ready_when_its_api_answers(fresh_demo_cluster) -> None:
    """Found by perf/truth.py at load 15: on a starved machine the head stayed in 'API starting' past its
    limit and was judged stuck; the watcher then stopped probing the API (as for a head that really failed),
    so the judgement was never withdrawn: DOWN for good on a cluster that came up serving."""
    await _launched(fresh_demo_cluster)
    cfg = fresh_demo_cluster.config
    async with Fleet(cfg) as fleet:
        assert await fleet.wait_connected(20)
        watcher = ClusterWatcher(fleet, cfg, ledger=Ledger(cfg))
        head = watcher.timeline[0]
        head.pending = ""
        now = time.time()
        head.feed_line("(APIServer pid=1) INFO [entry.py:140] Starting vLLM server on http://0.0.0.0:8000",
                       now - 60)
        assert head.phase is Phase.API_START
        head.check_stuck(now, phase_limits(LIMIT_S))
        assert head.failure is not None and head.failure.source == "stuck"
        await watcher.probe()          # the API answers: the head moved on, it was not stuck
        assert head.failure is None and head.ready, (head.failure, head.phase)
        await watcher.close()


async def test_a_launch_by_another_cockpit_is_read_on_every_rank(fresh_demo_cluster) -> None:
    """A TUI open on a cluster with no container while another cockpit (the CLI) launches it: every rank
    is read and judged (seen in tmux: ranks left "UNKNOWN: reading its log" for good on a READY boot)."""
    cluster = fresh_demo_cluster
    _short_limits(cluster)
    cfg = cluster.config
    async with Fleet(cfg) as fleet:
        assert await fleet.wait_connected(20)
        await prepare_hosts(fleet, cfg)
        watcher = ClusterWatcher(fleet, cfg, ledger=Ledger(cfg), stuck_limits=phase_limits(300))
        async with watcher:
            assert await watcher.first_look(30)
            assert watcher.timeline.verdict.state == "idle", watcher.timeline.verdict
            res = await asyncio.to_thread(cli, cluster, "launch", "--yes", "--json", "--phase-limit", "300")
            assert res.returncode == 0, res.stdout[-2000:] + res.stderr
            t0 = time.monotonic()
            while watcher.timeline.verdict.state != "ready" and time.monotonic() - t0 < 60:
                await asyncio.sleep(0.2)
            pending = {r: t.pending for r, t in watcher.timeline.ranks.items()}
            assert watcher.timeline.verdict.state == "ready", (watcher.timeline.verdict, pending)


async def test_a_status_taken_as_the_engine_hangs_never_says_ready(fresh_demo_cluster) -> None:
    """Found by perf/truth.py on a quiet machine: a one-off `status` right after the engine hung said READY.
    Its one /metrics sample showed a request running and the head's last stats line still had tokens (the
    hang was inside the line's interval): "serving" with no evidence that tokens still came. A look that has
    not seen the counters move must keep looking, to serving (they grow) or hung (flat for hang_after_s),
    and says unknown if it cannot tell, never READY. With the answer flowing, it is READY."""
    cluster = fresh_demo_cluster
    await _launched(cluster)
    try:
        async with streaming_answer(cluster, 120):
            code, report = await asyncio.to_thread(_status, cluster)       # tokens flowing: serving
            assert code == 0 and report["verdict"]["state"] == "ready", report["verdict"]
            assert report["engine"] == "serving", report
            cluster.fault(0, "hang")
            await asyncio.sleep(1.0)
            code, report = await asyncio.to_thread(_status, cluster)   # 1 s into the hang: watched to the end
            assert report["verdict"]["state"] == "hung" and code == 1, report["verdict"]
            code, report = await asyncio.to_thread(_status, cluster)   # long hung: at once
            assert report["verdict"]["state"] == "hung" and code == 1, report["verdict"]
    finally:
        cluster.fault(0, "hang", on=False)
