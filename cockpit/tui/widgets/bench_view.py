"""What the Bench pane draws: a run's progress from the runner's events, and its summary (the dict of
:func:`cockpit.bench.summary.build_summary`) as tables. Unknown figures are "–", never 0; every text
that came from the server (answers, reasons, errors, the model's name) is neutralised.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text

from cockpit.bench.gate import Refusal
from cockpit.bench.runner import CellStarted, RequestDone
from cockpit.bench.summary import request_counts
from cockpit.safetext import safe

UNKNOWN = "–"
STATUS_ROLE = {"complete": "ok", "cancelled": "warn", "failed": "fail", "running": "warn.soft"}
MAX_COMPARE_ROWS = 24


def clock(seconds: float | None) -> str:
    """``mm:ss`` (``h:mm:ss`` from an hour); ``--:--`` unknown."""
    if seconds is None or not math.isfinite(seconds) or seconds < 0:
        return "--:--"
    s = int(seconds)
    return f"{s // 3600}:{s // 60 % 60:02d}:{s % 60:02d}" if s >= 3600 else f"{s // 60:02d}:{s % 60:02d}"


def fmt(value: Any, nd: int = 2) -> str:
    if value is None or isinstance(value, bool):
        return UNKNOWN
    if isinstance(value, float):
        return f"{value:.{nd}f}" if math.isfinite(value) else UNKNOWN
    return str(value)


def progress_bar(done: int, total: int, width: int) -> Text:
    filled = int(width * done / total) if total > 0 else 0
    filled = min(max(filled, 0), width)
    return Text.assemble(("█" * filled, "accent"), ("░" * (width - filled), "muted"))


def request_text(e: RequestDone) -> Text:
    """One finished request: ``prose C8 #12  ok  400 tok  TTFT 0.041 s  28.6 tok/s``."""
    r = e.record
    out = Text(f"{safe(r.cell, 40)} #{r.n}  ", style="muted")
    out.append("ok  " if r.ok else "FAIL", style="ok.soft" if r.ok else "fail")
    if r.kind == "decode" and r.completion_tokens is not None:
        out.append(f"  {r.completion_tokens} tok")
    if r.kind != "decode" and r.prompt_tokens is not None:
        out.append(f"  {r.prompt_tokens} prompt tok")
    if r.ttft_s is not None:
        out.append(f"  TTFT {r.ttft_s:.3f} s")
    if r.kind == "decode" and r.decode_tps is not None:
        out.append(f"  {r.decode_tps:.1f} tok/s")
    if r.error:
        out.append(f"  {safe(r.error.get('kind'), 40)}: {safe(r.error.get('message'), 160)}",
                   style="fail.soft")
    return out


def progress_block(cell: CellStarted | None, last: Sequence[RequestDone], elapsed: float | None,
                   width: int) -> Text:
    """The current cell, request n/N with a bar, elapsed and ETA, then the last requests' figures."""
    latest = last[-1] if last else None
    out = Text("cell ", style="muted")
    out.append(safe(cell.cell, 60) if cell else "starting", style="bold")
    if cell is not None:
        plural = "s" if cell.requests != 1 else ""
        out.append(f"  ({cell.index}/{cell.cells}, {cell.requests} request{plural})", style="muted")
    done, total = (latest.done, latest.total) if latest else (0, 0)
    out.append("\n")
    out.append_text(progress_bar(done, total, max(min(width - 40, 50), 10)))
    out.append(f" {done}/{total or '?'}", style="bold")
    shown = elapsed if elapsed is not None else (latest.elapsed_s if latest else None)
    out.append(f"  elapsed {clock(shown)}  ETA {clock(latest.eta_s if latest else None)}")
    if last:
        out.append("\n\nlast requests", style="bold")
        for e in last:
            out.append("\n  ")
            out.append_text(request_text(e))
    return out


def refusal_block(refusal: Refusal, remedy: str) -> Text:
    out = Text("✗ benchmark refused: ", style="fail")
    out.append(safe(refusal.reason, 600))
    if remedy:
        out.append("\n  remedy: ", style="muted")
        out.append(safe(remedy, 600), style="muted")
    out.append("\n  nothing was started", style="muted")
    return out


def notes_block(notes: Sequence[tuple[str, bool]]) -> Text:
    out = Text("notes", style="bold")
    for message, warning in notes:
        out.append("\n  ")
        out.append("warning: " if warning else "note: ", style="warn" if warning else "muted")
        out.append(safe(message, 300))
    return out


# ---- the summary --------------------------------------------------------------------------------------

def _table(columns: Sequence[str], right_from: int = 1) -> Table:
    table = Table(box=None, padding=(0, 2, 0, 0), pad_edge=False, show_edge=False, header_style="muted")
    for i, name in enumerate(columns):
        table.add_column(name, justify="right" if i >= right_from else "left", no_wrap=True)
    return table


def _titled(title: str, table: Table, note: str = "") -> Group:
    head = Text(title, style="bold")
    if note:
        head.append(f" ({note})", style="muted")
    return Group(head, table)


def decode_table(s: dict[str, Any]) -> Group | None:
    """Category × concurrency, per-stream and aggregate in each cell's column pair, then the headline."""
    cells = [c for c in s.get("decode", []) if isinstance(c, dict)]
    if not cells:
        return None
    concs: list[int] = sorted({int(c["concurrency"]) for c in cells if isinstance(c.get("concurrency"), int)})
    cats = list(dict.fromkeys(str(c.get("category")) for c in cells))
    by = {(str(c.get("category")), c.get("concurrency")): c for c in cells}
    table = _table(["category", *[f"C{c}" for c in concs]])
    for cat in cats:
        ceiling = not any(by.get((cat, c), {}).get("headline", True) for c in concs)
        row: list[RenderableType] = [Text(safe(cat, 24) + (" (ceiling)" if ceiling else ""))]
        for c in concs:
            cell = by.get((cat, c))
            if cell is None:
                row.append(Text(""))
            elif cell.get("failed"):
                row.append(Text(f"{cell['failed']}/{cell.get('requests')} failed", style="fail"))
            else:
                row.append(Text(f"{fmt(cell.get('per_stream_tps'))} / {fmt(cell.get('aggregate_tps'))}"))
        table.add_row(*row)
    heads = {r.get("concurrency"): r for r in s.get("headline", []) if isinstance(r, dict)}
    first = next(iter(heads.values()), {})
    n = len(s.get("headline_categories", []))
    label = (f"headline (mean of {n})" if first.get("complete")
             else f"mean of {first.get('categories')} of {n} (not the headline)")
    table.add_row(Text(label, style="bold"), *[
        Text(f"{fmt(heads.get(c, {}).get('per_stream_tps'))} / {fmt(heads.get(c, {}).get('aggregate_tps'))}",
             style="bold") for c in concs])
    return _titled("Decode", table, "tok/s: per-stream without TTFT / aggregate with the batch wall time")


def prefill_table(s: dict[str, Any]) -> Group | None:
    rows = [r for r in s.get("prefill", []) if isinstance(r, dict)]
    if not rows:
        return None
    table = _table(["target", "prompt tokens", "TTFT (s)", "prefill (tok/s)"])
    for r in rows:
        table.add_row(str(r.get("target_tokens")), fmt(r.get("prompt_tokens")), fmt(r.get("ttft_s"), 3),
                      fmt(r.get("prefill_tps")) if r.get("ok") else Text("failed", style="fail"))
    return _titled("Prefill", table, "prompt tokens / TTFT")


def needle_text(s: dict[str, Any]) -> Text | None:
    rows = [r for r in s.get("needle", []) if isinstance(r, dict)]
    if not rows:
        return None
    out = Text("Needle", style="bold")
    for r in rows:
        depth = r.get("depth")
        out.append(f"\n  {r.get('prompt_tokens') or r.get('context_tokens')} tokens"
                   f" @{depth:.0%}  " if isinstance(depth, int | float) else "\n  ")
        passed = bool(r.get("passed"))
        out.append("pass" if passed else "FAIL", style="ok" if passed else "fail")
        answer = safe(str(r.get("answer") or ""), 60).replace("\n", " ")
        if answer:
            out.append(f"  answer: {answer}", style="muted")
    return out


def checks_text(s: dict[str, Any]) -> Text | None:
    checks = [c for c in s.get("checks", []) if isinstance(c, dict)]
    if not checks:
        return None
    passed = sum(bool(c.get("passed")) for c in checks)
    out = Text("Vision and tools ", style="bold")
    out.append(f"{passed}/{len(checks)}", style="ok" if passed == len(checks) else "warn")
    for c in checks:
        if not c.get("passed"):
            out.append("\n  ✗ ", style="fail")
            out.append(f"{safe(c.get('group'), 20)} {safe(c.get('name'), 40)}: ", style="bold")
            out.append(safe(str(c.get("reason", "")), 200))
    return out


def probe_table(s: dict[str, Any]) -> Group | None:
    rows = [p for p in s.get("idle_probe", []) if isinstance(p, dict)]
    if not rows:
        return None
    table = _table(["prompt", "after", "decode (tok/s)", "TTFT (s)"], right_from=2)
    for p in rows:
        after = "back-to-back" if p.get("back_to_back") else f"{fmt(p.get('idle_s'), 0)} s idle"
        table.add_row(safe(p.get("name"), 24), after,
                      fmt(p.get("decode_tps")) + (" (estimated)" if p.get("estimated") else ""),
                      fmt(p.get("ttft_s"), 3))
    return _titled("Idle probe", table)


def card_table(s: dict[str, Any]) -> Group:
    table = _table(["measure", "card", "this run", "ratio"])
    for r in s.get("card", []):
        if isinstance(r, dict):
            this = r.get("this_run")
            if isinstance(r.get("card"), int) and isinstance(this, float) and this.is_integer():
                this = int(this)      # a count (checks passed), as the card gives it
            table.add_row(str(r.get("measure")), fmt(r.get("card")), fmt(this),
                          Text(fmt(r.get("ratio"), 3),
                               style="bold" if r.get("ratio") is not None else "muted"))
    return _titled("Compared with the recipe card", table, "ratio: this run / card")


def compare_table(s: dict[str, Any]) -> Group | None:
    comp = s.get("compare")
    if not isinstance(comp, dict):
        return None
    rows = [r for r in comp.get("rows", []) if isinstance(r, dict) and r.get("ratio") is not None]
    table = _table(["figure", "earlier", "this run", "ratio"])
    for r in rows[:MAX_COMPARE_ROWS]:
        table.add_row(safe(r.get("figure"), 60), fmt(r.get("earlier")), fmt(r.get("this_run")),
                      Text(fmt(r.get("ratio"), 3), style="bold"))
    if len(rows) > MAX_COMPARE_ROWS:
        table.add_row(Text(f"… and {len(rows) - MAX_COMPARE_ROWS} more in summary.md", style="muted"))
    return _titled(f"Compared with {safe(comp.get('source'), 200)}", table, "ratio: this run / earlier")


def summary_head(s: dict[str, Any], out: Path | None) -> Text:
    status = str(s.get("status"))
    text = Text(f"benchmark {status}", style=STATUS_ROLE.get(status, "unknown"))
    text.append(f": {safe(s.get('suite'), 20)} suite, {safe(s.get('model'), 80)}, "
                f"{request_counts(s)}")
    if s.get("reason"):
        text.append(f"\n  {safe(s.get('reason'), 300)}",
                    style="warn" if status == "cancelled" else "fail.soft")
    if status != "complete":
        text.append("\n  the figures are partial and not comparable", style="muted")
    if out is not None:
        text.append("\nrecords ", style="muted")
        text.append(safe(str(out), 300))
    return text


def summary_block(s: dict[str, Any], out: Path | None) -> Group:
    """The whole summary: decode, prefill, needle, checks, idle probe, card, compare, records."""
    parts: list[RenderableType] = [summary_head(s, out)]
    for part in (decode_table(s), prefill_table(s), needle_text(s), checks_text(s), probe_table(s)):
        if part is not None:
            parts += [Text(""), part]
    spec = s.get("spec_decode") or {}
    if isinstance(spec, dict) and spec.get("available"):
        parts += [Text(""), Text("Speculative decoding: acceptance rate "
                                 f"{fmt(spec.get('acceptance_rate'), 3)}, mean acceptance length "
                                 f"{fmt(spec.get('mean_acceptance_length'), 3)}")]
    parts += [Text(""), card_table(s)]
    comp = compare_table(s)
    if comp is not None:
        parts += [Text(""), comp]
    return Group(*parts)
