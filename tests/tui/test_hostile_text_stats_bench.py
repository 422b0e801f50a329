"""Text from hosts and the model reaches the Stats and Bench panes neutralised: terminal escapes, control
characters and Rich markup show as inert symbols, never act."""

from __future__ import annotations

import io
import time

from rich.console import Console

from cockpit.telemetry.cluster_stats import Alert, ClusterStats, MemoryStats, RankStats
from cockpit.telemetry.gpu import GpuReading
from cockpit.telemetry.host_sample import GpuApp
from cockpit.tui.widgets.bench_view import checks_text, needle_text
from cockpit.tui.widgets.stats_view import alerts_block, rank_detail

HOSTILE = "\x1b[2J\x1b]0;pwned\x07[bold red]x[/]\r\x00evil"


def _inert(text: str) -> None:
    assert "\x1b" not in text and "\x07" not in text and "\x00" not in text and "\r" not in text
    assert "evil" in text                                   # shown, not dropped


def test_stats_detail_and_alerts_neutralise_host_text() -> None:
    now = time.time()
    stats = ClusterStats([0], 1.0)
    stats.put(RankStats(0, "sampling", error=HOSTILE, gpu=GpuReading(name=HOSTILE, util=5, pstate="P0"),
                        gpu_at=now, round_at=now, apps=(GpuApp(7, HOSTILE, 10),),
                        memory=MemoryStats("unified", 1 << 30, 1 << 29, None)))
    detail = rank_detail(stats, 0, now, 120, "cmd", 1)
    console = Console(width=120, record=True, file=io.StringIO(), color_system=None)
    console.print(detail)
    _inert(console.export_text())
    alerts = alerts_block((Alert("gpu-unreadable", 0, now, HOSTILE, HOSTILE),), 120)
    _inert(alerts.plain)


def test_bench_needle_answer_and_check_reason_are_neutralised() -> None:
    summary = {"needle": [{"prompt_tokens": 8000, "depth": 0.5, "passed": False, "answer": HOSTILE}],
               "checks": [{"name": "tool_forced", "group": "tools", "passed": False, "reason": HOSTILE}]}
    needle, checks = needle_text(summary), checks_text(summary)
    assert needle is not None and checks is not None
    _inert(needle.plain)
    _inert(checks.plain)
    assert not needle.spans or all("red" not in str(span.style) for span in needle.spans)   # markup inert
