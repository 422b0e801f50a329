"""Engine liveness from /metrics: parsing vLLM's text (also junk, cut short, reset), the hang tracker,
and the simulated engine's `hang` fault seen over HTTP with the real client."""

from __future__ import annotations

import asyncio
import contextlib
import subprocess
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
from aiohttp import web
from apifakes import free_port
from hypothesis import given, settings
from hypothesis import strategies as st

from cockpit.api.chat import ChatRequest
from cockpit.api.client import ApiClient
from cockpit.api.errors import ApiError
from cockpit.api.liveness import (
    GENERATION,
    RUNNING,
    UNKNOWN,
    EngineSample,
    HangTracker,
    Liveness,
    parse_sample,
    read_sample,
)
from cockpit.constants import SERVED_MODEL
from cockpit.sim.engine.spawn import start_ready
from cockpit.sim.faults import set_fault

# What vLLM 0.11 serves (trimmed), with two engines (data parallel) to sum over.
VLLM_TEXT = """\
# HELP vllm:num_requests_running Number of requests in model execution batches.
# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{engine="0",model_name="deepseek-v4.1-flash"} 2.0
vllm:num_requests_running{engine="1",model_name="deepseek-v4.1-flash"} 1.0
# HELP vllm:num_requests_waiting Number of requests waiting to be processed.
# TYPE vllm:num_requests_waiting gauge
vllm:num_requests_waiting{engine="0",model_name="deepseek-v4.1-flash"} 0.0
vllm:num_requests_waiting{engine="1",model_name="deepseek-v4.1-flash"} 4.0
# HELP vllm:kv_cache_usage_perc KV-cache usage. 1 means 100 percent usage.
# TYPE vllm:kv_cache_usage_perc gauge
vllm:kv_cache_usage_perc{engine="0",model_name="deepseek-v4.1-flash"} 0.25
vllm:kv_cache_usage_perc{engine="1",model_name="deepseek-v4.1-flash"} 0.5
# HELP vllm:prompt_tokens_total Number of prefill tokens processed.
# TYPE vllm:prompt_tokens_total counter
vllm:prompt_tokens_total{engine="0",model_name="deepseek-v4.1-flash"} 1200.0
vllm:prompt_tokens_total{engine="1",model_name="deepseek-v4.1-flash"} 800.0
# HELP vllm:prompt_tokens_created Number of prefill tokens processed.
# TYPE vllm:prompt_tokens_created gauge
vllm:prompt_tokens_created{engine="0",model_name="deepseek-v4.1-flash"} 1.7644560e+09
# HELP vllm:generation_tokens_total Number of generation tokens processed.
# TYPE vllm:generation_tokens_total counter
vllm:generation_tokens_total{engine="0",model_name="deepseek-v4.1-flash"} 5000.0
vllm:generation_tokens_total{engine="1",model_name="deepseek-v4.1-flash"} 2500.0
# HELP vllm:request_success_total Count of successfully processed requests.
# TYPE vllm:request_success_total counter
vllm:request_success_total{engine="0",finished_reason="stop",model_name="deepseek-v4.1-flash"} 7.0
"""
RUN, WAIT, GEN = RUNNING, "vllm:num_requests_waiting", GENERATION


def sample(at: float, gen: float = 0.0, running: int = 0, waiting: int = 0,
           prompt: float = 0.0) -> EngineSample:
    return EngineSample(running, waiting, gen, prompt, None, at, frozenset({RUN, WAIT, GEN}))


# ---- parsing --------------------------------------------------------------------------------------


def test_parse_sums_engines_and_reads_every_family() -> None:
    s = parse_sample(VLLM_TEXT, 12.5)
    assert (s.running, s.waiting) == (3, 4)
    assert (s.generation_tokens_total, s.prompt_tokens_total) == (7500.0, 2000.0)
    assert s.kv_cache_usage == 0.5  # the fullest engine, not a sum of percentages
    assert s.at == 12.5 and s.complete and s.busy


def test_parse_older_kv_name_and_missing_families() -> None:
    s = parse_sample('vllm:gpu_cache_usage_perc{engine="0"} 0.125\nvllm:num_requests_running 0\n', 1.0)
    assert s.kv_cache_usage == 0.125
    assert (s.waiting, s.generation_tokens_total, s.prompt_tokens_total) == (0, 0.0, 0.0)
    assert not s.complete  # no generation counter: zero is not the same as absent
    assert parse_sample(VLLM_TEXT.replace("kv_cache_usage_perc", "other_gauge"), 0).kv_cache_usage is None


@pytest.mark.parametrize(
    "text",
    [
        "",
        "<html><body>502 Bad Gateway</body></html>\n",
        "\x00\xff\x01binary\x02",
        "vllm:num_requests_running{engine=\"0\" 1\n",
        "vllm:num_requests_running NaN\nvllm:generation_tokens_total +Inf\n",
        "# TYPE vllm:num_requests_running gauge\n# only comments\n",
    ],
)
def test_parse_junk_reads_as_nothing(text: str) -> None:
    s = parse_sample(text, 3.0)
    assert (s.running, s.waiting, s.generation_tokens_total, s.kv_cache_usage) == (0, 0, 0.0, None)
    assert not s.complete
    assert HangTracker(1).feed(s).state == "unknown"


def test_parse_text_cut_short_keeps_what_came_before() -> None:
    cut = VLLM_TEXT[: VLLM_TEXT.index('vllm:generation_tokens_total{engine="1"') + 30]
    s = parse_sample(cut, 1.0)
    assert (s.running, s.waiting, s.prompt_tokens_total, s.generation_tokens_total) == (3, 4, 2000.0, 5000.0)
    # a bad line in the middle costs that line only
    bad = VLLM_TEXT.replace('vllm:num_requests_waiting{engine="1"', "vllm:num_requests_waiting{{")
    s = parse_sample(bad, 1)
    assert (s.running, s.waiting, s.generation_tokens_total) == (3, 0, 7500.0)


@settings(max_examples=300, deadline=None)
@given(st.text(), st.integers(min_value=0, max_value=len(VLLM_TEXT)))
def test_parse_never_raises(junk: str, cut: int) -> None:
    for text in (junk, VLLM_TEXT[:cut] + junk, junk + VLLM_TEXT[cut:]):
        s = parse_sample(text, 0.0)
        assert s.running >= 0 and s.waiting >= 0


# ---- the tracker ----------------------------------------------------------------------------------


def test_idle_serving_hung_and_back() -> None:
    t = HangTracker(hang_after_s=10)
    assert t.feed(sample(0)).state == "idle"
    assert t.feed(sample(100)).state == "idle"  # a long idle is never a hang
    first = t.feed(sample(101, gen=0, running=1))
    assert first.state == "serving"
    live = t.feed(sample(102, gen=50, running=1))
    assert live.state == "serving" and "50.0 tok/s" in live.message
    assert live.since == 101  # still the same serving spell
    for at in (103, 106, 111):
        assert t.feed(sample(at, gen=50, running=1)).state == "serving"
    hung = t.feed(sample(112, gen=50, running=1))
    assert hung.state == "hung" and hung.since == 102
    assert "1 running" in hung.message and "not grown for 10 s" in hung.message
    assert "r37-cockpit logs --rank 0 -n 200" in hung.remedy and "r37-cockpit stop" in hung.remedy
    assert t.feed(sample(130, gen=50, running=1)).since == 102
    back = t.feed(sample(131, gen=80, running=1))
    assert back.state == "serving" and back.since == 131 and back.remedy == ""
    assert t.feed(sample(132, gen=80)).state == "idle"


def test_requests_that_just_started_get_the_full_window() -> None:
    t = HangTracker(hang_after_s=10)
    t.feed(sample(0, gen=500))
    t.feed(sample(50, gen=500))  # idle for a while, tokens flat: no clock runs
    assert t.feed(sample(51, gen=500, running=2)).state == "serving"
    assert t.feed(sample(60, gen=500, running=2)).state == "serving"
    assert t.feed(sample(61, gen=500, running=2)).state == "hung"


def test_counter_reset_starts_a_new_series() -> None:
    t = HangTracker(hang_after_s=5)
    t.feed(sample(0, gen=10_000, running=1))
    t.feed(sample(1, gen=10_050, running=1))
    after = t.feed(sample(2, gen=20, running=1))  # the engine restarted between samples
    assert after.state == "serving" and "restarted" in after.message and "-" not in after.message
    assert after.since == 2
    assert t.feed(sample(3, gen=60, running=1)).message.startswith("40.0 tok/s")
    assert t.feed(sample(4, gen=60, running=1)).state == "serving"
    assert t.feed(sample(8, gen=60, running=1)).state == "hung"  # 5 s flat from the last growth at 3
    t2 = HangTracker(hang_after_s=5)
    t2.feed(sample(0, gen=900, running=1))
    t2.feed(sample(4, gen=900, running=1))
    assert t2.feed(sample(6, gen=0, running=1)).state == "serving"  # reset: the flat clock starts over


def test_prompt_tokens_and_waiting_requests() -> None:
    t = HangTracker(hang_after_s=5)
    t.feed(sample(0, running=1))
    live = t.feed(sample(10, running=1, prompt=4096))
    assert live.state == "serving" and live.message.startswith("prefill 410 tok/s")  # a long prefill
    assert t.feed(sample(20, running=1, prompt=8192)).state == "serving"
    t = HangTracker(hang_after_s=5)
    t.feed(sample(0, waiting=3))
    assert t.feed(sample(6, waiting=3)).state == "hung"  # requests that never get scheduled


def test_a_sample_without_vllm_families_is_unknown_and_breaks_the_series() -> None:
    t = HangTracker(hang_after_s=5)
    t.feed(sample(0, gen=10, running=1))
    live = t.feed(parse_sample("up 1\n", 3))
    assert live.state == "unknown" and live.since is None and "vllm:num_requests_running" in live.message
    # a new series, not 9 s flat; busy at its first sample: not known yet whether it moves
    undecided = t.feed(sample(9, gen=10, running=1))
    assert undecided.state == "unknown" and undecided.undecided and undecided.since == 9
    assert t.feed(sample(14, gen=10, running=1)).state == "hung"


def test_a_busy_engine_is_serving_only_once_its_counters_are_seen_to_grow() -> None:
    """The first sample of a series shows requests and tokens so far, not that tokens still come: a look
    that starts during a hang must not call it serving (issue 22: `status` said READY right after a hang)."""
    t = HangTracker(hang_after_s=10)
    first = t.feed(sample(0, gen=500, running=1))
    assert first.state == "unknown" and first.undecided and first.since == 0
    assert "1 running" in first.message and "not known yet" in first.message and first.remedy
    later = t.feed(sample(4, gen=500, running=1))
    assert later.undecided and later.since == 0 and "in the 4 s watched" in later.message
    assert t.feed(sample(10, gen=500, running=1)).state == "hung"   # flat for the limit: hung all the same
    moving = HangTracker(hang_after_s=10)
    moving.feed(sample(0, gen=500, running=1))
    assert moving.feed(sample(1, gen=520, running=1)).state == "serving"
    assert moving.feed(sample(3, gen=520, running=1)).state == "serving"   # flat 2 s after growth: known
    idle_first = HangTracker(hang_after_s=10)
    idle_first.feed(sample(0, gen=500))
    assert idle_first.feed(sample(1, gen=500, running=1)).state == "serving"  # began after an idle sample
    assert not HangTracker(10).feed(sample(0)).undecided and not UNKNOWN.undecided


def test_liveness_to_dict() -> None:
    live = HangTracker(1).feed(sample(4.0))
    assert live.to_dict() == {"state": "idle", "since": 4.0, "message": "no requests running or waiting",
                              "remedy": ""}
    assert isinstance(live, Liveness)


# ---- reading /metrics over HTTP -------------------------------------------------------------------


@pytest.fixture
async def slow_metrics() -> AsyncIterator[str]:
    async def metrics(_: web.Request) -> web.Response:
        await asyncio.sleep(10)
        return web.Response(text="")

    app = web.Application()
    app.router.add_get("/metrics", metrics)
    runner = web.AppRunner(app, shutdown_timeout=0.1)
    await runner.setup()
    port = free_port()
    await web.TCPSite(runner, "127.0.0.1", port).start()
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        await runner.cleanup()


async def test_read_sample_has_a_deadline(slow_metrics: str) -> None:
    async with ApiClient(slow_metrics) as client:
        loop = asyncio.get_running_loop()
        t0 = loop.time()
        with pytest.raises(ApiError) as err:
            await read_sample(client, timeout=0.3)
        assert err.value.kind == "timeout" and "/metrics" in err.value.message
        assert loop.time() - t0 < 2


@pytest.fixture
def engine(tmp_path: Path) -> Iterator[tuple[str, Path]]:
    root = tmp_path / "host"
    proc, url = start_ready(tmp_path / "engine.log", "--fault-root", str(root))
    try:
        yield url, root
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


async def _until(client: ApiClient, tracker: HangTracker, state: str, within: float) -> Liveness:
    loop = asyncio.get_running_loop()
    end = loop.time() + within
    while True:
        live = tracker.feed(await read_sample(client))
        if live.state == state or loop.time() > end:
            return live
        await asyncio.sleep(0.1)


async def test_the_sim_engine_hang_fault_is_seen_as_hung(engine: tuple[str, Path]) -> None:
    url, root = engine
    tracker = HangTracker(hang_after_s=0.8)
    async with ApiClient(url) as client:
        assert tracker.feed(await read_sample(client)).state == "idle"
        request = ChatRequest(
            model=SERVED_MODEL,
            messages=[{"role": "user", "content": "Write a long essay about the history of the sea."}],
            max_tokens=4000, thinking=False,
        )

        async def consume() -> None:
            async with client.chat_stream(request) as stream:
                async for _event in stream:
                    pass

        reader = asyncio.create_task(consume())
        try:
            live = await _until(client, tracker, "serving", 5)
            assert live.state == "serving" and "tok/s generated" in live.message, live
            await asyncio.sleep(0.3)
            live = tracker.feed(await read_sample(client))
            assert live.state == "serving" and "tok/s generated" in live.message, live  # still decoding
            set_fault(root, "hang", True)
            live = await _until(client, tracker, "hung", 5)
            assert live.state == "hung", live
            assert "1 running" in live.message and live.remedy
            assert not reader.done()  # the request is still open, and still running in the engine
            set_fault(root, "hang", False)
            live = await _until(client, tracker, "serving", 5)
            assert live.state == "serving" and "tok/s generated" in live.message, live
        finally:
            reader.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await reader
