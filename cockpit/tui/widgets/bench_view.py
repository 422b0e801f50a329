"""What the Bench pane draws: a run's progress from the runner's events, and its summary (the typed
:class:`cockpit.bench.summary.BenchSummary`) as tables. Unknown figures are "–", never 0; every text
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
from cockpit.bench.suite import tokens_label
from cockpit.bench.summary import (
    BenchSummary,
    Compare,
    SummaryLike,
    as_summary,
    energy_text,
    request_counts,
    spread_text,
    telemetry_rows,
)
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


def decode_table(s: BenchSummary) -> Group | None:
    """Category × concurrency, per-stream and aggregate in each cell's column pair, then the headline."""
    cells = s.decode
    if not cells:
        return None
    concs = sorted({c.concurrency for c in cells})
    cats = list(dict.fromkeys(c.category for c in cells))
    by = {(c.category, c.concurrency): c for c in cells}
    table = _table(["category", *[f"C{c}" for c in concs]])
    for cat in cats:
        ceiling = not any(by[(cat, c)].headline if (cat, c) in by else True for c in concs)
        row: list[RenderableType] = [Text(safe(cat, 24) + (" (ceiling)" if ceiling else ""))]
        for c in concs:
            cell = by.get((cat, c))
            if cell is None:
                row.append(Text(""))
            elif cell.failed:
                row.append(Text(f"{cell.failed}/{cell.requests} failed", style="fail"))
            else:
                row.append(Text(f"{fmt(cell.per_stream_tps)} / {fmt(cell.aggregate_tps)}"))
        table.add_row(*row)
    heads = {r.concurrency: r for r in s.headline}
    first = next(iter(heads.values()), None)
    n = len(s.headline_categories)
    label = (f"headline (mean of {n})" if first is not None and first.complete
             else f"mean of {first.categories if first else None} of {n} (not the headline)")
    table.add_row(Text(label, style="bold"), *[
        Text(f"{fmt(heads[c].per_stream_tps if c in heads else None)} / "
             f"{fmt(heads[c].aggregate_tps if c in heads else None)}", style="bold") for c in concs])
    return _titled("Decode", table, "tok/s: per-stream without TTFT / aggregate with the batch wall time")


def repeat_table(s: BenchSummary) -> Group | None:
    """The repeated cells: mean ± std and the 95 % interval of per-stream decode and aggregate."""
    cells = [c for c in s.decode if c.repeats is not None]
    if not cells:
        return None
    table = _table(["cell", "per-stream (tok/s)", "aggregate (tok/s)"])
    for c in cells:
        reps = c.repeats
        table.add_row(f"{safe(c.category, 24)} C{c.concurrency}",
                      spread_text(reps.per_stream_tps if reps else None),
                      spread_text(reps.aggregate_tps if reps else None))
    return _titled(f"Repeated {s.repeat} times", table,
                   "mean ± std, 95 % CI (Student t); the card uses run 1")


def depth_table(s: BenchSummary) -> Group | None:
    if not s.depth:
        return None
    table = _table(["depth", "prompt tokens", "TTFT (s)", "decode (tok/s)", "mean ± std (95 % CI)"])
    for d in s.depth:
        reps = d.repeats.decode_tps if d.repeats is not None else None
        table.add_row(tokens_label(d.depth), fmt(d.prompt_tokens), fmt(d.ttft_s, 3),
                      fmt(d.decode_tps) if d.ok else Text("failed", style="fail"),
                      spread_text(reps) if reps is not None else UNKNOWN)
    return _titled("Decode at context depth", table, "prompt tokens from usage; decode without TTFT")


def telemetry_table(s: BenchSummary) -> Group | None:
    rows = telemetry_rows(s)
    if not rows:
        return None
    table = _table(["cell", "power (W)", "SM (MHz)", "RDMA tx/rx (Gb/s)", "KV peak (%)", "J/token"])
    for label, t in rows:
        table.add_row(safe(label, 30), " / ".join(fmt(r.power_w, 1) for r in t.ranks) or UNKNOWN,
                      " / ".join(fmt(r.sm_mhz, 0) for r in t.ranks) or UNKNOWN,
                      " / ".join(f"{fmt(r.tx_gbps)}/{fmt(r.rx_gbps)}" for r in t.ranks) or UNKNOWN,
                      fmt(t.kv_cache_pct_max, 1) if t.kv_cache_pct_max is not None else "unknown",
                      energy_text(t))
    return _titled("Telemetry per cell", table, "per rank 0 / 1 / …; energy unknown unless every rank's "
                   "power was read")


def prefill_table(s: BenchSummary) -> Group | None:
    if not s.prefill:
        return None
    table = _table(["target", "prompt tokens", "TTFT (s)", "prefill (tok/s)"])
    for r in s.prefill:
        table.add_row(str(r.target_tokens), fmt(r.prompt_tokens), fmt(r.ttft_s, 3),
                      fmt(r.prefill_tps) if r.ok else Text("failed", style="fail"))
    return _titled("Prefill", table, "prompt tokens / TTFT")


def needle_text(summary: SummaryLike) -> Text | None:
    s = as_summary(summary)
    if not s.needle:
        return None
    out = Text("Needle", style="bold")
    for r in s.needle:
        depth = r.depth
        out.append(f"\n  {r.prompt_tokens or r.context_tokens} tokens"
                   f" @{depth:.0%}  " if isinstance(depth, int | float) else "\n  ")
        passed = bool(r.passed)
        out.append("pass" if passed else "FAIL", style="ok" if passed else "fail")
        answer = safe(str(r.answer or ""), 60).replace("\n", " ")
        if answer:
            out.append(f"  answer: {answer}", style="muted")
    return out


def checks_text(summary: SummaryLike) -> Text | None:
    s = as_summary(summary)
    if not s.checks:
        return None
    passed = sum(bool(c.passed) for c in s.checks)
    out = Text("Vision and tools ", style="bold")
    out.append(f"{passed}/{len(s.checks)}", style="ok" if passed == len(s.checks) else "warn")
    for c in s.checks:
        if not c.passed:
            out.append("\n  ✗ ", style="fail")
            out.append(f"{safe(c.group, 20)} {safe(c.name, 40)}: ", style="bold")
            out.append(safe(str(c.reason or ""), 200))
    return out


def probe_table(s: BenchSummary) -> Group | None:
    if not s.idle_probe:
        return None
    table = _table(["prompt", "after", "decode (tok/s)", "TTFT (s)"], right_from=2)
    for p in s.idle_probe:
        after = "back-to-back" if p.back_to_back else f"{fmt(p.idle_s, 0)} s idle"
        table.add_row(safe(p.name, 24), after, fmt(p.decode_tps) + (" (estimated)" if p.estimated else ""),
                      fmt(p.ttft_s, 3))
    return _titled("Idle probe", table)


def card_table(s: BenchSummary) -> Group:
    table = _table(["measure", "card", "this run", "ratio"])
    for r in s.card:
        this: float | int | None = r.this_run
        if isinstance(r.card, int) and isinstance(this, float) and this.is_integer():
            this = int(this)      # a count (checks passed), as the card gives it
        table.add_row(str(r.measure), fmt(r.card), fmt(this),
                      Text(fmt(r.ratio, 3), style="bold" if r.ratio is not None else "muted"))
    return _titled("Compared with the recipe card", table, "ratio: this run / card")


def compare_table(comp: Compare) -> Group:
    rows = [r for r in comp.rows if r.ratio is not None]
    table = _table(["figure", "earlier", "this run", "ratio"])
    for r in rows[:MAX_COMPARE_ROWS]:
        table.add_row(safe(r.figure, 60), fmt(r.earlier), fmt(r.this_run),
                      Text(fmt(r.ratio, 3), style="bold"))
    if len(rows) > MAX_COMPARE_ROWS:
        table.add_row(Text(f"… and {len(rows) - MAX_COMPARE_ROWS} more in summary.md", style="muted"))
    return _titled(f"Compared with {safe(comp.source, 200)}", table, "ratio: this run / earlier")


def summary_head(s: BenchSummary, out: Path | None) -> Text:
    status = s.status
    text = Text(f"benchmark {status}", style=STATUS_ROLE.get(status, "unknown"))
    text.append(f": {safe(s.suite, 20)} suite, {safe(s.model, 80)}, {request_counts(s)}")
    if s.reason:
        text.append(f"\n  {safe(s.reason, 300)}", style="warn" if status == "cancelled" else "fail.soft")
    if status != "complete":
        text.append("\n  the figures are partial and not comparable", style="muted")
    if out is not None:
        text.append("\nrecords ", style="muted")
        text.append(safe(str(out), 300))
    return text


def summary_block(s: BenchSummary, out: Path | None) -> Group:
    """The whole summary: decode, repeats, depth, prefill, needle, checks, idle probe, telemetry, card,
    compare, records."""
    parts: list[RenderableType] = [summary_head(s, out)]
    for part in (decode_table(s), repeat_table(s), depth_table(s), prefill_table(s), needle_text(s),
                 checks_text(s), probe_table(s), telemetry_table(s)):
        if part is not None:
            parts += [Text(""), part]
    spec = s.spec_decode
    if spec.available:
        parts += [Text(""), Text("Speculative decoding: acceptance rate "
                                 f"{fmt(spec.acceptance_rate, 3)}, mean acceptance length "
                                 f"{fmt(spec.mean_acceptance_length, 3)}")]
    parts += [Text(""), card_table(s)]
    for comp in s.compare:
        parts += [Text(""), compare_table(comp)]
    return Group(*parts)
