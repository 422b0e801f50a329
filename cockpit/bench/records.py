"""One request's raw record, and the figures of a cell of them (the method's formulas).

Timing is :class:`cockpit.api.stream.StreamStats` (client-side; kernel arrival times on plain http):
TTFT to the first content-or-reasoning delta, per-stream decode ``(completion_tokens - 1) / (total -
TTFT)``, a cell's aggregate ``Σ completion_tokens / batch wall time`` (:func:`aggregate_tps`). Tokens
come from ``usage`` only: a request without it has no figure, and a failed request is never a success.
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass, field
from statistics import fmean
from typing import Any, Literal

from cockpit.api.stream import ChatResult, StreamError, StreamStats, aggregate_tps

RecordKind = Literal["warmup", "calibrate", "decode", "prefill", "needle"]
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


@dataclass(frozen=True, slots=True)
class DecodeCell:
    """The figures of one decode cell: C streams of one category released together."""

    category: str
    concurrency: int
    requests: int
    failed: int
    per_stream_tps: float | None
    ttft_s: float | None
    aggregate_tps: float | None
    completion_tokens: int | None
    headline: bool

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
        return out


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
