"""One request's raw record, and the figures of a cell of them (the method's formulas).

Timing is :class:`cockpit.api.stream.StreamStats` (client-side; kernel arrival times on plain http):
TTFT to the first content-or-reasoning delta, per-stream decode ``(completion_tokens - 1) / (total -
TTFT)``, a cell's aggregate ``Σ completion_tokens / batch wall time`` (:func:`aggregate_tps`). Tokens
come from ``usage`` only: a request without it has no figure, and a failed request is never a success.
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Mapping
from dataclasses import asdict, dataclass, field
from statistics import fmean
from typing import Any, Literal

from cockpit.api.stream import ChatResult, StreamError, StreamStats, aggregate_tps
from cockpit.bench.stats import Spread, spread
from cockpit.bench.telemetry import CellTelemetry

RecordKind = Literal["warmup", "calibrate", "decode", "prefill", "needle", "depth"]
MAX_TEXT_CHARS = 64 * 1024
"""The most answer text a record keeps (the rest is cut, and says so)."""
PROMPT_HEAD_CHARS = 400

_WALL_MINUS_PERF = time.time() - time.perf_counter()


def wall(perf: float | None) -> float | None:
    """A ``time.perf_counter`` reading as Unix seconds (for the raw record)."""
    return None if perf is None else round(perf + _WALL_MINUS_PERF, 6)


@dataclass(slots=True)
class RequestRecord:
    """One request as sent and as answered; ``ok`` only when it finished without an error."""

    n: int
    kind: RecordKind
    cell: str
    category: str
    concurrency: int
    max_tokens: int
    prompt_chars: int
    prompt_head: str
    ok: bool = False
    finish_reason: str | None = None
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    reasoning_tokens: int | None = None
    t_start: float | None = None
    t_first_token: float | None = None
    t_end: float | None = None
    chunks: int | None = None
    text: str = ""
    error: dict[str, Any] | None = None
    extra: dict[str, Any] = field(default_factory=dict)
    stats: StreamStats | None = field(default=None, repr=False)

    @property
    def ttft_s(self) -> float | None:
        return self.stats.ttft_s if self.stats else None

    @property
    def decode_tps(self) -> float | None:
        return self.stats.decode_tps if self.stats and self.ok else None

    def take(self, result: ChatResult | None, stats: StreamStats | None, error: StreamError | None) -> None:
        """Fill in what came back: a result (finished), or an error with what arrived before it."""
        if error is not None:
            self.error = {"kind": error.kind, "message": error.message[:2000], "status": error.status}
            result = result or error.partial
            stats = stats or (error.partial.stats if error.partial else None)
        self.ok = error is None and result is not None
        if result is not None:
            self.finish_reason = result.finish_reason
            text = result.content
            if len(text) > MAX_TEXT_CHARS:
                self.extra["text_cut_at"] = MAX_TEXT_CHARS
                text = text[:MAX_TEXT_CHARS]
            self.text = text
            if result.usage is not None:
                self.prompt_tokens = result.usage.prompt_tokens
                self.completion_tokens = result.usage.completion_tokens
                self.reasoning_tokens = result.usage.reasoning_tokens
        if stats is not None:
            self.stats = stats if result is None or result.usage is not None else None
            self.t_start, self.t_first_token, self.t_end = (
                wall(stats.t_start), wall(stats.t_first_token), wall(stats.t_end))
            self.chunks = stats.chunks
        if self.ok and result is not None and result.usage is None:
            self.extra["no_usage"] = "the server sent no usage: no token count, no rate"

    def cancelled(self) -> None:
        self.ok = False
        self.error = {"kind": "cancelled", "message": "the run was cancelled; the request was closed",
                      "status": None}

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out.pop("stats")
        out["ttft_s"] = _round(self.ttft_s)
        out["decode_tps"] = _round(self.decode_tps)
        out["total_s"] = _round(self.stats.total_s) if self.stats else None
        return out


def _round(x: float | None, nd: int = 4) -> float | None:
    return None if x is None else round(x, nd)


def _num(v: Any) -> float | None:
    return float(v) if isinstance(v, int | float) and not isinstance(v, bool) else None


def _int(v: Any) -> int | None:
    return v if isinstance(v, int) and not isinstance(v, bool) else None


@dataclass(frozen=True, slots=True)
class CellRepeats:
    """A cell measured N times (``bench --repeat N``): each run's figures and their spread."""

    n: int
    per_stream_tps: Spread | None
    aggregate_tps: Spread | None
    ttft_s: Spread | None
    runs: tuple[dict[str, float | None], ...]

    KEYS = ("per_stream_tps", "aggregate_tps", "ttft_s")

    def spreads(self) -> Iterator[tuple[str, Spread]]:
        for key in self.KEYS:
            sp = getattr(self, key)
            if sp is not None:
                yield key, sp

    @classmethod
    def of(cls, cells: list[DecodeCell]) -> CellRepeats:
        runs = tuple({k: _round(getattr(c, k)) for k in cls.KEYS} for c in cells)
        return cls(len(cells), spread(c.per_stream_tps for c in cells),
                   spread(c.aggregate_tps for c in cells), spread(c.ttft_s for c in cells), runs)

    def to_dict(self) -> dict[str, Any]:
        return {"n": self.n, **{k: None if getattr(self, k) is None else getattr(self, k).to_dict()
                                for k in self.KEYS}, "runs": [dict(r) for r in self.runs]}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> CellRepeats:
        def sp(key: str) -> Spread | None:
            v = d.get(key)
            return Spread.from_dict(v) if isinstance(v, Mapping) else None
        runs = d.get("runs")
        return cls(_int(d.get("n")) or 0, sp("per_stream_tps"), sp("aggregate_tps"), sp("ttft_s"),
                   tuple(dict(r) for r in runs if isinstance(r, Mapping)) if isinstance(runs, list) else ())


@dataclass(frozen=True, slots=True)
class DecodeCell:
    """The figures of one decode cell: C streams of one category released together.

    With ``--repeat N`` the cell's figures are those of its first run (the card's method: one batch per
    cell) and ``repeats`` holds all N with their mean, std and 95 % interval."""

    category: str
    concurrency: int
    requests: int
    failed: int
    per_stream_tps: float | None
    ttft_s: float | None
    aggregate_tps: float | None
    completion_tokens: int | None
    headline: bool
    repeats: CellRepeats | None = None
    telemetry: CellTelemetry | None = None

    @classmethod
    def of(cls, category: str, concurrency: int, records: list[RequestRecord], headline: bool) -> DecodeCell:
        failed = sum(1 for r in records if not r.ok)
        stats = [r.stats for r in records if r.stats is not None]
        whole = failed == 0 and len(stats) == len(records) and bool(records)
        rates = [r.decode_tps for r in records]
        ttfts = [r.ttft_s for r in records]
        return cls(
            category, concurrency, len(records), failed,
            fmean(x for x in rates if x is not None) if whole and all(x is not None for x in rates) else None,
            fmean(x for x in ttfts if x is not None) if whole and all(x is not None for x in ttfts) else None,
            aggregate_tps(stats) if whole else None,
            sum(r.completion_tokens or 0 for r in records) if whole else None,
            headline)

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        for k in ("per_stream_tps", "ttft_s", "aggregate_tps"):
            out[k] = _round(out[k])
        for k in ("repeats", "telemetry"):       # keys only when measured: the card's shape otherwise
            value = getattr(self, k)
            if value is None:
                out.pop(k)
            else:
                out[k] = value.to_dict()
        return out

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> DecodeCell:
        rep, tel = d.get("repeats"), d.get("telemetry")
        return cls(str(d.get("category")), _int(d.get("concurrency")) or 0, _int(d.get("requests")) or 0,
                   _int(d.get("failed")) or 0, _num(d.get("per_stream_tps")), _num(d.get("ttft_s")),
                   _num(d.get("aggregate_tps")), _int(d.get("completion_tokens")), bool(d.get("headline")),
                   CellRepeats.from_dict(rep) if isinstance(rep, Mapping) else None,
                   CellTelemetry.from_dict(tel) if isinstance(tel, Mapping) else None)


@dataclass(frozen=True, slots=True)
class DepthRepeats:
    n: int
    decode_tps: Spread | None
    runs: tuple[float | None, ...]

    def to_dict(self) -> dict[str, Any]:
        return {"n": self.n, "decode_tps": None if self.decode_tps is None else self.decode_tps.to_dict(),
                "runs": [_round(r) for r in self.runs]}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> DepthRepeats:
        v, runs = d.get("decode_tps"), d.get("runs")
        return cls(_int(d.get("n")) or 0, Spread.from_dict(v) if isinstance(v, Mapping) else None,
                   tuple(_num(r) for r in runs) if isinstance(runs, list) else ())


@dataclass(frozen=True, slots=True)
class DepthCell:
    """Single-stream decode with ``depth`` tokens of context in front (``--depth``, as llama-benchy):
    ``prompt_tokens`` is the engine's count (``usage``), the decode rate excludes the prefill (TTFT)."""

    depth: int
    prompt_tokens: int | None
    completion_tokens: int | None
    decode_tps: float | None
    ttft_s: float | None
    ok: bool
    error: dict[str, Any] | None = None
    repeats: DepthRepeats | None = None
    telemetry: CellTelemetry | None = None

    @classmethod
    def of(cls, depth: int, records: list[RequestRecord]) -> DepthCell:
        """The first run's figures (as the decode cells), every run's rate in ``repeats``."""
        first = records[0]
        reps = (DepthRepeats(len(records), spread(r.decode_tps for r in records),
                             tuple(r.decode_tps for r in records)) if len(records) > 1 else None)
        return cls(depth, first.prompt_tokens, first.completion_tokens, first.decode_tps, first.ttft_s,
                   first.ok, first.error, reps)

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["decode_tps"], out["ttft_s"] = _round(self.decode_tps), _round(self.ttft_s)
        for k in ("repeats", "telemetry"):
            value = getattr(self, k)
            out[k] = None if value is None else value.to_dict()
        return out

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> DepthCell:
        rep, tel, err = d.get("repeats"), d.get("telemetry"), d.get("error")
        return cls(_int(d.get("depth")) or 0, _int(d.get("prompt_tokens")), _int(d.get("completion_tokens")),
                   _num(d.get("decode_tps")), _num(d.get("ttft_s")), bool(d.get("ok")),
                   dict(err) if isinstance(err, Mapping) else None,
                   DepthRepeats.from_dict(rep) if isinstance(rep, Mapping) else None,
                   CellTelemetry.from_dict(tel) if isinstance(tel, Mapping) else None)


def headline(cells: list[DecodeCell], categories: list[str]) -> list[dict[str, Any]]:
    """Per concurrency: the mean over the headline categories of per-stream decode and aggregate.

    ``complete`` only when every headline category has its figure (the method's headline); otherwise the
    mean is over the categories measured, and says so (``categories`` of ``of``)."""
    out = []
    for c in sorted({cell.concurrency for cell in cells}):
        row = {cell.category: cell for cell in cells if cell.concurrency == c and cell.category in categories}
        per = [row[k].per_stream_tps for k in row]
        agg = [row[k].aggregate_tps for k in row]
        whole = bool(row) and None not in per and None not in agg
        out.append({
            "concurrency": c, "categories": len(row), "of": len(categories),
            "complete": whole and len(row) == len(categories),
            "per_stream_tps": _round(fmean(x for x in per if x is not None)) if whole else None,
            "aggregate_tps": _round(fmean(x for x in agg if x is not None)) if whole else None,
        })
    return out
