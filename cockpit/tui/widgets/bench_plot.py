"""Text bar charts of a benchmark summary: per-stream decode and aggregate against concurrency, prefill
rate against context. Bars are eighth-blocks in a role; an unknown figure is "–" with no bar (never 0).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from rich.text import Text

from cockpit.bench.suite import tokens_label
from cockpit.bench.summary import BenchSummary

PARTIAL = " ▏▎▍▌▋▊▉"
FULL = "█"
UNKNOWN = "–"


def bar_chars(value: float, top: float, width: int) -> str:
    """`value` of `top` as a bar of at most `width` cells (eighths at the end)."""
    if width <= 0 or top <= 0 or not math.isfinite(value) or value <= 0:
        return ""
    eighths = round(min(value / top, 1.0) * width * 8)
    full, rest = divmod(eighths, 8)
    return FULL * full + (PARTIAL[rest] if rest else "")


def bar_chart(title: str, unit: str, rows: Sequence[tuple[str, float | None]], width: int,
              style: str = "accent") -> Text:
    """A titled horizontal bar chart, one row per (label, value), scaled to the largest value, `width`
    cells wide at most."""
    out = Text(title, style="bold")
    out.append(f" ({unit})", style="muted")
    if not rows:
        out.append("\n  nothing measured", style="muted")
        return out
    known = [v for _, v in rows if v is not None and math.isfinite(v)]
    top = max(known, default=0.0)
    label_w = max(len(label) for label, _ in rows)
    figures = [UNKNOWN if v is None or not math.isfinite(v) else f"{v:,.1f}" for _, v in rows]
    figure_w = max(len(f) for f in figures)
    bar_w = max(width - label_w - figure_w - 5, 4)
    for (label, value), figure in zip(rows, figures, strict=True):
        out.append("\n  ")
        out.append(label.rjust(label_w), style="muted")
        out.append(" ")
        bar = "" if value is None else bar_chars(value, top, bar_w)
        out.append(bar, style=style)
        out.append(" " * (bar_w - len(bar) + 1))
        out.append(figure.rjust(figure_w), style="" if value is not None else "muted")
    return out


def decode_rows(summary: BenchSummary, key: str) -> list[tuple[str, float | None]]:
    """(``C<n>``, the headline's ``key``) per concurrency; without a headline (no headline category
    measured) the mean of the cells measured at that concurrency."""
    rows = []
    heads = {r.concurrency: r for r in summary.headline}
    cells = summary.decode
    for c in sorted({*heads, *(c.concurrency for c in cells)}):
        value = _num(getattr(heads[c], key)) if c in heads else None
        if value is None:
            found = [v for v in (_num(getattr(x, key)) for x in cells if x.concurrency == c) if v is not None]
            value = sum(found) / len(found) if found else None
        rows.append((f"C{c}", value))
    return rows


def _num(value: float | None) -> float | None:
    return float(value) if value is not None and math.isfinite(value) else None


def prefill_rows(summary: BenchSummary) -> list[tuple[str, float | None]]:
    return [(tokens_label(r.target_tokens), _num(r.prefill_tps) if r.ok is not False else None)
            for r in summary.prefill]


def depth_rows(summary: BenchSummary) -> list[tuple[str, float | None]]:
    return [(tokens_label(d.depth), _num(d.decode_tps) if d.ok else None) for d in summary.depth]


def plots(summary: BenchSummary, width: int) -> Text:
    """The charts, one under the other, each at most `width` cells wide."""
    width = max(min(width, 100), 30)
    out = bar_chart("Per-stream decode against concurrency", "tok/s, TTFT excluded",
                    decode_rows(summary, "per_stream_tps"), width, "accent")
    out.append("\n\n")
    out.append_text(bar_chart("Aggregate against concurrency", "tok/s, batch wall time",
                              decode_rows(summary, "aggregate_tps"), width, "ok.soft"))
    if summary.depth:
        out.append("\n\n")
        out.append_text(bar_chart("Decode against context depth", "tok/s, one stream, TTFT excluded",
                                  depth_rows(summary), width, "warn.soft"))
    out.append("\n\n")
    out.append_text(bar_chart("Prefill rate against context", "tok/s, prompt tokens / TTFT",
                              prefill_rows(summary), width, "highlight"))
    return out
