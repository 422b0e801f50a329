"""Sparklines as text: the newest `width` points of a series in eighth-blocks, a gap where a point is
unknown (None is never drawn as 0)."""

from __future__ import annotations

import math
from collections.abc import Sequence

from rich.text import Text

BLOCKS = "▁▂▃▄▅▆▇█"
GAP = " "


def spark_chars(values: Sequence[float | None], width: int, lo: float | None = None,
                hi: float | None = None) -> str:
    """The last `width` values scaled between `lo` and `hi` (default: the shown points' own range; a flat
    series sits on the bottom block), right-aligned so the newest point is the last cell."""
    if width <= 0:
        return ""
    shown = list(values[-width:])
    known = [v for v in shown if v is not None and math.isfinite(v)]
    if not known:
        return GAP * width
    low = min(known) if lo is None else lo
    high = max(known) if hi is None else hi
    span = high - low
    out = []
    for v in shown:
        if v is None or not math.isfinite(v):
            out.append(GAP)
            continue
        level = 0 if span <= 0 else round((min(max(v, low), high) - low) / span * (len(BLOCKS) - 1))
        out.append(BLOCKS[level])
    return GAP * (width - len(out)) + "".join(out)


def sparkline(values: Sequence[float | None], width: int, style: str = "", lo: float | None = None,
              hi: float | None = None) -> Text:
    return Text(spark_chars(values, width, lo, hi), style=style)
