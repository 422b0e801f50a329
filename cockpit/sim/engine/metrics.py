"""Engine statistics and their Prometheus text exposition with vLLM's metric names."""

from __future__ import annotations

import bisect
from collections import Counter as _Counter
from dataclasses import dataclass, field

TTFT_BUCKETS = (
    0.001,
    0.005,
    0.01,
    0.02,
    0.04,
    0.06,
    0.08,
    0.1,
    0.25,
    0.5,
    0.75,
    1.0,
    2.5,
    5.0,
    7.5,
    10.0,
    20.0,
    40.0,
    80.0,
    160.0,
    640.0,
    2560.0,
)
ITL_BUCKETS = (
    0.01,
    0.025,
    0.05,
    0.075,
    0.1,
    0.15,
    0.2,
    0.3,
    0.4,
    0.5,
    0.75,
    1.0,
    2.5,
    5.0,
    7.5,
    10.0,
    20.0,
    40.0,
    80.0,
)
LATENCY_BUCKETS = (
    0.3,
    0.5,
    0.8,
    1.0,
    1.5,
    2.0,
    2.5,
    5.0,
    10.0,
    15.0,
    20.0,
    30.0,
    40.0,
    50.0,
    60.0,
    120.0,
    240.0,
    480.0,
    960.0,
    1920.0,
    7680.0,
)


def _token_buckets(max_len: int) -> tuple[float, ...]:
    out, m = [], 1
    while m <= max_len:
        for f in (1, 2, 5):
            if f * m <= max_len:
                out.append(float(f * m))
        m *= 10
    return tuple(out)


@dataclass
class Histogram:
    buckets: tuple[float, ...]
    counts: list[int] = field(default_factory=list)
    total: float = 0.0
    n: int = 0

    def __post_init__(self) -> None:
        self.counts = [0] * len(self.buckets)

    def observe(self, value: float) -> None:
        i = bisect.bisect_left(self.buckets, value)
        if i < len(self.counts):
            self.counts[i] += 1
        self.total += value
        self.n += 1


@dataclass
class Stats:
    """Counters and histograms of one engine (engine index 0)."""

    max_model_len: int
    spec_k: int
    prompt_tokens: int = 0
    generation_tokens: int = 0
    preemptions: int = 0
    prefix_queries: int = 0
    prefix_hits: int = 0
    drafts: int = 0
    draft_tokens: int = 0
    accepted_tokens: int = 0
    accepted_per_pos: list[int] = field(default_factory=list)
    success: _Counter[str] = field(default_factory=_Counter)
    ttft: Histogram = field(default_factory=lambda: Histogram(TTFT_BUCKETS))
    itl: Histogram = field(default_factory=lambda: Histogram(ITL_BUCKETS))
    e2e: Histogram = field(default_factory=lambda: Histogram(LATENCY_BUCKETS))
    queue: Histogram = field(default_factory=lambda: Histogram(LATENCY_BUCKETS))
    prefill: Histogram = field(default_factory=lambda: Histogram(LATENCY_BUCKETS))
    decode: Histogram = field(default_factory=lambda: Histogram(LATENCY_BUCKETS))
    req_prompt: Histogram | None = None
    req_gen: Histogram | None = None

    def __post_init__(self) -> None:
        self.accepted_per_pos = [0] * self.spec_k
        self.req_prompt = Histogram(_token_buckets(self.max_model_len))
        self.req_gen = Histogram(_token_buckets(self.max_model_len))


def _fmt(v: float) -> str:
    return repr(float(v))


def _labels(base: dict[str, str], extra: dict[str, str] | None = None) -> str:
    items = {**base, **(extra or {})}
    return "{" + ",".join(f'{k}="{v}"' for k, v in items.items()) + "}"


def render(stats: Stats, model: str, running: int, waiting: int, kv_usage: float) -> str:
    """Prometheus text exposition (format 0.0.4) of the engine's metrics."""
    base = {"engine": "0", "model_name": model}
    lines: list[str] = []

    def family(name: str, kind: str, doc: str) -> None:
        lines.append(f"# HELP {name} {doc}")
        lines.append(f"# TYPE {name} {kind}")

    def sample(name: str, value: float, extra: dict[str, str] | None = None) -> None:
        lines.append(f"{name}{_labels(base, extra)} {_fmt(value)}")

    for name, value, doc in (
        ("vllm:num_requests_running", running, "Number of requests in model execution batches."),
        ("vllm:num_requests_waiting", waiting, "Number of requests waiting to be processed."),
        ("vllm:kv_cache_usage_perc", kv_usage, "KV-cache usage. 1 means 100 percent usage."),
    ):
        family(name, "gauge", doc)
        sample(name, value)
    for name, value, doc in (
        ("vllm:num_preemptions_total", stats.preemptions, "Cumulative number of preemption from the engine."),
        ("vllm:prompt_tokens_total", stats.prompt_tokens, "Number of prefill tokens processed."),
        ("vllm:generation_tokens_total", stats.generation_tokens, "Number of generation tokens processed."),
        (
            "vllm:prefix_cache_queries_total",
            stats.prefix_queries,
            "Prefix cache queries, in terms of number of queried tokens.",
        ),
        (
            "vllm:prefix_cache_hits_total",
            stats.prefix_hits,
            "Prefix cache hits, in terms of number of cached tokens.",
        ),
        ("vllm:spec_decode_num_drafts_total", stats.drafts, "Number of spec decoding drafts."),
        ("vllm:spec_decode_num_draft_tokens_total", stats.draft_tokens, "Number of draft tokens."),
        ("vllm:spec_decode_num_accepted_tokens_total", stats.accepted_tokens, "Number of accepted tokens."),
    ):
        family(name, "counter", doc)
        sample(name, value)
    family(
        "vllm:spec_decode_num_accepted_tokens_per_pos_total", "counter", "Accepted tokens per draft position."
    )
    for pos, value in enumerate(stats.accepted_per_pos):
        sample("vllm:spec_decode_num_accepted_tokens_per_pos_total", value, {"position": str(pos)})
    family("vllm:request_success_total", "counter", "Count of successfully processed requests.")
    for reason in ("stop", "length", "abort", "error"):
        sample("vllm:request_success_total", stats.success.get(reason, 0), {"finished_reason": reason})
    hists = (
        ("vllm:time_to_first_token_seconds", stats.ttft, "Histogram of time to first token in seconds."),
        ("vllm:inter_token_latency_seconds", stats.itl, "Histogram of inter-token latency in seconds."),
        ("vllm:e2e_request_latency_seconds", stats.e2e, "Histogram of e2e request latency in seconds."),
        (
            "vllm:request_queue_time_seconds",
            stats.queue,
            "Histogram of time spent in WAITING phase for request.",
        ),
        (
            "vllm:request_prefill_time_seconds",
            stats.prefill,
            "Histogram of time spent in PREFILL phase for request.",
        ),
        (
            "vllm:request_decode_time_seconds",
            stats.decode,
            "Histogram of time spent in DECODE phase for request.",
        ),
        ("vllm:request_prompt_tokens", stats.req_prompt, "Number of prefill tokens processed."),
        ("vllm:request_generation_tokens", stats.req_gen, "Number of generation tokens processed."),
    )
    for name, h, doc in hists:
        assert h is not None
        family(name, "histogram", doc)
        cum = 0
        for bound, c in zip(h.buckets, h.counts, strict=True):
            cum += c
            sample(f"{name}_bucket", cum, {"le": _fmt(bound)})
        sample(f"{name}_bucket", h.n, {"le": "+Inf"})
        sample(f"{name}_count", h.n)
        sample(f"{name}_sum", h.total)
    return "\n".join(lines) + "\n"
