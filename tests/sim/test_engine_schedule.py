"""The engine's timing model: the documented numbers, and measured streams that follow them.

Measurements run the engine with --time-scale (all engine durations multiplied by the factor) and scale
the measured rates back, exactly as the benchmark computes them (docs/benchmark-method.md#timing).
"""

from __future__ import annotations

import asyncio
import gc
import json
import os
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from hypothesis import given
from hypothesis import strategies as st

from cockpit.api.chat import ChatRequest
from cockpit.api.client import ApiClient
from cockpit.api.stream import ChatResult
from cockpit.sim.engine import schedule_info, tokens
from cockpit.sim.engine.schedule import Schedule
from cockpit.sim.engine.spawn import start_ready

REPO = Path(__file__).resolve().parents[2]
SCALE = 0.4
TOLERANCE = 0.05


def test_schedule_calibration() -> None:
    s = Schedule()
    assert s.single_stream("prose") == pytest.approx(50.50, rel=1e-9)
    assert s.aggregate(8, "prose") == pytest.approx(229.28, rel=1e-9)
    assert s.single_stream("counting", idle=True) == pytest.approx(83.8, abs=0.05)
    assert s.single_stream("code", idle=True) == pytest.approx(75.1, abs=0.05)
    assert s.single_stream("counting") > s.single_stream("code") > s.single_stream("prose")
    assert 1000 < s.prefill_tok_s < 10000
    assert all(0 < s.acceptance_rate(c) < 1 for c in ("prose", "code", "counting"))
    info = schedule_info()
    json.dumps(info)
    assert info["aggregate_tok_s"]["prose"]["1"] == pytest.approx(50.5, abs=0.01)
    assert info["model"]["time_scale"] == 1.0  # the default is real time


@given(st.text())
def test_tokenizer_round_trips(text: str) -> None:
    assert "".join(tokens.tokenize(text)) == text


def test_tokenizer_density() -> None:
    text = "The quick brown fox jumps over the lazy dog near the quiet river bank today."
    n = tokens.count(text)
    assert 1.0 <= n / len(text.split()) <= 1.6


def start_engine(tmp: Path, *extra: str) -> tuple[subprocess.Popen[bytes], str]:
    """`serve-ready` in a subprocess; returns it and its base URL once /health answers."""
    return start_ready(tmp / "engine.log", *extra)


@pytest.fixture(scope="module")
def timed_engine(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    proc, url = start_engine(
        tmp_path_factory.mktemp("timed"), "--time-scale", str(SCALE), "--idle-after", "2"
    )
    yield url
    proc.terminate()
    proc.wait(5)


async def stream(c: httpx.AsyncClient, url: str, prompt: str, max_tokens: int = 200) -> dict[str, float]:
    """One benchmark-style stream: TTFT, per-stream decode rate (scaled back to real time), tokens."""
    body = {
        "messages": [{"role": "user", "content": prompt}],
        "max_tokens": max_tokens,
        "temperature": 0,
        "stream": True,
        "stream_options": {"include_usage": True},
        "chat_template_kwargs": {"thinking": False},
    }
    t0 = time.perf_counter()
    ttft, usage = 0.0, {}
    async with c.stream("POST", url + "/v1/chat/completions", json=body) as r:
        async for line in r.aiter_lines():
            if not line.startswith("data: {"):
                continue
            d = json.loads(line[6:])
            usage = d.get("usage") or usage
            if not ttft and any(ch["delta"].get("content") for ch in d.get("choices", [])):
                ttft = time.perf_counter() - t0
    total = time.perf_counter() - t0
    n = usage["completion_tokens"]
    return {
        "n": n,
        "ttft": ttft * 1 / SCALE,
        "total": total / SCALE,
        "decode": (n - 1) / (total - ttft) * SCALE,
        "prompt": usage["prompt_tokens"],
    }


@pytest.mark.timing
async def test_single_stream_and_categories_follow_schedule(timed_engine: str) -> None:
    s = Schedule()
    async with httpx.AsyncClient(timeout=60) as c:
        await stream(c, timed_engine, "warm-up: Reply with the single word OK.", 2)
        prose = await stream(c, timed_engine, "[a] Write an essay about mountains and valleys.")
        code = await stream(c, timed_engine, "[b] Write a Python function that merges two sorted lists.")
        count = await stream(c, timed_engine, "[c] Count from 1 to 400.")
    assert prose["n"] == 200
    assert prose["decode"] == pytest.approx(s.single_stream("prose"), rel=TOLERANCE)
    assert code["decode"] == pytest.approx(s.single_stream("code"), rel=TOLERANCE)
    assert count["decode"] == pytest.approx(s.single_stream("counting"), rel=TOLERANCE)
    assert 0 < prose["ttft"] < count["total"]


@pytest.mark.timing
async def test_prefill_rate_follows_schedule(timed_engine: str) -> None:
    s = Schedule()
    filler = " ".join(f"Line {i} of the filler text talks about weather and maps." for i in range(500))
    async with httpx.AsyncClient(timeout=60) as c:
        await stream(c, timed_engine, "warm-up: Reply with the single word OK.", 2)
        r = await stream(c, timed_engine, f"[prefill] {filler}\nReply with the single word OK.", 1)
    assert r["prompt"] > 5000
    # request parsing and tokenisation take real (unscaled) milliseconds: allow 30 ms of them
    expected = s.ttft(int(r["prompt"]))
    assert expected * (1 - TOLERANCE) <= r["ttft"] <= expected * (1 + TOLERANCE) + 0.03 / SCALE
    assert 1000 < r["prompt"] / r["ttft"] < 10000


@pytest.mark.timing
async def test_eight_streams_aggregate_follows_schedule(timed_engine: str) -> None:
    s = Schedule()
    async with httpx.AsyncClient(timeout=60, limits=httpx.Limits(max_keepalive_connections=8)) as c:
        await asyncio.gather(
            *(stream(c, timed_engine, f"warm {i}: Reply with the single word OK.", 2) for i in range(8))
        )
        t0 = time.perf_counter()
        res = await asyncio.gather(
            *(stream(c, timed_engine, f"[{i}] Write an essay about rivers and lakes.") for i in range(8))
        )
        wall = (time.perf_counter() - t0) / SCALE
    expected = s.predict_stream(int(res[0]["prompt"]), 200, "prose", 8)
    aggregate = sum(r["n"] for r in res) / wall
    assert aggregate == pytest.approx(expected["aggregate_tok_s"], rel=TOLERANCE + 0.01)
    assert expected["aggregate_tok_s"] == pytest.approx(s.aggregate(8), rel=0.02)
    for r in res:
        assert r["decode"] == pytest.approx(expected["decode_tok_s"], rel=TOLERANCE)


@pytest.mark.timing
async def test_a_burst_after_idle_is_admitted_in_one_step(timed_engine: str) -> None:
    """Requests sent together reach the engine's Python one after another; they start together.

    The burst is sent the way a client in Python sends it: one request every 0.3 ms or more, 2.1 ms from the
    first to the last (the engine's window is 4 ms from the first arrival); without the window the first
    request got a step of its own. A client descheduled between its sends spreads a burst further, which
    rightly misses the first step, so a burst is sent up to five times until at least five of its eight
    went out within 3.5 ms."""
    s = Schedule()

    def ask(i: int, words: str) -> ChatRequest:
        return ChatRequest([{"role": "user", "content": f"[burst {i}] {words}"}], thinking=False,
                           temperature=0.0, max_tokens=20)

    async def burst(client: ApiClient) -> list[ChatResult]:
        tasks = []
        gc.disable()  # a full collection would spread the sends (the benchmark runner does the same)
        try:
            for i in range(8):
                request = ask(i, "Write an essay about rivers.")
                tasks.append(asyncio.create_task(client.chat_streamed(request)))
                await asyncio.sleep(0)   # the task sends its request
                time.sleep(0.0003)
        finally:
            gc.enable()
        return list(await asyncio.gather(*tasks))

    async with ApiClient(timed_engine) as client:
        await client.prepare(8)   # the benchmark's way: every request then goes out at once
        await asyncio.gather(*(client.chat_streamed(ask(i, "Reply with OK.")) for i in range(8)))
        for _ in range(5):
            await asyncio.sleep(0.2)
            await client.prepare(8)   # chat_streamed returns at [DONE], before its connection is kept
            stats = [r.stats for r in await burst(client) if r.stats and r.stats.ttft_s]
            assert len(stats) == 8
            first = min(st.t_start for st in stats)
            together = [st.ttft_s / SCALE for st in stats if st.t_start - first < 0.0035 and st.ttft_s]
            if len(together) >= 5:
                break
    assert len(together) >= 5, "the client could not send five requests within 3.5 ms"
    assert max(together) - min(together) < s.step_time(8) / 2, together   # one first step, not two


@pytest.mark.timing
async def test_idle_effect_then_back_to_back(timed_engine: str) -> None:
    s = Schedule()
    async with httpx.AsyncClient(timeout=60) as c:
        await stream(c, timed_engine, "warm-up: Reply with the single word OK.", 2)
        await asyncio.sleep(2.5 * SCALE)  # > --idle-after 2 (engine seconds)
        after_idle = await stream(c, timed_engine, "[idle] Count from 1 to 600.")
        back_to_back = await stream(c, timed_engine, "[b2b] Count from 1 to 600.")
    assert after_idle["decode"] == pytest.approx(83.8, rel=TOLERANCE)
    assert back_to_back["decode"] == pytest.approx(s.single_stream("counting"), rel=TOLERANCE)
    assert after_idle["decode"] > back_to_back["decode"]


def test_default_is_real_time() -> None:
    """Benchmarks measure the engine in real time: no scaling unless asked for."""
    from cockpit.sim.engine.cli import ready_parser, schedule_from_env

    ns = ready_parser().parse_args([])
    assert ns.time_scale == 1.0 and ns.speed == 1.0
    assert schedule_from_env().time_scale == 1.0 or "R37_SIM_TIME_SCALE" in os.environ
