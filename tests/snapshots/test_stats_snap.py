"""Snapshots of the Stats pane: a healthy cluster, one rank alerting (clock latched on rank 2), one rank in
detail, and a stale host. The model is filled directly, as the sampler and the alert rules would."""

from __future__ import annotations

import time

from cockpit.telemetry.cluster_stats import Alert, ClusterStats, MemoryStats, RankStats
from cockpit.telemetry.engine_stats import EngineStatsReading
from cockpit.telemetry.gpu import GpuReading
from cockpit.telemetry.host_sample import GpuApp
from cockpit.telemetry.rdma import PortStats
from cockpit.tui.app import CockpitApp
from cockpit.tui.panes.stats import StatsPane

SIZE = (160, 48)
GIB = 1 << 30
# fixed wall-clock moments, so ages and HH:MM:SS read the same in every run
NOW = time.mktime((2026, 3, 14, 12, 0, 0, 0, 0, -1))
BEGAN = NOW - 42


def healthy_rank(rank: int, now: float, *, sm: int = 2405, util: int = 97) -> RankStats:
    gpu = GpuReading(index=0, name="NVIDIA GB10", util=util, sm=sm, max_sm=3003, power_w=41.5 + rank,
                     temp_c=61 + rank, pstate="P0", memory_asked=True)
    memory = MemoryStats("unified", int(119.7 * GIB), int((24.5 - rank) * GIB), int(88.25 * GIB))
    ports = (PortStats("rocep1s0f1", 1, "ACTIVE", True, 12.5 + rank / 10, 12.1, {"np_cnp_sent": 3 + rank}),
             PortStats("roceP2p1s0f1", 1, "ACTIVE", True, 12.4, 12.0))
    apps = (GpuApp(4100 + rank, "VLLM::Worker", None),)
    return RankStats(rank, "sampling", None, gpu, now - 0.4, apps, memory, ports, now - 0.4)


def fill(stats: ClusterStats, now: float = NOW, **per_rank: RankStats) -> None:
    """Every rank healthy unless given (`r2=RankStats(...)`), 60 history points, a serving engine."""
    for rank in stats.ranks:
        stats.put(per_rank.get(f"r{rank}") or healthy_rank(rank, now))
    for i in range(60):
        at = now - 60 + i
        for rank in stats.ranks:
            h = stats.history[rank]
            h.add(at, {"util": 40 + (i * 7 + rank * 11) % 60, "sm_mhz": 2300 + (i * 13) % 100,
                       "power_w": 30 + (i * 3) % 15, "temp_c": 55 + i % 8,
                       "mem_available_gib": 24 - (i % 5) / 2, "tx_gbps": 10 + (i * 5) % 5,
                       "rx_gbps": 10 + (i * 3) % 5})
        stats.engine_history.add(at, {"gen_tps": 200 + (i * 17) % 80, "kv_pct": 30 + (i * 3) % 40})
    stats.engine = EngineStatsReading(
        at=now - 0.5, interval_s=1.0, window_s=60.0, running=3, waiting=1, kv_cache_usage=0.412,
        generation_tokens_per_s=245.3, prompt_tokens_per_s=1021.0, prefix_cache_hit_rate=0.62,
        spec_acceptance_rate=0.71, spec_mean_acceptance_length=2.84, ttft_p50_s=0.118, ttft_p90_s=0.342,
        ttft_p99_s=0.561, itl_p50_s=0.018, itl_p90_s=0.022, itl_p99_s=0.035, preemptions=0.0,
        request_success={"stop": 12.0, "length": 1.0})
    stats.version += 1


def latched(rank: int) -> tuple[RankStats, Alert]:
    s = healthy_rank(rank, NOW, sm=820)
    alert = Alert("clock-latched", rank, BEGAN,
                  "SM clock latched: under load at 820 MHz, below half of its 3003 MHz maximum",
                  "reboot the host (a GB10 SM clock latch clears only with a power cycle)")
    return s, alert


def stale_host(rank: int) -> tuple[RankStats, Alert]:
    s = healthy_rank(rank, NOW - 14)
    alert = Alert("no-readings", rank, NOW - 10, "no readings for 14 s",
                  "the host is connected but its sampler is silent: see pane 1 (Hosts)", "warn")
    return s, alert


def frozen(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """The pane's clock reads NOW (ages and stale judgement stay fixed)."""
    monkeypatch.setattr("cockpit.tui.panes.stats.time.time", lambda: NOW)


async def show(app: CockpitApp, pilot, *, detail: int | None = None) -> None:  # type: ignore[no-untyped-def]
    app.action_show_pane("stats")
    await pilot.pause()
    pane = app.query_one(StatsPane)
    if detail is not None:
        pane.selected = detail
        pane.action_detail()
    app.refresh_header()
    pane.refresh_view()
    await pilot.pause()


def test_cluster_healthy(snap_compare, fixed_config, monkeypatch) -> None:
    frozen(monkeypatch)
    app = CockpitApp(fixed_config, connect=False)

    async def before(pilot) -> None:  # type: ignore[no-untyped-def]
        fill(app.ctx.monitor.stats)
        await show(app, pilot)

    assert snap_compare(app, terminal_size=SIZE, run_before=before)


def test_clock_latched_on_rank_2(snap_compare, fixed_config, monkeypatch) -> None:
    frozen(monkeypatch)
    app = CockpitApp(fixed_config, connect=False)

    async def before(pilot) -> None:  # type: ignore[no-untyped-def]
        s, alert = latched(2)
        fill(app.ctx.monitor.stats, r2=s)
        app.ctx.monitor.stats.set_alerts((alert,))
        await show(app, pilot)

    assert snap_compare(app, terminal_size=SIZE, run_before=before)


def test_rank_detail(snap_compare, fixed_config, monkeypatch) -> None:
    frozen(monkeypatch)
    app = CockpitApp(fixed_config, connect=False)

    # the sampler's command line is the core's (tests/tui checks the pane shows it as is): a fixed one here,
    # so a change to the sampler does not move this picture
    monkeypatch.setattr(app.ctx.monitor.sampler, "command",
                        lambda rank: f"exec bash -c 'sampler of rank {rank}'")
    app.ctx.monitor.sampler.starts[2] = 1

    async def before(pilot) -> None:  # type: ignore[no-untyped-def]
        s, alert = latched(2)
        fill(app.ctx.monitor.stats, r2=s)
        app.ctx.monitor.stats.set_alerts((alert,))
        await show(app, pilot, detail=2)

    assert snap_compare(app, terminal_size=SIZE, run_before=before)


def test_stale_host(snap_compare, fixed_config, monkeypatch) -> None:
    frozen(monkeypatch)
    app = CockpitApp(fixed_config, connect=False)

    async def before(pilot) -> None:  # type: ignore[no-untyped-def]
        s, alert = stale_host(1)
        down = RankStats(3, "host down", "connection lost (no keepalive answer)")
        fill(app.ctx.monitor.stats, r1=s, r3=down)
        app.ctx.monitor.stats.set_alerts((alert,))
        await show(app, pilot)

    assert snap_compare(app, terminal_size=SIZE, run_before=before)


async def scene(app: CockpitApp, pilot) -> None:  # type: ignore[no-untyped-def]
    """The matrix's Stats state: rank 2's clock latched, rank 1 three hours silent, the rest healthy. The
    fresh readings are stamped a minute ahead, so their age reads 0 however long the test takes."""
    now = time.time() + 60
    s2 = healthy_rank(2, now, sm=820)
    s1 = healthy_rank(1, now - 3 * 3600)
    fill(app.ctx.monitor.stats, now, r1=s1, r2=s2)
    app.ctx.monitor.stats.set_alerts((latched(2)[1],))
    await show(app, pilot)


def test_cluster_healthy_at_80x24_in_the_light_theme(snap_compare, fixed_config, monkeypatch) -> None:
    """The narrow rank table and the engine block drawn by the Stats pane's blocks (`widgets/live.py`,
    rendered once each) in the light theme at 80×24. (A resize between two draws is `tests/tui/
    test_live_static.py`'s: the lines kept for one width are rendered anew at another.)"""
    frozen(monkeypatch)
    app = CockpitApp(fixed_config, connect=False)

    async def before(pilot) -> None:  # type: ignore[no-untyped-def]
        app.theme = "textual-light"
        await pilot.pause()
        fill(app.ctx.monitor.stats)
        await show(app, pilot)

    assert snap_compare(app, terminal_size=(80, 24), run_before=before)
