"""A run's summary: ``summary.json`` (figures by name), ``summary.md`` (the card's tables), the comparison
with the card's reference figures and with earlier runs (``--compare DIR``, one or more), with ratios.

:class:`BenchSummary` is the typed summary (frozen dataclasses); :meth:`BenchSummary.to_dict` is the JSON
on disk and of ``bench --json``, :meth:`BenchSummary.from_dict` reads one back (tolerantly: a missing or
mistyped field is None or empty, never an exception). :func:`build_summary` makes one from what a run
measured, handed over field by field (this module knows nothing of the runner).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field, fields, replace
from pathlib import Path
from typing import Any, TypeVar

from cockpit import __version__
from cockpit.api.urls import redact
from cockpit.bench.engine_metrics import spec_decode
from cockpit.bench.records import DecodeCell, DepthCell, RequestRecord
from cockpit.bench.records import headline as headline_rows
from cockpit.bench.stats import Spread
from cockpit.bench.suite import tokens_label
from cockpit.bench.telemetry import CellTelemetry
from cockpit.files import NotReadable, loads_bounded, read_bounded

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


# --- the typed summary -----------------------------------------------------------------------------

R = TypeVar("R")


def _pick(cls: type[R], d: Any) -> R:
    """A row dataclass from a dict: its fields by name, a missing one None (a tolerant reader)."""
    src = d if isinstance(d, Mapping) else {}
    return cls(**{f.name: src.get(f.name) for f in fields(cls)})  # type: ignore[arg-type]


def _rows(cls: type[R], items: Any) -> tuple[R, ...]:
    return tuple(_pick(cls, x) for x in items if isinstance(x, Mapping)) if isinstance(items, list) else ()


@dataclass(frozen=True, slots=True)
class HeadlineRow:
    """Per concurrency: the mean over the headline categories (``complete`` only when all were measured)."""

    concurrency: int
    categories: int
    of: int
    complete: bool
    per_stream_tps: float | None
    aggregate_tps: float | None


@dataclass(frozen=True, slots=True)
class PrefillRow:
    target_tokens: int
    prompt_tokens: int | None
    ttft_s: float | None
    prefill_tps: float | None
    ok: bool
    error: dict[str, Any] | None


@dataclass(frozen=True, slots=True)
class NeedleRow:
    context_tokens: int
    prompt_tokens: int | None
    depth: float
    passed: bool
    secret: str
    answer: str
    error: dict[str, Any] | None


@dataclass(frozen=True, slots=True)
class CheckRow:
    """One vision or tools check (:class:`cockpit.bench.checks.CheckRecord`)."""

    name: str
    group: str
    passed: bool
    reason: str
    request: dict[str, Any] | None
    response: dict[str, Any] | None


@dataclass(frozen=True, slots=True)
class ProbeRow:
    """One idle-probe request (:class:`cockpit.bench.checks.ProbeRecord`)."""

    name: str
    idle_s: float
    ttft_s: float | None
    decode_tps: float | None
    completion_tokens: int | None
    estimated: bool
    back_to_back: bool
    error: str


@dataclass(frozen=True, slots=True)
class SpecDecode:
    """Speculative decoding over the run (engine /metrics before and after); ``reason`` when not read."""

    available: bool
    reason: str | None = None
    drafts: float | None = None
    draft_tokens: float | None = None
    accepted_tokens: float | None = None
    acceptance_rate: float | None = None
    mean_acceptance_length: float | None = None
    generation_tokens: float | None = None
    prompt_tokens: float | None = None

    def to_dict(self) -> dict[str, Any]:
        if self.reason is not None:
            return {"available": self.available, "reason": self.reason}
        out = asdict(self)
        out.pop("reason")
        return out

    @classmethod
    def from_dict(cls, d: Any) -> SpecDecode:
        row = _pick(cls, d)
        return row if isinstance(row.available, bool) else SpecDecode(False, row.reason)


@dataclass(frozen=True, slots=True)
class CardRow:
    figure: str
    measure: str
    card: float
    this_run: float | None
    ratio: float | None


@dataclass(frozen=True, slots=True)
class CompareRow:
    figure: str
    earlier: float | None
    this_run: float | None
    ratio: float | None


@dataclass(frozen=True, slots=True)
class Compare:
    """This run against one earlier run (its ``summary.json``)."""

    source: str | None
    started_at: float | None
    rows: tuple[CompareRow, ...]

    def to_dict(self) -> dict[str, Any]:
        return {"source": self.source, "started_at": self.started_at, "rows": [asdict(r) for r in self.rows]}

    @classmethod
    def from_dict(cls, d: Any) -> Compare:
        src = d if isinstance(d, Mapping) else {}
        return cls(src.get("source"), src.get("started_at"), _rows(CompareRow, src.get("rows")))


@dataclass(frozen=True, slots=True)
class PromptsInfo:
    version: int | None
    source: str | None
    categories: dict[str, int] = field(default_factory=dict)
    headline_excludes: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True, slots=True)
class BenchSummary:
    """A run's summary. ``to_dict()`` is ``summary.json`` (and ``bench --json``) key for key."""

    status: str
    reason: str | None
    suite: str | None
    model: str | None
    api_url: str | None
    requests: int
    failed_requests: int
    cancelled_requests: int = 0
    started_at: float | None = None
    ended_at: float | None = None
    prompts: PromptsInfo = field(default_factory=lambda: PromptsInfo(None, None))
    decode: tuple[DecodeCell, ...] = ()
    headline: tuple[HeadlineRow, ...] = ()
    headline_categories: tuple[str, ...] = ()
    prefill: tuple[PrefillRow, ...] = ()
    needle: tuple[NeedleRow, ...] = ()
    checks: tuple[CheckRow, ...] = ()
    idle_probe: tuple[ProbeRow, ...] = ()
    spec_decode: SpecDecode = field(default_factory=lambda: SpecDecode(False, "not read"))
    notes: tuple[str, ...] = ()
    figures: dict[str, float] = field(default_factory=dict)
    card: tuple[CardRow, ...] = ()
    compare: tuple[Compare, ...] = ()
    depth: tuple[DepthCell, ...] = ()
    repeat: int = 1
    cockpit: str = __version__
    format: str = FORMAT
    version: int = VERSION

    @property
    def complete(self) -> bool:
        return self.status == "complete"

    def to_dict(self) -> dict[str, Any]:
        s: dict[str, Any] = {
            "format": self.format, "version": self.version, "cockpit": self.cockpit,
            "status": self.status, "reason": self.reason,
            "suite": self.suite, "model": self.model, "api_url": self.api_url,
            "started_at": self.started_at, "ended_at": self.ended_at,
            "requests": self.requests, "failed_requests": self.failed_requests,
            "cancelled_requests": self.cancelled_requests,
            "prompts": self.prompts.to_dict(),
            "decode": [c.to_dict() for c in self.decode],
            "headline": [asdict(r) for r in self.headline],
            "headline_categories": list(self.headline_categories),
            "prefill": [asdict(r) for r in self.prefill], "needle": [asdict(r) for r in self.needle],
            "checks": [asdict(r) for r in self.checks], "idle_probe": [asdict(r) for r in self.idle_probe],
            "spec_decode": self.spec_decode.to_dict(),
            "notes": list(self.notes),
        }
        if self.repeat > 1:
            s["repeat"] = self.repeat
        if self.depth:
            s["depth"] = [c.to_dict() for c in self.depth]
        s["figures"] = dict(self.figures)
        s["card"] = [asdict(r) for r in self.card]
        if self.compare:
            s["compare"] = self.compare[0].to_dict()
        if len(self.compare) > 1:
            s["compare_more"] = [c.to_dict() for c in self.compare[1:]]
        return s

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> BenchSummary:
        """A summary read back (an earlier run's, a test's): tolerant of missing and mistyped fields."""
        def num(key: str, default: int = 0) -> int:
            v = d.get(key)
            return v if isinstance(v, int) and not isinstance(v, bool) else default

        def lst(key: str) -> list[Any]:
            v = d.get(key)
            return v if isinstance(v, list) else []

        given = d.get("prompts")
        p: Mapping[str, Any] = given if isinstance(given, Mapping) else {}
        prompts = PromptsInfo(p.get("version"), p.get("source"), dict(p.get("categories") or {}),
                              list(p.get("headline_excludes") or []))
        comps = [Compare.from_dict(d["compare"])] if isinstance(d.get("compare"), Mapping) else []
        comps += [Compare.from_dict(c) for c in lst("compare_more") if isinstance(c, Mapping)]
        figs = d.get("figures")
        return cls(
            status=str(d.get("status")), reason=d.get("reason"), suite=d.get("suite"), model=d.get("model"),
            api_url=d.get("api_url"), requests=num("requests"), failed_requests=num("failed_requests"),
            cancelled_requests=num("cancelled_requests"), started_at=d.get("started_at"),
            ended_at=d.get("ended_at"), prompts=prompts,
            decode=tuple(DecodeCell.from_dict(c) for c in lst("decode") if isinstance(c, Mapping)),
            headline=_rows(HeadlineRow, d.get("headline")),
            headline_categories=tuple(str(c) for c in lst("headline_categories")),
            prefill=_rows(PrefillRow, d.get("prefill")), needle=_rows(NeedleRow, d.get("needle")),
            checks=_rows(CheckRow, d.get("checks")), idle_probe=_rows(ProbeRow, d.get("idle_probe")),
            spec_decode=SpecDecode.from_dict(d.get("spec_decode")),
            notes=tuple(str(n) for n in lst("notes")),
            figures={k: float(v) for k, v in figs.items() if isinstance(v, int | float)}
            if isinstance(figs, Mapping) else {},
            card=_rows(CardRow, d.get("card")), compare=tuple(comps),
            depth=tuple(DepthCell.from_dict(c) for c in lst("depth") if isinstance(c, Mapping)),
            repeat=num("repeat", 1), cockpit=str(d.get("cockpit", "")), format=str(d.get("format", FORMAT)),
            version=num("version", VERSION))


SummaryLike = BenchSummary | Mapping[str, Any]


def as_summary(s: SummaryLike) -> BenchSummary:
    return s if isinstance(s, BenchSummary) else BenchSummary.from_dict(s)


def figures(summary: SummaryLike) -> dict[str, float]:
    """Every number of a summary by a stable name (what ``--compare`` matches on)."""
    s = as_summary(summary)
    out: dict[str, float] = {}

    def put(name: str, value: Any) -> None:
        if isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value):
            out[name] = float(value)

    for cell in s.decode:
        base = f"decode.{cell.category}.c{cell.concurrency}"
        shown = cell.to_dict()          # the figures as summary.json has them (rounded)
        for key in ("per_stream_tps", "aggregate_tps", "ttft_s"):
            put(f"{base}.{key}", shown[key])
        if cell.repeats is not None:
            for key, sp in cell.repeats.spreads():
                put(f"{base}.{key}.mean", round(sp.mean, 4))
        if cell.telemetry is not None:
            put(f"{base}.energy_j_per_token", cell.telemetry.energy_j_per_token)
    for row in s.headline:
        if not row.complete:
            continue
        put(f"headline.c{row.concurrency}.per_stream_tps", row.per_stream_tps)
        put(f"headline.c{row.concurrency}.aggregate_tps", row.aggregate_tps)
    for pre in s.prefill:
        put(f"prefill.{pre.target_tokens}.prefill_tps", pre.prefill_tps)
        put(f"prefill.{pre.target_tokens}.ttft_s", pre.ttft_s)
    for dc in s.depth:
        put(f"depth.{dc.depth}.decode_tps", dc.to_dict()["decode_tps"])
        if dc.repeats is not None and dc.repeats.decode_tps is not None:
            put(f"depth.{dc.depth}.decode_tps.mean", round(dc.repeats.decode_tps.mean, 4))
    for probe in s.idle_probe:
        kind = "back_to_back_tps" if probe.back_to_back else "decode_tps"
        put(f"idle_probe.{probe.name}.{kind}", probe.decode_tps)
    if s.checks:
        for group in ("tools", "vision"):
            mine = [c for c in s.checks if c.group == group]
            if mine:
                put(f"checks.{group}.passed", sum(bool(c.passed) for c in mine))
        put("checks.passed", sum(bool(c.passed) for c in s.checks))
    put("spec_decode.acceptance_rate", s.spec_decode.acceptance_rate)
    put("spec_decode.mean_acceptance_length", s.spec_decode.mean_acceptance_length)
    return out


def _ratio(this: float | None, ref: float | None) -> float | None:
    if this is None or ref is None or ref == 0:
        return None
    return round(this / ref, 4)


def card_rows(figs: dict[str, float]) -> list[CardRow]:
    """This run next to the card's reference figures."""
    return [CardRow(name, label, ref, _like(figs.get(name), ref), _ratio(figs.get(name), ref))
            for name, label, ref in CARD]


def _like(value: float | None, ref: float) -> float | None:
    """A count (checks passed) stays a count: 3, as the card gives it, not 3.00."""
    if isinstance(ref, int) and isinstance(value, float) and value.is_integer():
        return int(value)
    return value


def compare_rows(figs: dict[str, float], earlier: Mapping[str, Any]) -> list[CompareRow]:
    """This run next to an earlier one: every figure either has, with the ratio this / earlier."""
    given = earlier.get("figures")
    old: Mapping[str, Any] = given if isinstance(given, Mapping) else figures(earlier)
    names = [n for n in figs if n in old] + [n for n in old if n not in figs]
    return [CompareRow(n, old.get(n), figs.get(n),
                       _ratio(figs.get(n), old.get(n) if isinstance(old.get(n), int | float) else None))
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


@dataclass(frozen=True, slots=True)
class RunFacts:
    """What a run measured, as the runner hands it over to :func:`build_summary`."""

    status: str
    reason: str | None
    suite: str
    model: str
    base_url: str
    started_at: float
    ended_at: float | None
    records: Sequence[RequestRecord]
    prompts: dict[str, Any]
    headline_categories: Sequence[str]
    decode: Sequence[DecodeCell]
    prefill: Sequence[Mapping[str, Any]]
    needles: Sequence[Mapping[str, Any]]
    checks: Sequence[Mapping[str, Any]]
    idle_probe: Sequence[Mapping[str, Any]]
    metrics_before: str | None
    metrics_after: str | None
    notes: Sequence[str]
    depth: Sequence[DepthCell] = ()
    repeat: int = 1


def build_summary(run: RunFacts, earlier: Sequence[Mapping[str, Any]] | Mapping[str, Any] | None = None
                  ) -> BenchSummary:
    """The summary of a run so far (also of one cancelled or failed: ``status`` says which)."""
    measured = [r for r in run.records if r.kind != "warmup"]
    cancelled = sum(1 for r in measured if not r.ok and (r.error or {}).get("kind") == "cancelled")
    failed = sum(1 for r in measured if not r.ok) - cancelled
    p = run.prompts
    base = BenchSummary(
        status=run.status, reason=run.reason, suite=run.suite, model=run.model, api_url=redact(run.base_url),
        started_at=run.started_at, ended_at=run.ended_at,
        requests=len(measured), failed_requests=failed, cancelled_requests=cancelled,
        prompts=PromptsInfo(p.get("version"), p.get("source"), dict(p.get("categories") or {}),
                            list(p.get("headline_excludes") or [])),
        decode=tuple(run.decode),
        headline=_rows(HeadlineRow, headline_rows(list(run.decode), list(run.headline_categories))),
        headline_categories=tuple(run.headline_categories),
        prefill=_rows(PrefillRow, list(run.prefill)), needle=_rows(NeedleRow, list(run.needles)),
        checks=_rows(CheckRow, list(run.checks)), idle_probe=_rows(ProbeRow, list(run.idle_probe)),
        spec_decode=SpecDecode.from_dict(spec_decode(run.metrics_before, run.metrics_after)),
        notes=tuple(run.notes), depth=tuple(run.depth), repeat=run.repeat)
    figs = figures(base)
    olds = [earlier] if isinstance(earlier, Mapping) else list(earlier or [])
    comps = tuple(Compare(e.get("_source"), e.get("started_at"), tuple(compare_rows(figs, e))) for e in olds)
    return replace(base, figures=figs, card=tuple(card_rows(figs)), compare=comps)


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


def _decode_tables(s: BenchSummary) -> list[str]:
    cells = s.decode
    if not cells:
        return []
    concs = sorted({c.concurrency for c in cells})
    cats = list(dict.fromkeys(c.category for c in cells))
    by = {(c.category, c.concurrency): c for c in cells}
    ceiling = {c.category for c in cells if not c.headline}
    heads = {r.concurrency: r for r in s.headline}
    first = next(iter(heads.values()), None)
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
                elif cell.failed:
                    row.append(f"{cell.failed}/{cell.requests} failed")
                else:
                    row.append(_f(getattr(cell, key), nd))
            rows.append(row)
        if key != "ttft_s":
            n = len(s.headline_categories)
            label = (f"**headline (mean of {n})**" if first is not None and first.complete
                     else f"mean of {first.categories if first else None} of {n} (not the headline)")
            rows.append([label, *[f"**{_f(getattr(heads[c], key) if c in heads else None, nd)}**"
                                  for c in concs]])
        out += _section(f"### {title}", ["category", *[f"C{c}" for c in concs]], rows)
    return out


def spread_text(sp: Spread | None, nd: int = 2) -> str:
    """``50.12 ± 0.31 (95 % CI 49.80–50.44)``; one run: its value; none: —."""
    if sp is None:
        return "—"
    if sp.std is None or sp.ci95_low is None or sp.ci95_high is None:
        return f"{sp.mean:.{nd}f} (1 run)"
    return f"{sp.mean:.{nd}f} ± {sp.std:.{nd}f} (95 % CI {sp.ci95_low:.{nd}f}–{sp.ci95_high:.{nd}f})"


def _repeat_table(s: BenchSummary) -> list[str]:
    cells = [c for c in s.decode if c.repeats is not None]
    if not cells:
        return []
    return _section(
        f"### Repeated {s.repeat} times: mean ± std (95 % CI, Student t)",
        ["cell", "per-stream (tok/s)", "aggregate (tok/s)", "TTFT (s)", "first run per-stream"],
        [[f"{c.category} C{c.concurrency}",
          spread_text(c.repeats.per_stream_tps if c.repeats else None),
          spread_text(c.repeats.aggregate_tps if c.repeats else None),
          spread_text(c.repeats.ttft_s if c.repeats else None, 3), _f(c.per_stream_tps)] for c in cells])


def energy_text(t: CellTelemetry | None) -> str:
    if t is None:
        return "—"
    if t.energy_j_per_token is None:
        return "unknown"
    return f"{t.energy_j_per_token:.3f}"


def _rank_figure(t: CellTelemetry | None, key: str, nd: int) -> str:
    if t is None or not t.ranks:
        return "—"
    return " / ".join(_f(getattr(r, key), nd) if getattr(r, key) is not None else "unknown" for r in t.ranks)


def telemetry_rows(s: BenchSummary) -> list[tuple[str, CellTelemetry]]:
    rows = [(f"{c.category} C{c.concurrency}", c.telemetry) for c in s.decode if c.telemetry is not None]
    rows += [(f"depth {tokens_label(d.depth)}", d.telemetry) for d in s.depth if d.telemetry is not None]
    return rows


def _telemetry_table(s: BenchSummary) -> list[str]:
    rows = telemetry_rows(s)
    if not rows:
        return []
    return ["## Telemetry per cell", "",
            "Means over the cell's window per rank (rank 0 / 1 / …); KV cache: rank 0's engine, peak; "
            "energy: "
            "Σ power × wall time / tokens generated, unknown unless every rank's power was read.", "",
            *_table(["cell", "power (W)", "SM clock (MHz)", "RDMA tx (Gb/s)", "RDMA rx (Gb/s)",
                     "KV cache peak (%)", "energy (J/token)"],
                    [[label, _rank_figure(t, "power_w", 1), _rank_figure(t, "sm_mhz", 0),
                      _rank_figure(t, "tx_gbps", 2), _rank_figure(t, "rx_gbps", 2),
                      _f(t.kv_cache_pct_max, 1) if t.kv_cache_pct_max is not None else "unknown",
                      energy_text(t)] for label, t in rows])]


def _depth_table(s: BenchSummary) -> list[str]:
    if not s.depth:
        return []
    rows = []
    for d in s.depth:
        reps = d.repeats.decode_tps if d.repeats is not None else None
        rows.append([tokens_label(d.depth), _f(d.prompt_tokens), _f(d.ttft_s, 3),
                     _f(d.decode_tps) if d.ok else "failed", spread_text(reps) if reps else "—"])
    return _section("## Decode at context depth", ["depth", "prompt tokens (usage)", "TTFT (s)",
                                                   "decode (tok/s, first run)", "mean ± std (95 % CI)"], rows)


def _probe_after(p: ProbeRow) -> str:
    return "back-to-back" if p.back_to_back else f"{p.idle_s} s idle"


def request_counts(summary: SummaryLike) -> str:
    """`12 requests, 1 failed, 3 cancelled` (cancelled only when some were)."""
    s = as_summary(summary)
    text = f"{s.requests} requests, {s.failed_requests} failed"
    return text + (f", {s.cancelled_requests} cancelled" if s.cancelled_requests else "")


def render_markdown(summary: SummaryLike) -> str:
    """``summary.md``: status, the decode tables, depth, prefill, needle, checks, telemetry, the card and
    every compare."""
    s = as_summary(summary)
    status = s.status
    lines = [f"# Benchmark: {s.suite} suite, {s.model}", "",
             f"Status: **{status}**" + (f": {s.reason}" if s.reason else "")
             + f". Requests: {request_counts(s)}. "
             f"API: {s.api_url}. Prompt set v{s.prompts.version} ({s.prompts.source}).", ""]
    if status != "complete":
        lines += ["**This run did not complete: its figures are partial and not comparable.**", ""]
    lines += ["## Decode", "", "Temperature 0, thinking off, tokens from `usage`; every cell's C streams "
              "released together.", "", *_decode_tables(s), *_repeat_table(s), *_depth_table(s)]
    if s.prefill:
        lines += _section("## Prefill", ["target", "prompt tokens", "TTFT (s)", "prefill (tok/s)"], [
            [str(r.target_tokens), _f(r.prompt_tokens), _f(r.ttft_s, 3),
             _f(r.prefill_tps) if r.ok else "failed"] for r in s.prefill])
    if s.needle:
        lines += _section("## Needle", ["context", "depth", "result", "answer"], [
            [str(r.prompt_tokens or r.context_tokens),
             f"{r.depth:.0%}" if isinstance(r.depth, int | float) else "—", _f(bool(r.passed)),
             str(r.answer or "")[:80]] for r in s.needle])
    if s.checks:
        lines += _section("## Vision and tools", ["check", "group", "result", "reason"], [
            [str(c.name or ""), str(c.group or ""), _f(bool(c.passed)), str(c.reason or "")[:120]]
            for c in s.checks])
    if s.idle_probe:
        lines += _section("## Idle probe", ["prompt", "after", "decode (tok/s)", "TTFT (s)"], [
            [str(p.name), _probe_after(p), _f(p.decode_tps) + (" (estimated)" if p.estimated else ""),
             _f(p.ttft_s, 3)] for p in s.idle_probe])
    spec = s.spec_decode
    if spec.available:
        lines += ["## Speculative decoding (engine /metrics over the run)", "",
                  f"Draft acceptance rate {_f(spec.acceptance_rate, 3)}, mean acceptance length "
                  f"{_f(spec.mean_acceptance_length, 3)} ({_f(spec.drafts, 0)} drafts).", ""]
    lines += _telemetry_table(s)
    card_note = ([f"Decode figures are each cell's first run (the card's method: one batch per cell); the "
                  f"mean of the {s.repeat} runs is in the table above.", ""] if s.repeat > 1 else [])
    lines += [*_section("## Compared with the recipe card", ["measure", "card", "this run", "ratio"], [
        [r.measure, _f(r.card), _f(r.this_run), _f(r.ratio, 3)] for r in s.card])[:-1], "", *card_note]
    for comp in s.compare:
        header = ["figure", "earlier", "this run", "ratio"]
        lines += _section(f"## Compared with {comp.source}", header, [
            [r.figure, _f(r.earlier), _f(r.this_run), _f(r.ratio, 3)] for r in comp.rows])
    if s.notes:
        lines += ["## Notes", "", *[f"- {n}" for n in s.notes], ""]
    return "\n".join(lines)
