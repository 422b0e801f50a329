"""The Stats pane renders the stats model as it is: figures, unknowns as "–", stale ranks dimmed with
their age, cells of an active alert in its role, the rank detail, and the header's alert count."""

from __future__ import annotations

import io
import math
import re
import time

from rich.console import Console
from textual.widgets import Static

from cockpit.telemetry.cluster_stats import Alert, ClusterStats, MemoryStats, RankStats
from cockpit.telemetry.engine_stats import EngineStatsReading
from cockpit.telemetry.gpu import GpuReading
from cockpit.telemetry.host_sample import GpuApp
from cockpit.telemetry.rdma import PortStats
from cockpit.tui.app import CockpitApp
from cockpit.tui.header import ClusterHeader, health_line
from cockpit.tui.panes.stats import StatsPane
from cockpit.tui.widgets.sparkline import spark_chars
from cockpit.tui.widgets.stats_view import cell_roles, memory_text, rank_rows, rank_table

GIB = 1 << 30


def rank(r: int, now: float, *, sm: int = 2405, memory: MemoryStats | None = None) -> RankStats:
    gpu = GpuReading(index=0, name="NVIDIA GB10", util=90 + r, sm=sm, max_sm=3003, power_w=40.5 + r,
                     temp_c=60 + r, pstate="P0", memory_asked=True)
    mem = memory or MemoryStats("unified", int(119.7 * GIB), int((20.5 + r) * GIB), int(88 * GIB))
    grew = {"out_of_sequence": 7} if r == 3 else {}
    ports = (PortStats("rocep1s0f1", 1, "ACTIVE", True, 10.0 + r, 9.0, grew),)
    apps = (GpuApp(4000 + r, "VLLM::Worker", 1234),)
    return RankStats(r, "sampling", None, gpu, now, apps, mem, ports, now)


def fill(stats: ClusterStats, now: float, **over: RankStats) -> None:
    for r in stats.ranks:
        stats.put(over.get(f"r{r}") or rank(r, now))
        stats.record(r, now)


def cells(pane: StatsPane, selector: str) -> str:
    """What a part of the pane shows, as plain text (wide enough that nothing wraps)."""
    console = Console(width=400, record=True, file=io.StringIO())
    console.print(pane.query_one(selector, Static).content)
    return console.export_text()


def table_styles(stats: ClusterStats, now: float, width: int = 160) -> dict[tuple[int, str], str]:
    """(row, column header) → the style of that cell's text."""
    columns, rows = rank_rows(stats, now, width)
    out = {}
    for row, cells_ in enumerate(rows):
        for column, value in zip(columns, cells_, strict=True):
            spans = str(value.spans[-1].style) if value.spans else ""
            out[(row, column.header)] = str(value.style) or spans
    return out


async def shown(app: CockpitApp, pilot) -> StatsPane:  # type: ignore[no-untyped-def]
    app.action_show_pane("stats")
    await pilot.pause()
    pane = app.query_one(StatsPane)
    pane.refresh_view()
    await pilot.pause()
    return pane


async def test_pane_renders_model_values_and_unknowns(fixed_config) -> None:
    app = CockpitApp(fixed_config, connect=False)
    async with app.run_test(size=(160, 48)) as pilot:
        now = time.time()
        stats = app.ctx.monitor.stats
        discrete = MemoryStats("discrete", None, None, None, gpu_total_mib=143771, gpu_used_mib=70123)
        fill(stats, now, r1=rank(1, now, memory=discrete))
        stats.set_engine(EngineStatsReading(at=now, running=3, waiting=None, kv_cache_usage=0.5,
                                            generation_tokens_per_s=245.3, ttft_p50_s=0.118, restarted=True))
        pane = await shown(app, pilot)
        table = cells(pane, "#stats-ranks")
        assert "2405/3003" in table and "40.5" in table and "P0" in table
        assert "20.5/120 GiB eng 88.0 unified" in table          # unified: MemAvailable/MemTotal, engine
        assert "GPU 70123/143771 MiB discrete" in table           # the model's kind, never assumed
        assert "↑10.0 ↓9.0 Gb/s 1/1 ACTIVE" in table and "out_of_sequence +7" in table
        engine = cells(pane, "#stats-engine")
        assert "running 3" in engine and "waiting –" in engine and "KV cache 50.0 %" in engine
        assert "gen 245.3 tok/s" in engine and "prompt – tok/s" in engine and "118/–/– ms" in engine
        assert "restarted" in engine
        assert "no active alerts" in cells(pane, "#stats-alerts")


def test_memory_kind_unknown_is_not_guessed() -> None:
    assert memory_text(MemoryStats(None, None, None, None)) == "–"
    assert memory_text(None) == "–"


async def test_stale_rank_is_dimmed_with_its_age(fixed_config) -> None:
    app = CockpitApp(fixed_config, connect=False)
    async with app.run_test(size=(160, 48)) as pilot:
        now = time.time()
        stats = app.ctx.monitor.stats
        fill(stats, now, r1=rank(1, now - 14), r3=RankStats(3, "host down", "connection lost"))
        pane = await shown(app, pilot)
        table = cells(pane, "#stats-ranks")
        age = re.search(r"no readings for (\d+) s", table)       # the pane ages it by its own clock:
        assert age and 14 <= int(age.group(1)) <= 14 + math.ceil(time.time() - now)  # later when loaded
        assert "host down: connection" in table
        styles = table_styles(stats, now)
        assert styles[(1, "SM MHz")] == "stale" and styles[(1, "memory")] == "stale"
        assert styles[(0, "SM MHz")] == "" and styles[(3, "sampler")] == "stale"
        _, narrow = rank_rows(stats, now, 80)
        assert "stale 14 s" in [row[1].plain for row in narrow]


async def test_alert_highlights_its_cell_in_its_role(fixed_config) -> None:
    app = CockpitApp(fixed_config, connect=False)
    async with app.run_test(size=(160, 48)) as pilot:
        now = time.time()
        stats = app.ctx.monitor.stats
        fill(stats, now, r2=rank(2, now, sm=820))
        stats.set_alerts((Alert("clock-latched", 2, now - 5, "SM clock latched: 820 MHz", "reboot"),
                          Alert("memory-low", 0, now - 3, "MemAvailable 3.0 GiB", "free memory", "warn"),
                          Alert("rdma-errors", 3, now, "rocep1s0f1/1: out_of_sequence +7", "check the link")))
        styles = table_styles(stats, now)
        assert styles[(2, "SM MHz")] == "fail" and styles[(2, "memory")] == ""
        assert styles[(0, "memory")] == "warn" and styles[(0, "SM MHz")] == ""
        assert styles[(3, "RDMA")] == "fail" and styles[(1, "RDMA")] == ""
        assert cell_roles(stats.alerts, 1) == {}
        pane = await shown(app, pilot)
        listed = cells(pane, "#stats-alerts")
        began = time.strftime("%H:%M:%S", time.localtime(now - 5))
        assert f"{began} rank 2 clock-latched: SM clock latched: 820 MHz" in listed
        assert "remedy: reboot" in listed


async def test_detail_toggles_and_shows_the_sampler_command(fixed_config) -> None:
    app = CockpitApp(fixed_config, connect=False)
    async with app.run_test(size=(160, 48)) as pilot:
        now = time.time()
        fill(app.ctx.monitor.stats, now)
        pane = await shown(app, pilot)
        await pilot.press("down", "down")
        await pilot.press("enter")
        await pilot.pause()
        assert pane.detail and pane.selected == 2
        detail = pane.query_one("#stats-detail", Static)
        assert detail.display and not pane.query_one("#stats-ranks", Static).display
        text = cells(pane, "#stats-detail")
        assert "rank 2" in text and "pid 4002" in text and "VLLM::Worker" in text and "1234 MiB" in text
        assert "rocep1s0f1/1 ACTIVE" in text and "MemAvailable" in text and "RDMA rx" in text
        assert "channels started: 0" in text
        shown_command = detail.content.renderables[-1]              # the exact line, unwrapped and whole
        assert shown_command.plain == app.ctx.monitor.sampler.command(2)
        assert "nvidia-smi" in shown_command.plain
        assert pane.key_for("back") == "esc" and pane.key_for("detail") == ""
        await pilot.press("escape")
        await pilot.pause()
        assert not pane.detail and pane.query_one("#stats-ranks", Static).display


async def test_header_counts_active_alerts(fixed_config) -> None:
    app = CockpitApp(fixed_config, connect=False)
    async with app.run_test(size=(160, 48)) as pilot:
        stats = app.ctx.monitor.stats
        header = app.query_one(ClusterHeader)
        app.refresh_header()
        await pilot.pause()
        assert "alert" not in header.render().plain
        stats.set_alerts((Alert("memory-low", 0, 1.0, "low", "free", "warn"),
                          Alert("rdma-errors", 3, 2.0, "errs", "check")))
        app.refresh_header()
        await pilot.pause()
        line = header.render()
        assert "⚠ 2 alerts" in line.plain
        assert any(str(s.style) == "fail" for s in line.spans if "⚠" in line.plain[s.start:s.end])
    warn_only = (Alert("memory-low", 0, 1.0, "low", "free", "warn"),)
    compact = health_line("c", [], compact=True, alerts=warn_only)
    assert compact.plain.endswith("⚠ 1") and str(compact.spans[-1].style) == "warn"


def test_sparkline_shows_unknown_as_a_gap() -> None:
    assert spark_chars([0, None, 100], 3, lo=0, hi=100) == "▁ █"
    assert spark_chars([5.0], 4) == "   ▁"
    assert spark_chars([None, None], 2) == "  "


async def test_the_table_draws_once_per_judgement_and_its_ages_move_on(fixed_config, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """The monitor's judgement (every interval) draws; the pane's own 1 s tick draws only when no judgement
    came for one and a half intervals, so sampler rounds landing between the two never draw twice a second,
    and a monitor that stopped judging still has its ages move on."""
    import cockpit.tui.panes.stats as stats_pane

    drawn = []
    monkeypatch.setattr(stats_pane, "rank_table", lambda *a, **k: drawn.append(1) or rank_table(*a, **k))
    app = CockpitApp(fixed_config, connect=False)
    async with app.run_test(size=(160, 48)) as pilot:
        now = time.time()
        stats = app.ctx.monitor.stats
        app.ctx.monitor.interval_s = 0.5
        fill(stats, now, r1=rank(1, now - 14))
        pane = await shown(app, pilot)
        drawn.clear()
        judged = 0
        for step in range(24):                  # 2.4 s: a sampler round every 0.1 s, a judgement every 0.5 s
            stats.version += 1
            if step % 5 == 4:
                app._broadcast(lambda p: p.stats_changed())
                judged += 1
            await pilot.pause(0.1)
        assert len(drawn) == judged             # the 1 s tick drew nothing of its own
        before = max(map(int, re.findall(r"no readings for (\d+) s", cells(pane, "#stats-ranks"))))
        drawn.clear()
        await pilot.pause(2.2)                  # no judgement: the tick draws, rank 1's age moves on
        after = max(map(int, re.findall(r"no readings for (\d+) s", cells(pane, "#stats-ranks"))))
        assert drawn and after > before
