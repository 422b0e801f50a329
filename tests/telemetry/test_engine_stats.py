"""Engine statistics from successive /metrics texts: rates on known deltas, histogram percentiles from
bucket deltas, a counter reset starting a new series, missing families, garbage text, label sums, and
texts rendered by the simulated engine's metrics module."""

from __future__ import annotations

import math
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from cockpit.api.chat import ChatRequest
from cockpit.api.client import ApiClient
from cockpit.constants import SERVED_MODEL
from cockpit.sim.engine.metrics import Stats, render
from cockpit.sim.engine.spawn import start_ready
from cockpit.telemetry.engine_stats import (
    EngineStats,
    EngineStatsReading,
    bucket_delta,
    compute,
    histogram_quantile,
    parse_snapshot,
    read_snapshot,
)

MODEL = "deepseek-v4.1-flash"


def _l(engine: int, **extra: str) -> str:
    items = {"engine": str(engine), "model_name": MODEL, **extra}
    return "{" + ",".join(f'{k}="{v}"' for k, v in items.items()) + "}"


def vllm_text(
    *,
    gen: tuple[float, float] = (5000.0, 2500.0),
    prompt: tuple[float, float] = (1200.0, 800.0),
    running: tuple[float, float] = (2.0, 1.0),
    waiting: tuple[float, float] = (0.0, 4.0),
    kv: tuple[float, float] = (0.25, 0.5),
    hits: float = 300.0,
    queries: float = 1000.0,
    drafts: float = 100.0,
    draft_tokens: float = 300.0,
    accepted: float = 150.0,
    preempt: float = 1.0,
    success: dict[str, tuple[float, float]] | None = None,
    ttft: dict[str, float] | None = None,
    spec: bool = True,
) -> str:
    """vLLM V1 /metrics (names of docs/vllm.md), two engines (data parallel) whose values are summed."""
    success = success or {"stop": (10.0, 5.0), "length": (2.0, 1.0), "abort": (0.0, 1.0)}
    ttft = ttft or {"0.1": 0.0, "0.5": 0.0, "1.0": 0.0, "+Inf": 0.0}
    out = []

    def fam(name: str, kind: str) -> None:
        out.append(f"# HELP {name} help text.")
        out.append(f"# TYPE {name} {kind}")

    for name, vals in (("vllm:num_requests_running", running), ("vllm:num_requests_waiting", waiting),
                       ("vllm:kv_cache_usage_perc", kv)):
        fam(name, "gauge")
        out += [f"{name}{_l(i)} {v}" for i, v in enumerate(vals)]
    for name, vals in (("vllm:generation_tokens_total", gen), ("vllm:prompt_tokens_total", prompt)):
        fam(name, "counter")
        out += [f"{name}{_l(i)} {v}" for i, v in enumerate(vals)]
    counters = [("vllm:prefix_cache_hits_total", hits), ("vllm:prefix_cache_queries_total", queries),
                ("vllm:num_preemptions_total", preempt)]
    if spec:
        counters += [("vllm:spec_decode_num_drafts_total", drafts),
                     ("vllm:spec_decode_num_draft_tokens_total", draft_tokens),
                     ("vllm:spec_decode_num_accepted_tokens_total", accepted)]
    for name, v in counters:
        fam(name, "counter")
        out.append(f"{name}{_l(0)} {v}")
    fam("vllm:request_success_total", "counter")
    for reason, vals in success.items():
        out += [f"vllm:request_success_total{_l(i, finished_reason=reason)} {v}" for i, v in enumerate(vals)]
    fam("vllm:time_to_first_token_seconds", "histogram")
    for le, v in ttft.items():
        out.append(f"vllm:time_to_first_token_seconds_bucket{_l(0, le=le)} {v}")
    out.append(f"vllm:time_to_first_token_seconds_count{_l(0)} {ttft['+Inf']}")
    out.append(f"vllm:time_to_first_token_seconds_sum{_l(0)} 0.0")
    return "\n".join(out) + "\n"


def _two(first: str, second: str, dt: float = 2.0) -> EngineStatsReading:
    acc = EngineStats()
    acc.feed_text(first, 100.0)
    return acc.feed_text(second, 100.0 + dt)


# ---- rates on known deltas -----------------------------------------------------------------------

def test_gauges_and_rates_from_known_deltas() -> None:
    r = _two(vllm_text(), vllm_text(gen=(5300.0, 2600.0), prompt=(1300.0, 900.0), hits=450.0, queries=1500.0,
                                    drafts=140.0, draft_tokens=420.0, accepted=240.0, preempt=4.0), dt=2.0)
    assert r.error is None and not r.restarted
    assert (r.running, r.waiting) == (3, 4)
    assert r.kv_cache_usage == pytest.approx(0.5)          # the fullest engine
    assert r.interval_s == pytest.approx(2.0)
    assert r.generation_tokens_per_s == pytest.approx(400.0 / 2.0)
    assert r.prompt_tokens_per_s == pytest.approx(200.0 / 2.0)
    assert r.prefix_cache_hit_rate == pytest.approx(150.0 / 500.0)
    assert r.spec_acceptance_rate == pytest.approx(90.0 / 120.0)
    assert r.spec_mean_acceptance_length == pytest.approx(1.0 + 90.0 / 40.0)
    assert r.preemptions == pytest.approx(3.0)


def test_first_sample_has_gauges_but_no_rates() -> None:
    r = EngineStats().feed_text(vllm_text(), 5.0)
    assert (r.running, r.waiting, r.kv_cache_usage) == (3, 4, 0.5)
    assert r.interval_s is None and r.generation_tokens_per_s is None and r.preemptions is None


def test_no_queries_in_the_interval_gives_no_hit_rate() -> None:
    r = _two(vllm_text(), vllm_text())
    assert r.prefix_cache_hit_rate is None and r.spec_acceptance_rate is None
    assert r.generation_tokens_per_s == 0.0 and r.preemptions == 0.0


def test_success_summed_over_engines_by_finish_reason() -> None:
    r = _two(vllm_text(), vllm_text(success={"stop": (13.0, 9.0), "length": (2.0, 2.0), "abort": (0.0, 1.0),
                                             "error": (1.0, 0.0)}))
    assert r.request_success == {"abort": 0.0, "error": 1.0, "length": 1.0, "stop": 7.0}


# ---- histograms -----------------------------------------------------------------------------------

def test_histogram_quantile_on_a_constructed_bucket_delta() -> None:
    # 100 observations: 10 below 0.1 s, 60 in (0.1, 0.5], 25 in (0.5, 1.0], 5 above 1 s
    buckets = {0.1: 10.0, 0.5: 70.0, 1.0: 95.0, math.inf: 100.0}
    assert histogram_quantile(0.5, buckets) == pytest.approx(0.1 + 0.4 * (50 - 10) / 60)
    assert histogram_quantile(0.9, buckets) == pytest.approx(0.5 + 0.5 * (90 - 70) / 25)
    assert histogram_quantile(0.05, buckets) == pytest.approx(0.1 * 5 / 10)
    assert histogram_quantile(0.99, buckets) == pytest.approx(1.0)    # in +Inf: the highest finite bound
    assert histogram_quantile(0.5, {0.1: 0.0, math.inf: 0.0}) is None


def test_percentiles_come_from_the_window_delta_not_since_start() -> None:
    # Before the window: 1000 fast first tokens (<= 0.1 s). In the window: 100 more, all in (0.5, 1.0].
    old = {"0.1": 1000.0, "0.5": 1000.0, "1.0": 1000.0, "+Inf": 1000.0}
    new = {"0.1": 1000.0, "0.5": 1000.0, "1.0": 1100.0, "+Inf": 1100.0}
    a, b = parse_snapshot(vllm_text(ttft=old), 0.0), parse_snapshot(vllm_text(ttft=new), 1.0)
    assert bucket_delta(a, b, "vllm:time_to_first_token_seconds") == {0.1: 0.0, 0.5: 0.0, 1.0: 100.0,
                                                                      math.inf: 100.0}
    r = compute([a, b])
    assert r.ttft_p50_s == pytest.approx(0.75)
    assert r.ttft_p90_s == pytest.approx(0.95)
    assert r.ttft_p99_s == pytest.approx(0.995)
    assert r.itl_p50_s is None          # that family is not in this text


def test_window_is_bounded_by_count_and_seconds() -> None:
    acc = EngineStats(max_samples=3, window_s=10.0)
    for i in range(5):
        acc.feed_text(vllm_text(gen=(5000.0 + i, 2500.0)), float(i))
    assert [s.at for s in acc.window] == [2.0, 3.0, 4.0]
    acc = EngineStats(max_samples=10, window_s=2.5)
    for i in range(6):
        r = acc.feed_text(vllm_text(gen=(5000.0 + i, 2500.0)), float(i))
    assert [s.at for s in acc.window] == [3.0, 4.0, 5.0] and r.window_s == pytest.approx(2.0)
    acc = EngineStats(max_samples=10, window_s=1.0)   # samples further apart than the window: two stay
    for i in range(3):
        r = acc.feed_text(vllm_text(gen=(5000.0 + 10 * i, 2500.0)), 5.0 * i)
    assert len(acc.window) == 2 and r.generation_tokens_per_s == pytest.approx(2.0)


# ---- counter reset, missing families, garbage ------------------------------------------------------

def test_counter_going_back_starts_a_new_series() -> None:
    acc = EngineStats()
    acc.feed_text(vllm_text(gen=(5000.0, 2500.0)), 0.0)
    acc.feed_text(vllm_text(gen=(5100.0, 2500.0)), 1.0)
    r = acc.feed_text(vllm_text(gen=(40.0, 0.0), prompt=(10.0, 0.0), hits=0.0, queries=0.0, drafts=0.0,
                                draft_tokens=0.0, accepted=0.0, preempt=0.0,
                                success={"stop": (0.0, 0.0)}), 2.0)
    assert r.restarted and r.interval_s is None
    assert r.generation_tokens_per_s is None and r.prompt_tokens_per_s is None and r.preemptions is None
    assert r.request_success is None
    assert (r.running, r.waiting) == (3, 4)      # gauges still read
    assert len(acc.window) == 1
    r = acc.feed_text(vllm_text(gen=(100.0, 20.0), prompt=(10.0, 0.0), hits=0.0, queries=0.0, drafts=0.0,
                                draft_tokens=0.0, accepted=0.0, preempt=0.0,
                                success={"stop": (1.0, 0.0)}), 4.0)
    assert not r.restarted
    assert r.generation_tokens_per_s == pytest.approx((120.0 - 40.0) / 2.0)   # from the new baseline
    assert r.request_success == {"stop": 1.0}


def test_one_labelled_counter_going_back_is_a_restart_too() -> None:
    r = _two(vllm_text(), vllm_text(gen=(5100.0, 2600.0), success={"stop": (10.0, 5.0), "length": (2.0, 0.0),
                                                                   "abort": (0.0, 1.0), "error": (1.0, 0.0)}))
    assert r.restarted and r.generation_tokens_per_s is None


def test_missing_families_read_none_not_zero() -> None:
    r = _two(vllm_text(spec=False), vllm_text(spec=False, gen=(5010.0, 2500.0)))
    assert r.spec_acceptance_rate is None and r.spec_mean_acceptance_length is None
    assert r.itl_p50_s is None and r.itl_p99_s is None
    assert r.generation_tokens_per_s == pytest.approx(5.0)
    only_gauges = "# TYPE vllm:num_requests_running gauge\nvllm:num_requests_running 1\n"
    r = _two(only_gauges, only_gauges)
    assert r.error is None and r.running == 1
    assert r.waiting is None and r.kv_cache_usage is None and r.generation_tokens_per_s is None
    assert r.prefix_cache_hit_rate is None and r.preemptions is None and r.request_success is None
    assert r.ttft_p50_s is None


def test_older_kv_cache_name_is_read() -> None:
    text = "# TYPE vllm:gpu_cache_usage_perc gauge\nvllm:gpu_cache_usage_perc{engine=\"0\"} 0.8\n"
    assert EngineStats().feed_text(text, 0.0).kv_cache_usage == pytest.approx(0.8)


@pytest.mark.parametrize("garbage", ["", "<html><body>502 Bad Gateway</body></html>", "hello world\n",
                                     "\x00\xff\x10 binary", "# TYPE foo counter\nfoo_total 3\n"])
def test_garbage_text_is_an_error_value(garbage: str) -> None:
    acc = EngineStats()
    acc.feed_text(vllm_text(), 0.0)
    r = acc.feed_text(garbage, 1.0)
    assert r.error and "not vLLM" in r.error
    assert r.running is None and r.generation_tokens_per_s is None
    assert len(acc.window) == 1          # the good baseline stays
    r = acc.feed_text(vllm_text(gen=(5020.0, 2500.0)), 2.0)
    assert r.error is None and r.generation_tokens_per_s == pytest.approx(10.0)


def test_a_bad_line_is_skipped_and_the_rest_read() -> None:
    head = "# TYPE vllm:num_requests_waiting gauge\n"
    text = vllm_text().replace(head, head + 'vllm:num_requests_waiting{engine="0" 3\n')
    snap = parse_snapshot(text, 0.0)
    assert snap.error is None and snap.skipped == 1
    assert snap.total("vllm:num_requests_running") == 3.0


def test_to_dict_is_plain() -> None:
    d = _two(vllm_text(), vllm_text(gen=(5002.0, 2500.0))).to_dict()
    assert d["generation_tokens_per_s"] == pytest.approx(1.0)
    assert isinstance(d["request_success"], dict) and d["error"] is None
    assert set(d) >= {"ttft_p50_s", "itl_p99_s", "spec_mean_acceptance_length", "restarted"}


# ---- texts from the simulated engine's renderer -------------------------------------------------------

def test_texts_rendered_by_the_sim_engine() -> None:
    stats = Stats(max_model_len=4096, spec_k=3)
    stats.generation_tokens, stats.prompt_tokens = 1000, 4000
    stats.prefix_queries, stats.prefix_hits = 4000, 1000
    stats.drafts, stats.draft_tokens, stats.accepted_tokens = 100, 300, 200
    stats.success["stop"] = 7
    for v in (0.05, 0.05, 0.3):
        stats.ttft.observe(v)
    first = render(stats, MODEL, running=2, waiting=1, kv_usage=0.125)
    stats.generation_tokens += 500
    stats.prompt_tokens += 1000
    stats.prefix_queries += 1000
    stats.prefix_hits += 800
    stats.drafts += 50
    stats.draft_tokens += 150
    stats.accepted_tokens += 120
    stats.preemptions += 2
    stats.success["stop"] += 3
    stats.success["length"] += 1
    for _ in range(10):
        stats.ttft.observe(0.7)      # all ten in (0.5, 0.75]
    for _ in range(4):
        stats.itl.observe(0.03)      # (0.025, 0.05]
    second = render(stats, MODEL, running=3, waiting=0, kv_usage=0.25)
    r = _two(first, second, dt=5.0)
    assert r.error is None and not r.restarted
    assert (r.running, r.waiting, r.kv_cache_usage) == (3, 0, 0.25)
    assert r.generation_tokens_per_s == pytest.approx(100.0)
    assert r.prompt_tokens_per_s == pytest.approx(200.0)
    assert r.prefix_cache_hit_rate == pytest.approx(0.8)
    assert r.spec_acceptance_rate == pytest.approx(120 / 150)
    assert r.spec_mean_acceptance_length == pytest.approx(1 + 120 / 50)
    assert r.preemptions == 2.0
    assert r.request_success == {"abort": 0.0, "error": 0.0, "length": 1.0, "stop": 3.0}
    assert r.ttft_p50_s == pytest.approx(0.5 + 0.25 * 0.5)
    assert r.ttft_p99_s == pytest.approx(0.5 + 0.25 * 0.99)
    assert r.itl_p50_s == pytest.approx(0.025 + 0.025 * 0.5)


@pytest.fixture
def engine_url(tmp_path: Path) -> Iterator[str]:
    proc, url = start_ready(tmp_path / "engine.log", "--fault-root", str(tmp_path / "host"))
    try:
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


async def test_the_sim_engine_over_http(engine_url: str) -> None:
    acc = EngineStats()
    async with ApiClient(engine_url) as client:
        first = acc.feed(await read_snapshot(client))
        assert first.error is None and (first.running, first.waiting) == (0, 0)
        request = ChatRequest(model=SERVED_MODEL, messages=[{"role": "user", "content": "Say hello."}],
                              max_tokens=16, thinking=False)
        for _ in range(2):
            await client.chat(request)
        r = acc.feed(await read_snapshot(client))
    assert r.error is None and not r.restarted and r.interval_s is not None and r.interval_s > 0
    assert r.generation_tokens_per_s is not None and r.generation_tokens_per_s > 0
    assert r.prompt_tokens_per_s is not None and r.prompt_tokens_per_s > 0
    assert r.request_success is not None and sum(r.request_success.values()) == 2.0
    assert r.ttft_p50_s is not None and r.ttft_p50_s > 0
    assert r.preemptions == 0.0
