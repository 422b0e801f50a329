"""Is the engine serving, idle or hung? Judged from rank 0's ``/metrics`` over time.

vLLM shows a hang as requests that stay running while ``vllm:generation_tokens_total`` stays flat
(reported: requests stuck at 0.0 tok/s for 90 s). One sample cannot tell: :class:`HangTracker` is fed
samples as they are taken and says, each time, what the series so far shows.

- ``idle``: nothing is running or waiting, and no tokens were processed since the last sample.
- ``serving``: tokens were processed since the last sample, or requests are in the engine and the
  counters have been flat for less than ``hang_after_s``.
- ``hung``: requests are running (or waiting) and neither ``vllm:generation_tokens_total`` nor
  ``vllm:prompt_tokens_total`` grew for ``hang_after_s`` seconds. (Prompt tokens count as progress: an
  engine that counts a chunked prefill as it goes is busy, not hung, during a long prompt.)
- ``unknown``: no sample yet, or ``/metrics`` does not carry vLLM's request and token families.

A counter that goes backwards means the engine restarted: the tracker starts a new series there and
never computes a negative rate.

Clock: ``EngineSample.at`` and ``Liveness.since`` are seconds of :func:`time.monotonic` (what
:func:`read_sample` stamps); a caller that builds samples itself may use any clock that only moves
forward, as long as it uses the same one for every sample it feeds.
"""

from __future__ import annotations

import asyncio
import functools
import math
import time
from dataclasses import asdict, dataclass
from typing import Any, Literal

from prometheus_client.parser import text_string_to_metric_families

from cockpit.api.client import ApiClient
from cockpit.api.errors import REMEDY_TIMEOUT, ApiError

LivenessState = Literal["unknown", "idle", "serving", "hung"]

RUNNING = "vllm:num_requests_running"
WAITING = "vllm:num_requests_waiting"
GENERATION = "vllm:generation_tokens_total"
PROMPT = "vllm:prompt_tokens_total"
KV_USAGE = ("vllm:kv_cache_usage_perc", "vllm:gpu_cache_usage_perc")  # current name first, then older
WANTED = frozenset({RUNNING, WAITING, GENERATION, PROMPT, *KV_USAGE})
REQUIRED = (RUNNING, GENERATION)  # without these two a series cannot say anything

READ_TIMEOUT_S = 5.0
PARSE_ERRORS = (ValueError, IndexError, TypeError)  # what prometheus_client's parser raises on bad text

REMEDY_HUNG = (
    "Collect rank 0's last lines (`r37-cockpit logs --rank 0 -n 200`), stop the cluster head first "
    "(`r37-cockpit stop`), then relaunch (`r37-cockpit launch --replace-stopped`)."
)
REMEDY_UNDECIDED = ("Look again in a few seconds (`r37-cockpit status`, or the Stats pane): the engine is "
                    "serving once its token counters grow, hung once they stay flat for the hang limit.")
REMEDY_NOT_VLLM = "The server's /metrics has no vLLM request and token counters: check the --api-url."


@dataclass(frozen=True, slots=True)
class EngineSample:
    """One reading of rank 0's ``/metrics``.

    Values are summed over every label set (one per engine, or per model name); ``kv_cache_usage`` is
    the fullest engine's (0..1). A family the text does not carry reads 0 (requests, token counters) or
    None (``kv_cache_usage``); ``found`` names the families that were there, so that "absent" and "zero"
    stay apart. ``at``: :func:`time.monotonic` seconds when the text was read (see the module doc).
    """

    running: int
    waiting: int
    generation_tokens_total: float
    prompt_tokens_total: float
    kv_cache_usage: float | None
    at: float
    found: frozenset[str] = frozenset()

    @property
    def complete(self) -> bool:
        """True when the running-requests gauge and the generation counter were both in the text."""
        return all(name in self.found for name in REQUIRED)

    @property
    def busy(self) -> bool:
        return self.running + self.waiting > 0


def wanted_lines(text: str, wanted: frozenset[str]) -> str:
    """Only the sample lines of `text` whose metric name is in `wanted` (comments dropped): what is left
    to parse of a /metrics text that is mostly other families' histogram buckets."""
    prefixes = tuple(wanted)
    return "".join(line + "\n" for line in text.splitlines()
                   if line.startswith(prefixes) and line.split("{", 1)[0].split(" ", 1)[0] in wanted)


def _samples(text: str) -> tuple[tuple[str, float], ...]:
    """(sample name, value) of every finite sample of a family we want. Tolerant: a line the parser
    rejects (junk, a line cut short) is skipped and the rest is still read. Only the wanted lines are
    parsed (a real vLLM's /metrics is mostly histogram buckets: parsing all of it every probe was the
    watching cockpit's largest cost, perf/watch_cost.py)."""
    return _parse_wanted(wanted_lines(text, WANTED))


@functools.lru_cache(maxsize=2)
def _parse_wanted(text: str) -> tuple[tuple[str, float], ...]:
    """`_samples` of the wanted lines; kept for the last texts (an idle engine's read the same)."""
    try:
        return tuple(_wanted(list(text_string_to_metric_families(text))))
    except PARSE_ERRORS:
        pass
    out: list[tuple[str, float]] = []
    for line in text.splitlines():
        try:
            out += _wanted(list(text_string_to_metric_families(line + "\n")))
        except PARSE_ERRORS:
            continue
    return tuple(out)


def _wanted(families: list[Any]) -> list[tuple[str, float]]:
    return [
        (s.name, float(s.value))
        for fam in families
        for s in fam.samples
        if s.name in WANTED and isinstance(s.value, int | float) and math.isfinite(s.value)
    ]


def parse_sample(text: str, at: float) -> EngineSample:
    """An :class:`EngineSample` from Prometheus text; never raises (see :class:`EngineSample` for what
    a missing family reads as)."""
    sums: dict[str, float] = {}
    peaks: dict[str, float] = {}
    for name, value in _samples(text):
        sums[name] = sums.get(name, 0.0) + value
        peaks[name] = max(peaks.get(name, value), value)
    kv_name = next((n for n in KV_USAGE if n in peaks), None)
    return EngineSample(
        running=max(0, round(sums.get(RUNNING, 0.0))),
        waiting=max(0, round(sums.get(WAITING, 0.0))),
        generation_tokens_total=sums.get(GENERATION, 0.0),
        prompt_tokens_total=sums.get(PROMPT, 0.0),
        kv_cache_usage=peaks[kv_name] if kv_name else None,
        at=at,
        found=frozenset(sums),
    )


async def read_metrics_text(client: ApiClient, timeout: float = READ_TIMEOUT_S) -> str:
    """``GET /metrics`` through ``client``, within ``timeout`` seconds in all.

    Raises :class:`ApiError` (the client's, or kind ``timeout`` when the deadline passes)."""
    try:
        async with asyncio.timeout(timeout):
            return await client.metrics_text()
    except TimeoutError:
        raise ApiError("timeout", f"{client.base_url}/metrics did not answer within {timeout:g} s",
                       REMEDY_TIMEOUT) from None


async def read_sample(client: ApiClient, timeout: float = READ_TIMEOUT_S) -> EngineSample:
    """``GET /metrics`` through ``client`` and parse it (:func:`read_metrics_text`'s deadline)."""
    text = await read_metrics_text(client, timeout)
    return parse_sample(text, time.monotonic())


@dataclass(frozen=True, slots=True)
class Liveness:
    """What the series of samples says about the engine. ``since``: when this state began (the clock
    of the samples; for ``hung``, when the counters stopped moving); None when unknown."""

    state: LivenessState
    since: float | None
    message: str
    remedy: str = ""

    @property
    def undecided(self) -> bool:
        """Requests in the engine and no new tokens seen since the series began, for less than the hang
        limit: whether it moves is not known yet (it may have stopped long before the first sample)."""
        return self.state == "unknown" and self.since is not None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


UNKNOWN = Liveness("unknown", None, "no /metrics sample yet")


def _requests(s: EngineSample) -> str:
    return f"{s.running} running, {s.waiting} waiting"


def _progress(gen: float, prompt: float, dt: float) -> str:
    """What was processed between two samples ``dt`` seconds apart (never a negative rate: the tracker
    calls this only when a counter grew)."""
    if gen > 0:
        return f"{gen / dt:.1f} tok/s generated" if dt > 0 else f"{gen:.0f} tokens generated"
    return f"prefill {prompt / dt:.0f} tok/s" if dt > 0 else f"prefill of {prompt:.0f} tokens"


class HangTracker:
    """Feed it every ``/metrics`` sample in order; each :meth:`feed` returns the engine's liveness."""

    def __init__(self, hang_after_s: float) -> None:
        self.hang_after_s = hang_after_s
        self.last: Liveness = UNKNOWN
        self._prev: EngineSample | None = None
        self._flat_since = 0.0  # first sample of the current run of busy samples without progress
        # when the current flat run began is known: it began at a sample of this series (after growth, an
        # idle sample or a restart), not before the first one (then the engine may have stopped long before)
        self._start_known = False

    def feed(self, sample: EngineSample) -> Liveness:
        if not sample.complete:
            self._prev = None  # what comes next starts a new series
            return self._set(Liveness("unknown", None, "/metrics has no "
                                      + " or ".join(n for n in REQUIRED if n not in sample.found),
                                      REMEDY_NOT_VLLM))
        prev, self._prev = self._prev, sample
        restarted = prev is not None and (sample.generation_tokens_total < prev.generation_tokens_total
                                          or sample.prompt_tokens_total < prev.prompt_tokens_total)
        note = "; counters went backwards: the engine restarted, a new series starts" if restarted else ""
        if prev is None or restarted:
            self._flat_since, self._start_known = sample.at, restarted
        else:
            gen = sample.generation_tokens_total - prev.generation_tokens_total
            prompt = sample.prompt_tokens_total - prev.prompt_tokens_total
            if gen > 0 or prompt > 0:
                self._flat_since, self._start_known = sample.at, True
                done = _progress(gen, prompt, sample.at - prev.at)
                return self._set(Liveness("serving", sample.at, f"{done}, {_requests(sample)}"))
            if not (sample.busy and prev.busy):  # the flat clock runs only over busy samples in a row
                self._flat_since, self._start_known = sample.at, True
        if not sample.busy:
            return self._set(Liveness("idle", sample.at, "no requests running or waiting" + note), restarted)
        flat = sample.at - self._flat_since
        if flat >= self.hang_after_s:
            return self._set(Liveness(
                "hung", self._flat_since,
                f"{_requests(sample)}, but vllm:generation_tokens_total has not grown for {flat:.0f} s "
                f"(threshold {self.hang_after_s:g} s)", REMEDY_HUNG))
        if not self._start_known:   # the flat run may have begun long before this series: not "serving"
            return self._set(Liveness(
                "unknown", self._flat_since,
                f"{_requests(sample)}, no new tokens in the {flat:.0f} s watched: not known yet whether the "
                f"engine moves (hung after {self.hang_after_s:g} s without)", REMEDY_UNDECIDED))
        waited = f", no new tokens for {flat:.0f} s" if flat >= 1 else ""
        return self._set(Liveness("serving", sample.at, f"{_requests(sample)}{waited}{note}"), restarted)

    def _set(self, live: Liveness, fresh: bool = False) -> Liveness:
        """Keep ``since`` while the state stays the same (``hung`` and ``unknown`` carry their own start;
        ``fresh``: a new series, the state begins again)."""
        if (not fresh and live.state == self.last.state and live.state not in ("hung", "unknown")
                and self.last.since is not None):
            live = Liveness(live.state, self.last.since, live.message, live.remedy)
        self.last = live
        return live
