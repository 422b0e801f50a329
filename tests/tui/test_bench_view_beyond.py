"""The Bench pane's summary reads the typed summary: repeated cells with their spread, decode at depth
(table and plot), telemetry per cell with the energy "unknown" when a rank's power is missing."""

from __future__ import annotations

from dataclasses import replace

from rich.console import Console
from rich.theme import Theme

from cockpit.bench.records import CellRepeats, DecodeCell, DepthCell
from cockpit.bench.summary import BenchSummary
from cockpit.bench.telemetry import CellTelemetry, RankTelemetry
from cockpit.tui.styles import ROLES
from cockpit.tui.widgets.bench_plot import plots
from cockpit.tui.widgets.bench_view import summary_block


def _text(renderable: object) -> str:
    console = Console(width=140, record=True, color_system=None, theme=Theme({r: "none" for r in ROLES}))
    console.print(renderable)
    return console.export_text()


def test_repeats_depth_and_telemetry_are_shown() -> None:
    runs = [DecodeCell("prose", 1, 1, 0, v, 0.05, v - 1, 400, True) for v in (50.0, 48.0, 49.0)]
    ranks = (RankTelemetry(0, 4, 92.5, 2405.0, 1.5, 1.25), RankTelemetry(1, 0, None, None, None, None))
    tele = CellTelemetry(0.0, 8.0, ranks, 3.5, 2.0, 1200, None, "no power reading from rank 1")
    cell = replace(runs[0], repeats=CellRepeats.of(runs), telemetry=tele)
    depth = (DepthCell(0, 120, 400, 50.4, 0.05, True), DepthCell(8192, 8310, 400, 44.3, 2.1, True))
    s = BenchSummary("complete", None, "quick", "m", "http://x", 5, 0, decode=(cell,), depth=depth, repeat=3)
    text = _text(summary_block(s, None))
    assert "Repeated 3 times" in text and "49.00 ± 1.00 (95 % CI 46.52–51.48)" in text
    assert "Decode at context depth" in text and "8310" in text and "44.30" in text
    assert "Telemetry per cell" in text and "92.5 / –" in text and "2405 / –" in text
    row = [line for line in text.splitlines() if line.startswith("prose C1")][-1]   # the telemetry row
    assert row.rstrip().endswith("3.5  unknown"), row                         # KV peak, then energy
    chart = _text(plots(s, 100))
    assert "Decode against context depth" in chart and "8k" in chart
