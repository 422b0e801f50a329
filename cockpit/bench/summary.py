"""A run's summary: ``summary.json`` (figures by name), ``summary.md`` (the card's tables), and the
comparison with the card's reference figures and with an earlier run (``--compare DIR``), with ratios.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import TYPE_CHECKING, Any

from cockpit import __version__
from cockpit.api.urls import redact
from cockpit.bench.engine_metrics import spec_decode
from cockpit.bench.records import headline
from cockpit.files import NotReadable, loads_bounded, read_bounded

if TYPE_CHECKING:
    from cockpit.bench.runner import Runner

FORMAT = "r37-cockpit.bench.summary"
VERSION = 1
MAX_SUMMARY_BYTES = 16 * 1024 * 1024

CARD: tuple[tuple[str, str, float], ...] = (
    ("decode.prose.c1.per_stream_tps", "single-stream decode, prose (tok/s)", 50.50),
    ("decode.prose.c8.aggregate_tps", "aggregate, 8 requests, prose (tok/s)", 229.28),
    ("idle_probe.counting.decode_tps", "after a 45 s idle: counting (tok/s)", 83.8),
    ("idle_probe.coding.decode_tps", "after a 45 s idle: coding (tok/s)", 75.1),
    ("checks.tools.passed", "tools passed (of 4)", 3),
    ("checks.vision.passed", "vision passed (of 3)", 3),
    ("checks.passed", "vision and tools passed (of 7)", 6),
)
"""The recipe card's reference figures (docs/benchmark-method.md): figure name, label, value."""


class CompareError(ValueError):
    """An earlier run's summary that cannot be read: names the file and the reason."""


def figures(s: dict[str, Any]) -> dict[str, float]:
    """Every number of a summary by a stable name (what ``--compare`` matches on)."""
    out: dict[str, float] = {}

    def put(name: str, value: Any) -> None:
        if isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value):
            out[name] = float(value)

    for cell in s.get("decode", []):
        base = f"decode.{cell['category']}.c{cell['concurrency']}"
        for key in ("per_stream_tps", "aggregate_tps", "ttft_s"):
            put(f"{base}.{key}", cell.get(key))
    for row in s.get("headline", []):
        if not row.get("complete"):
            continue
        for key in ("per_stream_tps", "aggregate_tps"):
            put(f"headline.c{row['concurrency']}.{key}", row.get(key))
    for row in s.get("prefill", []):
        put(f"prefill.{row['target_tokens']}.prefill_tps", row.get("prefill_tps"))
        put(f"prefill.{row['target_tokens']}.ttft_s", row.get("ttft_s"))
    for row in s.get("idle_probe", []):
        if not row.get("back_to_back"):
            put(f"idle_probe.{row.get('name')}.decode_tps", row.get("decode_tps"))
        else:
            put(f"idle_probe.{row.get('name')}.back_to_back_tps", row.get("decode_tps"))
    checks = s.get("checks", [])
    if checks:
        for group in ("tools", "vision"):
            mine = [c for c in checks if c.get("group") == group]
            if mine:
                put(f"checks.{group}.passed", sum(bool(c.get("passed")) for c in mine))
        put("checks.passed", sum(bool(c.get("passed")) for c in checks))
    spec = s.get("spec_decode") or {}
    put("spec_decode.acceptance_rate", spec.get("acceptance_rate"))
    put("spec_decode.mean_acceptance_length", spec.get("mean_acceptance_length"))
    return out


def _ratio(this: float | None, ref: float | None) -> float | None:
    if this is None or ref is None or ref == 0:
        return None
    return round(this / ref, 4)


def card_rows(figs: dict[str, float]) -> list[dict[str, Any]]:
    """This run next to the card's reference figures."""
    return [{"figure": name, "measure": label, "card": ref, "this_run": figs.get(name),
             "ratio": _ratio(figs.get(name), ref)} for name, label, ref in CARD]


def compare_rows(figs: dict[str, float], earlier: dict[str, Any]) -> list[dict[str, Any]]:
    """This run next to an earlier one: every figure either has, with the ratio this / earlier."""
    given = earlier.get("figures")
    old: dict[str, Any] = given if isinstance(given, dict) else figures(earlier)
    names = [n for n in figs if n in old] + [n for n in old if n not in figs]
    return [{"figure": n, "earlier": old.get(n), "this_run": figs.get(n),
             "ratio": _ratio(figs.get(n), old.get(n) if isinstance(old.get(n), int | float) else None)}
            for n in names]


def load_earlier(directory: str | Path) -> dict[str, Any]:
    """An earlier run's ``summary.json`` (``--compare DIR``, or the file itself); raises CompareError."""
    p = Path(directory)
    path = p / "summary.json" if p.is_dir() else p
    try:
        data = read_bounded(path, MAX_SUMMARY_BYTES)
    except NotReadable as exc:
        raise CompareError(f"{path}: {exc.reason}") from None
    except OSError as exc:
        raise CompareError(f"{path}: {exc.strerror or exc}") from None
    try:
        raw = loads_bounded(data.decode("utf-8", "replace"))
    except ValueError:
        raise CompareError(f"{path}: not JSON") from None
    if not isinstance(raw, dict) or raw.get("format") != FORMAT:
        raise CompareError(f"{path}: not a benchmark summary (format {FORMAT!r})")
    raw["_source"] = str(path)
    return raw


def build_summary(run: Runner, earlier: dict[str, Any] | None = None) -> dict[str, Any]:
    """The summary of a run so far (also of one cancelled or failed: ``status`` says which)."""
    decode = [c.to_dict() for c in run.decode]
    measured = [r for r in run.records if r.kind != "warmup"]
    cancelled = sum(1 for r in measured if not r.ok and (r.error or {}).get("kind") == "cancelled")
    failed = sum(1 for r in measured if not r.ok) - cancelled
    s: dict[str, Any] = {
        "format": FORMAT, "version": VERSION, "cockpit": __version__,
        "status": run.status, "reason": run.reason,
        "suite": run.plan.suite, "model": run.model, "api_url": redact(run.client.base_url),
        "started_at": run.started_at, "ended_at": run.ended_at,
        "requests": len(measured), "failed_requests": failed, "cancelled_requests": cancelled,
        "prompts": run.prompts.to_dict(),
        "decode": decode,
        "headline": headline(run.decode, run.prompts.headline),
        "headline_categories": run.prompts.headline,
        "prefill": run.prefill, "needle": run.needles,
        "checks": run.checks, "idle_probe": run.idle_probe,
        "spec_decode": spec_decode(run.metrics_before, run.metrics_after),
        "notes": run.notes,
    }
    figs = figures(s)
    s["figures"] = figs
    s["card"] = card_rows(figs)
    if earlier is not None:
        s["compare"] = {"source": earlier.get("_source"), "started_at": earlier.get("started_at"),
                        "rows": compare_rows(figs, earlier)}
    return s


# --- markdown -------------------------------------------------------------------------------------


def _f(value: Any, nd: int = 2) -> str:
    if value is None:
        return "—"
    if isinstance(value, bool):
        return "pass" if value else "FAIL"
    if isinstance(value, float):
        return f"{value:.{nd}f}"
    return str(value)


def _table(header: list[str], rows: list[list[str]]) -> list[str]:
    out = ["| " + " | ".join(header) + " |", "| " + " | ".join("---" for _ in header) + " |"]
    out += ["| " + " | ".join(cell.replace("|", "\\|").replace("\n", " ") for cell in r) + " |" for r in rows]
    return [*out, ""]


def _section(title: str, header: list[str], rows: list[list[str]]) -> list[str]:
    return [title, "", *_table(header, rows)]


def _decode_tables(s: dict[str, Any]) -> list[str]:
    cells = s.get("decode", [])
    if not cells:
        return []
    concs = sorted({c["concurrency"] for c in cells})
    cats = list(dict.fromkeys(c["category"] for c in cells))
    by = {(c["category"], c["concurrency"]): c for c in cells}
    ceiling = {c["category"] for c in cells if not c["headline"]}
    heads = {r["concurrency"]: r for r in s.get("headline", [])}
    out: list[str] = []
    for key, title, nd in (("per_stream_tps", "Per-stream decode (tok/s, TTFT excluded)", 2),
                           ("aggregate_tps", "Aggregate (tok/s, batch wall time)", 2),
                           ("ttft_s", "TTFT (s)", 3)):
        rows = []
        for cat in cats:
            row = [f"{cat} (ceiling)" if cat in ceiling else cat]
            for c in concs:
                cell = by.get((cat, c))
                if cell is None:
                    row.append("")
                elif cell["failed"]:
                    row.append(f"{cell['failed']}/{cell['requests']} failed")
                else:
                    row.append(_f(cell[key], nd))
            rows.append(row)
        if key != "ttft_s":
            first: dict[str, Any] = next(iter(heads.values()), {})
            n = len(s.get("headline_categories", []))
            label = (f"**headline (mean of {n})**" if first.get("complete")
                     else f"mean of {first.get('categories')} of {n} (not the headline)")
            rows.append([label,
                         *[f"**{_f(heads.get(c, {}).get(key), nd)}**" for c in concs]])
        out += _section(f"### {title}", ["category", *[f"C{c}" for c in concs]], rows)
    return out


def _probe_after(p: dict[str, Any]) -> str:
    return "back-to-back" if p.get("back_to_back") else f"{p.get('idle_s')} s idle"


def request_counts(s: dict[str, Any]) -> str:
    """`12 requests, 1 failed, 3 cancelled` (cancelled only when some were)."""
    text = f"{s.get('requests')} requests, {s.get('failed_requests')} failed"
    return text + (f", {s['cancelled_requests']} cancelled" if s.get("cancelled_requests") else "")


def render_markdown(s: dict[str, Any]) -> str:
    """``summary.md``: status, the decode tables, prefill, needle, checks, the card and any compare."""
    status = s.get("status")
    prompts = s.get("prompts", {})
    lines = [f"# Benchmark: {s.get('suite')} suite, {s.get('model')}", "",
             f"Status: **{status}**" + (f": {s['reason']}" if s.get("reason") else "")
             + f". Requests: {request_counts(s)}. "
             f"API: {s.get('api_url')}. Prompt set v{prompts.get('version')} ({prompts.get('source')}).", ""]
    if status != "complete":
        lines += ["**This run did not complete: its figures are partial and not comparable.**", ""]
    lines += ["## Decode", "", "Temperature 0, thinking off, tokens from `usage`; every cell's C streams "
              "released together.", "", *_decode_tables(s)]
    if s.get("prefill"):
        lines += _section("## Prefill", ["target", "prompt tokens", "TTFT (s)", "prefill (tok/s)"], [
            [str(r["target_tokens"]), _f(r.get("prompt_tokens")), _f(r.get("ttft_s"), 3),
             _f(r.get("prefill_tps")) if r.get("ok") else "failed"] for r in s["prefill"]])
    if s.get("needle"):
        lines += _section("## Needle", ["context", "depth", "result", "answer"], [
            [str(r.get("prompt_tokens") or r["context_tokens"]), f"{r['depth']:.0%}", _f(bool(r["passed"])),
             (r.get("answer") or "")[:80]] for r in s["needle"]])
    if s.get("checks"):
        lines += _section("## Vision and tools", ["check", "group", "result", "reason"], [
            [str(c.get("name", "")), str(c.get("group", "")), _f(bool(c.get("passed"))),
             str(c.get("reason", ""))[:120]] for c in s["checks"]])
    if s.get("idle_probe"):
        lines += _section("## Idle probe", ["prompt", "after", "decode (tok/s)", "TTFT (s)"], [
            [str(p.get("name")), _probe_after(p),
             _f(p.get("decode_tps")) + (" (estimated)" if p.get("estimated") else ""), _f(p.get("ttft_s"), 3)]
            for p in s["idle_probe"]])
    spec = s.get("spec_decode") or {}
    if spec.get("available"):
        lines += ["## Speculative decoding (engine /metrics over the run)", "",
                  f"Draft acceptance rate {_f(spec.get('acceptance_rate'), 3)}, mean acceptance length "
                  f"{_f(spec.get('mean_acceptance_length'), 3)} ({_f(spec.get('drafts'), 0)} drafts).", ""]
    lines += _section("## Compared with the recipe card", ["measure", "card", "this run", "ratio"], [
        [r["measure"], _f(r["card"]), _f(r["this_run"]), _f(r["ratio"], 3)] for r in s.get("card", [])])
    comp = s.get("compare")
    if comp:
        header = ["figure", "earlier", "this run", "ratio"]
        lines += _section(f"## Compared with {comp.get('source')}", header, [
            [r["figure"], _f(r["earlier"]), _f(r["this_run"]), _f(r["ratio"], 3)] for r in comp["rows"]])
    if s.get("notes"):
        lines += ["## Notes", "", *[f"- {n}" for n in s["notes"]], ""]
    return "\n".join(lines)
