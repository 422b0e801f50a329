"""How old a fact on screen is, in one wording for every pane: "14 s", "5 min", "3 h" (or "14s", "5m",
"3h" where a column is narrow). Coarser as it grows, so the text changes at most once a second."""

from __future__ import annotations


def span(seconds: float, compact: bool = False) -> str:
    secs = max(0, int(seconds))
    if secs < 120:
        value, unit = secs, "s"
    elif secs < 7200:
        value, unit = secs // 60, ("m" if compact else "min")
    else:
        value, unit = secs // 3600, "h"
    return f"{value}{unit}" if compact else f"{value} {unit}"
