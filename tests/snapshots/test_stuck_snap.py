"""Snapshots of "which rank is stuck": the Launch pane's block under the timeline (160x48 with the stacks
read, 80x24 compact) and the Stats pane with the odd rank highlighted, for a hung engine whose rank 2 sits
idle at 0 % while the others spin. The models are filled directly, as the watcher and the sampler would."""

from __future__ import annotations

from dataclasses import replace

from test_launch_snap import T0, _serving, app_with, feed
from test_stats_snap import fill, healthy_rank

from cockpit.api.liveness import REMEDY_HUNG, Liveness
from cockpit.recipe.stuck import RankStacks
from cockpit.telemetry.cluster_stats import ClusterStats, RankStats
from cockpit.tui.app import CockpitApp
from cockpit.tui.panes.launch import LaunchPane
from cockpit.tui.panes.stats import StatsPane

NOW = T0 + 120          # the launch pane's clock in these snapshots


def _still(s: RankStats) -> RankStats:
    """No RDMA traffic: a deadlocked engine moves no tensors."""
    return replace(s, ports=tuple(replace(p, tx_gbps=0.0, rx_gbps=0.0, changes={}) for p in s.ports))


def _deadlocked(stats: ClusterStats, now: float) -> None:
    fill(stats, now, r0=_still(healthy_rank(0, now, util=100)), r1=_still(healthy_rank(1, now, util=99)),
         r2=_still(healthy_rank(2, now, sm=812, util=0)), r3=_still(healthy_rank(3, now, util=100)))


def _hung(pane: LaunchPane) -> None:
    _serving(pane)
    pane.timeline.mark_liveness(Liveness(
        "hung", T0 + 20, "3 running, 0 waiting, but vllm:generation_tokens_total has not grown for 95 s "
        "(threshold 90 s)", REMEDY_HUNG))
    _deadlocked(pane.ctx.monitor.stats, NOW)
    feed(pane, [])


MAIN = "pid 1 (/usr/bin/python3.12 /usr/local/bin/vllm serve /…): idle in join (popen_fork.py:27)"
WAITS = "idle in acquire_read (vllm/distributed/device_communicators/shm_broadcast.py:447)"
SPINS = "active in all_reduce (torch/distributed/distributed_c10d.py:2806)"
STACKS = {r: RankStacks(r, "read", "", (MAIN, f"pid 131 (VLLM::Worker_TP{r}): {WAITS if r == 2 else SPINS}"))
          for r in range(4)}
STACKS[3] = RankStacks(3, "no-py-spy", detail="py-spy not in the image")


def test_launch_block_160x48_with_stacks(snap_compare, fixed_config) -> None:
    def setup(pane: LaunchPane) -> None:
        _hung(pane)
        pane._stacks = dict(STACKS)      # what the `k` key's read brought (the core's RankStacks)

    app, before = app_with(fixed_config, setup, dry=False)
    assert snap_compare(app, terminal_size=(160, 48), run_before=before)


def test_launch_block_80x24_compact(snap_compare, fixed_config) -> None:
    app, before = app_with(fixed_config, _hung, dry=False)
    assert snap_compare(app, terminal_size=(80, 24), run_before=before)


def test_stats_pane_marks_rank_2(snap_compare, fixed_config, monkeypatch) -> None:
    monkeypatch.setattr("cockpit.tui.panes.stats.time.time", lambda: NOW)
    app = CockpitApp(fixed_config, connect=False)

    async def before(pilot) -> None:  # type: ignore[no-untyped-def]
        await pilot.pause()
        tl = app.ctx.watcher.timeline
        for r in tl.ranks.values():
            r.pending = ""
        pane = app.query_one(LaunchPane)
        _serving(pane)
        tl.mark_liveness(Liveness("hung", T0 + 20, "hung for 95 s", REMEDY_HUNG))
        feed(pane, [])
        _deadlocked(app.ctx.monitor.stats, NOW)
        app.action_show_pane("stats")
        await pilot.pause()
        app.query_one(StatsPane).refresh_view()
        app.refresh_header()      # the model was filled directly: no event told the header
        await pilot.pause()

    assert snap_compare(app, terminal_size=(160, 48), run_before=before)
