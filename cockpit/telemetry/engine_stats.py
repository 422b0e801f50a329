"""Engine statistics from successive readings of rank 0's ``/metrics`` (vLLM's Prometheus text).

:func:`parse_snapshot` reads one text with ``prometheus_client``'s parser into a :class:`Snapshot`
(never raises: unreadable text gives a snapshot whose ``error`` says why). :func:`compute` turns the
window of snapshots of one series into a typed :class:`EngineStatsReading`; :class:`EngineStats` is
fed snapshots in order and keeps that window bounded (last ``max_samples`` and ``window_s`` seconds).

- Gauges (requests running/waiting, KV cache usage) are the newest snapshot's, as read.
- Rates, hit and acceptance rates, preemptions and request success by finish reason are the counter
  deltas between the last two snapshots (the interval).
- TTFT and inter-token latency percentiles come from the histogram bucket deltas between the oldest
  and the newest snapshot of the window (not since the engine started).
- A counter that goes backwards means the engine restarted: a new series starts at that snapshot, the
  interval's rates are None (never negative) and the next interval is computed from the new baseline.
- A family the text lacks gives None for the fields it feeds, never 0.

Values are summed over label sets (``engine``, ``model_name``); KV cache usage is the fullest engine's.
"""

from __future__ import annotations

import functools
import math
import time
from collections import deque
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from prometheus_client.parser import text_string_to_metric_families

from cockpit.api.client import ApiClient
from cockpit.api.liveness import (
    GENERATION,
    KV_USAGE,
    PARSE_ERRORS,
    PROMPT,
    READ_TIMEOUT_S,
    RUNNING,
    WAITING,
    read_metrics_text,
    wanted_lines,
)

PREEMPTIONS = "vllm:num_preemptions_total"
SUCCESS = "vllm:request_success_total"
PREFIX_QUERIES = "vllm:prefix_cache_queries_total"
PREFIX_HITS = "vllm:prefix_cache_hits_total"
SPEC_DRAFTS = "vllm:spec_decode_num_drafts_total"
SPEC_DRAFT_TOKENS = "vllm:spec_decode_num_draft_tokens_total"
SPEC_ACCEPTED = "vllm:spec_decode_num_accepted_tokens_total"
TTFT = "vllm:time_to_first_token_seconds"
ITL = "vllm:inter_token_latency_seconds"
FINISH_LABEL = "finished_reason"

COUNTERS = (GENERATION, PROMPT, PREEMPTIONS, SUCCESS, PREFIX_QUERIES, PREFIX_HITS, SPEC_DRAFTS,
            SPEC_DRAFT_TOKENS, SPEC_ACCEPTED)
HISTOGRAMS = (TTFT, ITL)
GAUGES = (RUNNING, WAITING, *KV_USAGE)
QUANTILES = (0.5, 0.9, 0.99)

Labels = tuple[tuple[str, str], ...]


@dataclass(frozen=True, slots=True)
class Snapshot:
    """One ``/metrics`` text, read: ``values[sample name][sorted label pairs] = value`` for the families
    this module uses. ``at``: seconds on the caller's clock (:func:`time.monotonic` in
    :func:`read_snapshot`; the stats monitor passes :func:`time.time`, so that readings can be aged and
    shown with wall times; a clock that steps back starts a new series). ``error``: why the text could
    not be read (then ``values`` may be partial or empty); ``skipped``: lines the parser rejected when
    the rest was still read."""

    at: float
    values: Mapping[str, Mapping[Labels, float]] = field(default_factory=dict)
    error: str | None = None
    skipped: int = 0

    def total(self, name: str) -> float | None:
        """The sum over label sets, None when the family is absent."""
        series = self.values.get(name)
        return None if not series else math.fsum(series.values())

    def by_label(self, name: str, label: str) -> dict[str, float] | None:
        """Values summed by one label's value (other labels summed over), None when absent."""
        series = self.values.get(name)
        if not series:
            return None
        out: dict[str, float] = {}
        for labels, value in series.items():
            key = dict(labels).get(label, "")
            out[key] = out.get(key, 0.0) + value
        return out

    def buckets(self, histogram: str) -> dict[float, float] | None:
        """Cumulative bucket counts by upper bound (``+Inf`` included), summed over label sets."""
        series = self.values.get(histogram + "_bucket")
        if not series:
            return None
        out: dict[float, float] = {}
        for labels, value in series.items():
            le = dict(labels).get("le")
            if le is None:
                continue
            try:
                bound = float(le)
            except ValueError:
                continue
            out[bound] = out.get(bound, 0.0) + value
        return out or None


def _wanted_names() -> frozenset[str]:
    hist = {h + suffix for h in HISTOGRAMS for suffix in ("_bucket", "_count", "_sum")}
    return frozenset({*COUNTERS, *GAUGES, *hist})


WANTED = _wanted_names()


def _collect(families: Iterable[Any], into: dict[str, dict[Labels, float]]) -> None:
    for fam in families:
        for s in fam.samples:
            if s.name not in WANTED or not isinstance(s.value, int | float) or not math.isfinite(s.value):
                continue
            into.setdefault(s.name, {})[tuple(sorted(s.labels.items()))] = float(s.value)


def parse_snapshot(text: str, at: float) -> Snapshot:
    """A :class:`Snapshot` of Prometheus text; never raises. A line the parser rejects is skipped and
    counted; text with none of vLLM's families is an error."""
    values, skipped = _parse_wanted(wanted_lines(text, WANTED))   # not every histogram of the engine
    if not values:
        why = f"{skipped} line(s) could not be parsed" if skipped else "no vLLM families in the text"
        return Snapshot(at, {}, f"/metrics is not vLLM's Prometheus text: {why}", skipped)
    return Snapshot(at, values, None, skipped)


@functools.lru_cache(maxsize=2)
def _parse_wanted(text: str) -> tuple[Mapping[str, Mapping[Labels, float]], int]:
    """The values of the wanted lines and how many lines were skipped. Kept for the last texts: an idle
    engine's figures read the same every second, and are parsed once (the values are never changed)."""
    values: dict[str, dict[Labels, float]] = {}
    skipped = 0
    try:
        _collect(text_string_to_metric_families(text), values)
    except PARSE_ERRORS:
        values.clear()
        for line in text.splitlines():
            if not line.strip() or line.startswith("#"):
                continue
            try:
                _collect(text_string_to_metric_families(line + "\n"), values)
            except PARSE_ERRORS:
                skipped += 1
    return values, skipped


async def read_snapshot(client: ApiClient, timeout: float = READ_TIMEOUT_S) -> Snapshot:
    """``GET /metrics`` through ``client`` (the liveness reader's fetch and deadline) and parse it.

    Raises :class:`ApiError` (the client's, or kind ``timeout``)."""
    text = await read_metrics_text(client, timeout)
    return parse_snapshot(text, time.monotonic())


@dataclass(frozen=True, slots=True)
class EngineStatsReading:
    """What the window says. ``interval_s``: seconds between the last two snapshots of the series
    (None on a series' first snapshot); ``window_s``: seconds the latency percentiles cover.
    ``restarted``: a counter went backwards at this snapshot (a new series began). ``error``: the
    newest text could not be read (every other field is then None)."""

    at: float
    interval_s: float | None = None
    window_s: float | None = None
    running: int | None = None
    waiting: int | None = None
    kv_cache_usage: float | None = None
    generation_tokens_per_s: float | None = None
    prompt_tokens_per_s: float | None = None
    prefix_cache_hit_rate: float | None = None
    spec_acceptance_rate: float | None = None
    spec_mean_acceptance_length: float | None = None
    ttft_p50_s: float | None = None
    ttft_p90_s: float | None = None
    ttft_p99_s: float | None = None
    itl_p50_s: float | None = None
    itl_p90_s: float | None = None
    itl_p99_s: float | None = None
    preemptions: float | None = None
    request_success: dict[str, float] | None = None
    restarted: bool = False
    error: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def counters_went_back(prev: Snapshot, cur: Snapshot) -> bool:
    """True when any counter (or histogram bucket or count) read lower than before: a restart."""
    names = (*COUNTERS, *(h + s for h in HISTOGRAMS for s in ("_bucket", "_count")))
    for name in names:
        a, b = prev.values.get(name), cur.values.get(name)
        if not a or not b:
            continue
        if math.fsum(b.values()) < math.fsum(a.values()):
            return True
        if any(key in a and value < a[key] for key, value in b.items()):
            return True
    return False


def _delta(prev: Snapshot, cur: Snapshot, name: str) -> float | None:
    a, b = prev.total(name), cur.total(name)
    if a is None or b is None or b < a:
        return None
    return b - a


def _ratio(num: float | None, den: float | None) -> float | None:
    return None if num is None or not den else num / den


def histogram_quantile(q: float, buckets: Mapping[float, float]) -> float | None:
    """The ``q`` quantile (0..1) of cumulative bucket counts by upper bound, as Prometheus'
    ``histogram_quantile``: linear within the bucket, the highest finite bound when it falls in
    ``+Inf``; None when there are no observations."""
    bounds = sorted(buckets)
    if not bounds or not 0.0 <= q <= 1.0:
        return None
    total = buckets[bounds[-1]] if math.isinf(bounds[-1]) else max(buckets.values())
    if total <= 0:
        return None
    rank = q * total
    lower, below = 0.0, 0.0
    for bound in bounds:
        cum = buckets[bound]
        if cum >= rank and cum > below:
            if math.isinf(bound):
                return lower
            if bound <= 0:
                return bound
            return lower + (bound - lower) * (rank - below) / (cum - below)
        lower, below = bound, max(below, cum)
    return lower


def bucket_delta(old: Snapshot, new: Snapshot, histogram: str) -> dict[float, float] | None:
    """Cumulative bucket counts of the observations made between two snapshots (None when absent
    from either or when a bucket went backwards)."""
    a, b = old.buckets(histogram), new.buckets(histogram)
    if a is None or b is None:
        return None
    out: dict[float, float] = {}
    for bound, value in b.items():
        d = value - a.get(bound, 0.0)
        if d < 0:
            return None
        out[bound] = d
    return out


def _quantiles(old: Snapshot, new: Snapshot, histogram: str) -> list[float | None]:
    delta = bucket_delta(old, new, histogram)
    if delta is None:
        return [None] * len(QUANTILES)
    return [histogram_quantile(q, delta) for q in QUANTILES]


def _gauges(cur: Snapshot) -> dict[str, Any]:
    running, waiting = cur.total(RUNNING), cur.total(WAITING)
    kv = next((cur.values[n] for n in KV_USAGE if cur.values.get(n)), None)
    return {
        "running": None if running is None else max(0, round(running)),
        "waiting": None if waiting is None else max(0, round(waiting)),
        "kv_cache_usage": None if kv is None else max(kv.values()),
    }


def compute(window: Sequence[Snapshot], restarted: bool = False) -> EngineStatsReading:
    """The reading of a window of snapshots of one series, oldest first (each readable, no counter
    going back between them: :class:`EngineStats` keeps it so). ``restarted``: the newest began a new
    series (then the window holds only it)."""
    if not window:
        raise ValueError("compute needs at least one snapshot")
    cur = window[-1]
    if cur.error is not None:
        return EngineStatsReading(at=cur.at, error=cur.error)
    base = _gauges(cur)
    if len(window) < 2:
        return EngineStatsReading(at=cur.at, restarted=restarted, **base)
    prev, first = window[-2], window[0]
    dt = cur.at - prev.at

    def rate(name: str) -> float | None:
        d = _delta(prev, cur, name)
        return None if d is None or dt <= 0 else d / dt

    accepted = _delta(prev, cur, SPEC_ACCEPTED)
    drafts = _delta(prev, cur, SPEC_DRAFTS)
    success: dict[str, float] | None = None
    a, b = prev.by_label(SUCCESS, FINISH_LABEL), cur.by_label(SUCCESS, FINISH_LABEL)
    if a is not None and b is not None:
        success = {reason: max(0.0, value - a.get(reason, 0.0)) for reason, value in sorted(b.items())}
    ttft, itl = _quantiles(first, cur, TTFT), _quantiles(first, cur, ITL)
    return EngineStatsReading(
        at=cur.at,
        interval_s=dt,
        window_s=cur.at - first.at,
        generation_tokens_per_s=rate(GENERATION),
        prompt_tokens_per_s=rate(PROMPT),
        prefix_cache_hit_rate=_ratio(_delta(prev, cur, PREFIX_HITS), _delta(prev, cur, PREFIX_QUERIES)),
        spec_acceptance_rate=_ratio(accepted, _delta(prev, cur, SPEC_DRAFT_TOKENS)),
        spec_mean_acceptance_length=None if (r := _ratio(accepted, drafts)) is None else 1.0 + r,
        ttft_p50_s=ttft[0], ttft_p90_s=ttft[1], ttft_p99_s=ttft[2],
        itl_p50_s=itl[0], itl_p90_s=itl[1], itl_p99_s=itl[2],
        preemptions=_delta(prev, cur, PREEMPTIONS),
        request_success=success,
        **base,
    )


class EngineStats:
    """Feed it every snapshot in order; each :meth:`feed` returns the reading of the window so far.

    The window holds at most ``max_samples`` snapshots and spans at most ``window_s`` seconds (the
    newest two always stay, so there is always an interval). An unreadable snapshot is reported but
    leaves the window as it was; a counter going backwards (or the clock) empties the window and
    starts it again from that snapshot."""

    def __init__(self, max_samples: int = 60, window_s: float = 60.0) -> None:
        if max_samples < 2:
            raise ValueError("max_samples must be at least 2 (a rate needs two samples)")
        self.window_s = window_s
        self._window: deque[Snapshot] = deque(maxlen=max_samples)
        self.last: EngineStatsReading | None = None

    @property
    def window(self) -> tuple[Snapshot, ...]:
        return tuple(self._window)

    def feed(self, snap: Snapshot) -> EngineStatsReading:
        if snap.error is not None:
            self.last = compute([snap])
            return self.last
        restarted = bool(self._window) and counters_went_back(self._window[-1], snap)
        if restarted or (self._window and snap.at < self._window[-1].at):
            self._window.clear()
        self._window.append(snap)
        while len(self._window) > 2 and snap.at - self._window[0].at > self.window_s:
            self._window.popleft()
        self.last = compute(list(self._window), restarted)
        return self.last

    def feed_text(self, text: str, at: float) -> EngineStatsReading:
        """Parse ``text`` and :meth:`feed` it."""
        return self.feed(parse_snapshot(text, at))
