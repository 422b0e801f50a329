"""``report.html``: a run's summary as one self-contained page (beside ``summary.md``).

Inline SVG bar charts drawn here (no library, no script, no stylesheet or font from elsewhere: the page
works offline and shows the same in ten years); every text that came from the engine or a file (the
model's name, answers, reasons, notes, paths) goes through :func:`html.escape`. The charts: per-stream
decode and aggregate against concurrency (with the 95 % interval when the cells were repeated), decode
against context depth, prefill rate against context; then the tables of ``summary.md`` and every compare.
"""

from __future__ import annotations

import html
import math
from collections.abc import Sequence

from cockpit.bench.stats import Spread
from cockpit.bench.suite import tokens_label
from cockpit.bench.summary import (
    BenchSummary,
    SummaryLike,
    as_summary,
    energy_text,
    spread_text,
    telemetry_rows,
)

BAR_W, GAP, CHART_H, LEFT, TOP, BOTTOM = 56, 18, 180, 64, 24, 40
STYLE = """
body { font: 14px/1.4 system-ui, sans-serif; margin: 2em; color: #1b1f24; background: #fff; }
table { border-collapse: collapse; margin: .5em 0 1.5em; }
th, td { border: 1px solid #d0d7de; padding: 3px 8px; text-align: right; }
th:first-child, td:first-child { text-align: left; }
th { background: #f6f8fa; }
.warn { color: #9a6700; } .fail { color: #cf222e; } .muted { color: #57606a; }
svg { margin: .5em 1.5em 1em 0; } figure { display: inline-block; margin: 0; }
"""


def esc(value: object) -> str:
    return html.escape(str(value), quote=True)


def _num(value: float | None, nd: int = 2) -> str:
    return "—" if value is None or not math.isfinite(value) else f"{value:.{nd}f}"


Bar = tuple[str, float | None, Spread | None]
"""(label, value, spread for the 95 % interval whisker or None)."""


def bar_svg(title: str, unit: str, bars: Sequence[Bar], color: str = "#0969da") -> str:
    """A vertical bar chart as inline SVG; an unknown value is a labelled gap, never a zero bar."""
    known = [v for _, v, _ in bars if v is not None and math.isfinite(v)]
    tops = [sp.ci95_high for _, _, sp in bars if sp is not None and sp.ci95_high is not None]
    top = max([*known, *tops], default=0.0) or 1.0
    width = LEFT + len(bars) * (BAR_W + GAP) + GAP
    height = TOP + CHART_H + BOTTOM
    y0 = TOP + CHART_H
    out = [f'<figure><svg width="{width}" height="{height}" '
           f'role="img" aria-label="{esc(title)}">',
           f'<text x="4" y="14" font-size="13" font-weight="bold">{esc(title)} ({esc(unit)})</text>',
           f'<line x1="{LEFT}" y1="{y0}" x2="{width - 4}" y2="{y0}" stroke="#57606a"/>',
           f'<text x="{LEFT - 6}" y="{TOP + 4}" font-size="11" text-anchor="end">{top:,.1f}</text>',
           f'<text x="{LEFT - 6}" y="{y0}" font-size="11" text-anchor="end">0</text>']
    for i, (label, value, sp) in enumerate(bars):
        x = LEFT + GAP + i * (BAR_W + GAP)
        cx = x + BAR_W / 2
        if value is None or not math.isfinite(value):
            out.append(f'<text x="{cx}" y="{y0 - 6}" font-size="11" text-anchor="middle" '
                       f'fill="#57606a">unknown</text>')
        else:
            h = max(value, 0.0) / top * CHART_H
            out.append(f'<rect x="{x}" y="{y0 - h:.1f}" width="{BAR_W}" height="{h:.1f}" fill="{color}">'
                       f'<title>{esc(label)}: {value:,.2f}</title></rect>')
            out.append(f'<text x="{cx}" y="{y0 - h - 4:.1f}" font-size="11" '
                       f'text-anchor="middle">{value:,.1f}</text>')
            if sp is not None and sp.ci95_low is not None and sp.ci95_high is not None:
                lo = y0 - max(sp.ci95_low, 0.0) / top * CHART_H
                hi = y0 - sp.ci95_high / top * CHART_H
                out.append(f'<path d="M{cx} {lo:.1f}V{hi:.1f}M{cx - 6} {lo:.1f}H{cx + 6}M{cx - 6} {hi:.1f}'
                           f'H{cx + 6}" stroke="#1b1f24" fill="none"><title>95 % CI '
                           f'{sp.ci95_low:,.2f}–{sp.ci95_high:,.2f}</title></path>')
        out.append(f'<text x="{cx}" y="{y0 + 16}" font-size="12" text-anchor="middle">{esc(label)}</text>')
    out.append("</svg></figure>")
    return "".join(out)


def _table(header: Sequence[str], rows: Sequence[Sequence[object]]) -> str:
    head = "".join(f"<th>{esc(h)}</th>" for h in header)
    body = "".join("<tr>" + "".join(f"<td>{esc(c)}</td>" for c in r) + "</tr>" for r in rows)
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def _concurrency_bars(s: BenchSummary, key: str) -> list[Bar]:
    """Per concurrency: the headline's figure, else the mean of the cells measured (as the TUI's plots);
    the interval of the cells' repeats when one cell was measured at that concurrency."""
    heads = {r.concurrency: r for r in s.headline}
    bars: list[Bar] = []
    for c in sorted({x.concurrency for x in s.decode}):
        cells = [x for x in s.decode if x.concurrency == c]
        value = getattr(heads[c], key) if c in heads else None
        if value is None:
            known = [v for v in (getattr(x, key) for x in cells) if v is not None]
            value = sum(known) / len(known) if known else None
        sp = getattr(cells[0].repeats, key) if len(cells) == 1 and cells[0].repeats is not None else None
        bars.append((f"C{c}", value, sp))
    return bars


def charts(s: BenchSummary) -> list[str]:
    out = []
    if s.decode:
        out.append(bar_svg("Per-stream decode", "tok/s", _concurrency_bars(s, "per_stream_tps")))
        out.append(bar_svg("Aggregate", "tok/s", _concurrency_bars(s, "aggregate_tps"), "#1a7f37"))
    if s.depth:
        out.append(bar_svg("Decode at depth", "tok/s", [
            (tokens_label(d.depth), d.decode_tps if d.ok else None,
             d.repeats.decode_tps if d.repeats is not None else None) for d in s.depth], "#8250df"))
    if s.prefill:
        out.append(bar_svg("Prefill", "tok/s", [
            (tokens_label(p.target_tokens), p.prefill_tps if p.ok else None, None) for p in s.prefill],
            "#bc4c00"))
    return out


def render_html(summary: SummaryLike, title: str | None = None) -> str:
    """The whole page; nothing in it is fetched from anywhere when it is viewed."""
    s = as_summary(summary)
    name = title or f"Benchmark: {s.suite} suite, {s.model}"
    role = "" if s.status == "complete" else ' class="warn"'
    parts = [f"<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\"><title>{esc(name)}</title>"
             f"<style>{STYLE}</style></head><body><h1>{esc(name)}</h1>",
             f"<p{role}>Status: <b>{esc(s.status)}</b>" + (f": {esc(s.reason)}" if s.reason else "")
             + f". Requests: {s.requests}, {s.failed_requests} failed"
             + (f", {s.cancelled_requests} cancelled" if s.cancelled_requests else "")
             + f". API: {esc(s.api_url)}."
             + (f" Every decode cell measured {s.repeat} times." if s.repeat > 1 else "") + "</p>"]
    if s.status != "complete":
        parts.append('<p class="warn">This run did not complete: its figures are partial and not '
                     'comparable.</p>')
    parts += charts(s)
    if s.decode:
        concs = sorted({c.concurrency for c in s.decode})
        cats = list(dict.fromkeys(c.category for c in s.decode))
        by = {(c.category, c.concurrency): c for c in s.decode}
        rows = []
        for cat in cats:
            row: list[object] = [cat]
            for c in concs:
                cell = by.get((cat, c))
                row.append("" if cell is None else f"{cell.failed}/{cell.requests} failed" if cell.failed else
                           f"{_num(cell.per_stream_tps)} / {_num(cell.aggregate_tps)}")
            rows.append(row)
        parts += ["<h2>Decode</h2><p class=\"muted\">tok/s: per-stream (TTFT excluded) / aggregate "
                  "(batch wall "
                  "time); temperature 0, thinking off, tokens from usage.</p>",
                  _table(["category", *[f"C{c}" for c in concs]], rows)]
        reps = [c for c in s.decode if c.repeats is not None]
        if reps:
            parts += [f"<h3>Repeated {s.repeat} times: mean ± std (95 % CI, Student t)</h3>", _table(
                ["cell", "per-stream (tok/s)", "aggregate (tok/s)", "TTFT (s)"],
                [[f"{c.category} C{c.concurrency}",
                  spread_text(c.repeats.per_stream_tps if c.repeats else None),
                  spread_text(c.repeats.aggregate_tps if c.repeats else None),
                  spread_text(c.repeats.ttft_s if c.repeats else None, 3)] for c in reps])]
    if s.depth:
        parts += ["<h2>Decode at context depth</h2>", _table(
            ["depth", "prompt tokens (usage)", "TTFT (s)", "decode (tok/s)", "mean ± std (95 % CI)"],
            [[tokens_label(d.depth), d.prompt_tokens if d.prompt_tokens is not None else "—",
              _num(d.ttft_s, 3), _num(d.decode_tps) if d.ok else "failed",
              spread_text(d.repeats.decode_tps) if d.repeats and d.repeats.decode_tps else "—"]
             for d in s.depth])]
    if s.prefill:
        parts += ["<h2>Prefill</h2>", _table(["target", "prompt tokens", "TTFT (s)", "prefill (tok/s)"], [
            [p.target_tokens, p.prompt_tokens if p.prompt_tokens is not None else "—", _num(p.ttft_s, 3),
             _num(p.prefill_tps) if p.ok else "failed"] for p in s.prefill])]
    if s.needle:
        parts += ["<h2>Needle</h2>", _table(["context", "depth", "result", "answer"], [
            [n.prompt_tokens or n.context_tokens,
             f"{n.depth:.0%}" if isinstance(n.depth, int | float) else "—",
             "pass" if n.passed else "FAIL", str(n.answer or "")[:200]] for n in s.needle])]
    if s.checks:
        parts += ["<h2>Vision and tools</h2>", _table(["check", "group", "result", "reason"], [
            [c.name, c.group, "pass" if c.passed else "FAIL", str(c.reason or "")[:300]] for c in s.checks])]
    if s.idle_probe:
        parts += ["<h2>Idle probe</h2>", _table(["prompt", "after", "decode (tok/s)", "TTFT (s)"], [
            [p.name, "back-to-back" if p.back_to_back else f"{p.idle_s} s idle", _num(p.decode_tps),
             _num(p.ttft_s, 3)] for p in s.idle_probe])]
    tele = telemetry_rows(s)
    if tele:
        parts += ["<h2>Telemetry per cell</h2><p class=\"muted\">Means over each cell's window, per rank; "
                  "energy = Σ power × wall time / tokens, unknown unless every rank's power was read.</p>",
                  _table(["cell", "power (W) per rank", "SM clock (MHz) per rank",
                          "RDMA tx / rx (Gb/s) per rank",
                          "KV cache peak (%)", "energy (J/token)"],
                         [[label, " / ".join(_num(r.power_w, 1) for r in t.ranks),
                           " / ".join(_num(r.sm_mhz, 0) for r in t.ranks),
                           " / ".join(f"{_num(r.tx_gbps)} / {_num(r.rx_gbps)}" for r in t.ranks),
                           _num(t.kv_cache_pct_max, 1) if t.kv_cache_pct_max is not None else "unknown",
                           energy_text(t)] for label, t in tele])]
    parts += ["<h2>Compared with the recipe card</h2>"
              + ("<p class=\"muted\">Decode figures are each cell's first run (the card's method).</p>"
                 if s.repeat > 1 else ""),
              _table(["measure", "card", "this run", "ratio"],
                     [[r.measure, r.card, _num(r.this_run), _num(r.ratio, 3)] for r in s.card])]
    for comp in s.compare:
        ratios = [r for r in comp.rows if r.ratio is not None]
        parts += [f"<h2>Compared with {esc(comp.source)}</h2>",
                  bar_svg("This run / earlier", "ratio", [(r.figure.split(".", 1)[-1][:18], r.ratio, None)
                                                          for r in ratios[:12]], "#6e7781") if ratios else "",
                  _table(["figure", "earlier", "this run", "ratio"],
                         [[r.figure, _num(r.earlier), _num(r.this_run), _num(r.ratio, 3)]
                          for r in comp.rows])]
    if s.notes:
        parts.append("<h2>Notes</h2><ul>" + "".join(f"<li>{esc(n)}</li>" for n in s.notes) + "</ul>")
    parts.append("</body></html>\n")
    return "\n".join(parts)
