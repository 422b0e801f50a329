"""Contract tests: the cockpit's own readers against the real vLLM 0.32 (CPU build) serving a tiny model.

One server for the whole folder (conftest.py); it was started with a low open-files limit, so its boot log
carries vLLM's "Found ulimit … Too many open files" WARNING, which must not fail the rank.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest
from vllmread import read_boot, stream_turn
from vllmserver import SERVED, VllmServer

from cockpit.api.chat import ChatRequest
from cockpit.api.client import ApiClient
from cockpit.api.errors import from_status
from cockpit.api.liveness import HangTracker, read_sample
from cockpit.api.stream import StreamDeadlines
from cockpit.recipe.phases import Phase, is_access_log
from cockpit.telemetry.engine_stats import EngineStats, read_snapshot

pytestmark = pytest.mark.xdist_group("real_vllm")   # one worker, one server (conftest.py)

DEADLINES = StreamDeadlines(120.0, 60.0)   # generous: the machine is loaded; nothing here waits on them
WEATHER = {"type": "function", "function": {
    "name": "get_weather", "description": "the weather in a city",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}


def ask(text: str, **kw: object) -> ChatRequest:
    """A request that runs to max_tokens (vLLM's `ignore_eos`: a random model may sample its EOS)."""
    return ChatRequest(messages=[{"role": "user", "content": text}], model=SERVED,  # type: ignore[arg-type]
                       extra={"ignore_eos": True}, **kw)


def test_boot_log_reaches_api_start_without_a_failure(real_vllm: VllmServer) -> None:
    lines = real_vllm.log_lines()
    assert any("Found ulimit of" in line and "Too many open files" in line for line in lines), \
        "the server was meant to boot with a low open-files limit"
    reading = read_boot(lines)
    assert reading.failure is None, (reading.failure, reading.cause)
    for phase in (Phase.DIST_INIT, Phase.LOADING, Phase.KV_CACHE, Phase.API_START):
        assert phase in reading.phases
    assert any("Starting vLLM server on http://127.0.0.1:" in line for line in lines)


async def test_metrics_idle_then_serving_then_idle(real_vllm: VllmServer) -> None:
    tracker = HangTracker(hang_after_s=60)
    stats = EngineStats(max_samples=10_000, window_s=3600)   # the whole test: its TTFTs stay in the window
    async with ApiClient(real_vllm.url, deadlines=DEADLINES) as client:
        first = await read_sample(client)
        assert first.complete, first.found
        assert tracker.feed(first).state == "idle"
        stats.feed(await read_snapshot(client))
        # answers until the reads have caught them running: a fast machine ends four answers of 1 200 tokens
        # between two reads (CI's, and this one when quiet), a loaded one did 300 tokens between two reads
        streams: list[asyncio.Task] = []

        def more() -> None:
            streams.extend(asyncio.create_task(stream_turn(client, ask(f"story {i}", thinking=False,
                                                                       max_tokens=1200))) for i in range(4))

        def seen_busy() -> bool:
            return ("serving" in busy_states and any((r.running or 0) >= 1 for r in busy_readings)
                    and any((r.generation_tokens_per_s or 0) > 0 for r in busy_readings))

        busy_states: list[str] = []
        busy_readings: list = []
        more()
        t0 = time.monotonic()
        while not seen_busy():
            assert time.monotonic() - t0 < 120, (busy_states, busy_readings[-2:])
            if all(t.done() for t in streams):
                more()
            await asyncio.sleep(0.5)
            busy_states.append(tracker.feed(await read_sample(client)).state)
            busy_readings.append(stats.feed(await read_snapshot(client)))
        turns = await asyncio.gather(*streams)
        assert all(t.error_kind is None and t.finish_reason == "length" for t in turns), turns
        assert "serving" in busy_states and "hung" not in busy_states
        assert any((r.running or 0) >= 1 for r in busy_readings)
        assert any((r.generation_tokens_per_s or 0) > 0 for r in busy_readings)
        assert any(r.kv_cache_usage is not None for r in busy_readings)
        await asyncio.sleep(0.5)
        last_sample = await read_sample(client)
        assert last_sample.running == 0 and last_sample.generation_tokens_total >= 4 * 300
        reading = stats.feed(await read_snapshot(client))
        assert reading.ttft_p50_s is not None and reading.itl_p50_s is not None
        assert reading.request_success is not None and "length" in reading.request_success


async def test_sse_thinking_on_is_reasoning_with_usage(real_vllm: VllmServer) -> None:
    async with ApiClient(real_vllm.url, deadlines=DEADLINES) as client:
        turn = await stream_turn(client, ask("think about the sea", thinking=True, max_tokens=16))
    assert turn.error_kind is None, turn
    assert turn.kinds[:2] == ("RoleStarted", "ReasoningDelta") and turn.kinds[-1] == "Finished"
    assert turn.reasoning   # (a random model may sample `</think>` and go on in content)
    assert turn.finish_reason == "length" and turn.completion_tokens == 16


async def test_sse_thinking_off_is_content_with_usage(real_vllm: VllmServer) -> None:
    async with ApiClient(real_vllm.url, deadlines=DEADLINES) as client:
        turn = await stream_turn(client, ask("say something", thinking=False, max_tokens=16))
    assert turn.error_kind is None, turn
    assert "ContentDelta" in turn.kinds and "ReasoningDelta" not in turn.kinds
    assert turn.content and not turn.reasoning
    assert turn.finish_reason == "length" and turn.completion_tokens == 16


async def test_auto_tool_choice_without_the_server_flags_gets_a_remedy_about_the_flags(
        real_vllm: VllmServer) -> None:
    async with ApiClient(real_vllm.url, deadlines=DEADLINES) as client:
        turn = await stream_turn(client, ask("weather?", thinking=False, max_tokens=8, tools=[WEATHER],
                                             tool_choice="auto"))
    assert turn.error_kind == "http_error"
    assert "--enable-auto-tool-choice" in turn.error_message
    assert "--enable-auto-tool-choice" in turn.error_remedy and "model name" not in turn.error_remedy
    assert "max_tokens" not in turn.error_remedy


@pytest.mark.parametrize(("body", "path", "status", "remedy_says"), [
    ({"model": "nope", "messages": [{"role": "user", "content": "x"}]}, "/v1/chat/completions", 404,
     "Wrong model name"),
    ({"model": SERVED, "messages": [{"role": "user", "content": "x"}], "max_tokens": 100000},
     "/v1/chat/completions", 400, "--max-model-len"),
    ({"model": SERVED, "messages": [{"role": "user", "content": "x"}], "temperature": 5},
     "/v1/chat/completions", 400, "sampling option"),
    ({"model": SERVED}, "/v1/chat/completions", 400, "could not read the request body"),
    ({"model": SERVED}, "/v1/nowhere", 404, "Wrong path"),
])
def test_error_bodies_get_the_remedy_of_their_cause(real_vllm: VllmServer, body: dict[str, object], path: str,
                                                     status: int, remedy_says: str) -> None:
    r = httpx.post(real_vllm.url + path, json=body, timeout=60)
    assert r.status_code == status, r.text
    err = from_status(r.status_code, r.content, real_vllm.url + path)
    assert remedy_says in err.remedy, (r.text, err.remedy)
    assert err.message.startswith(f"HTTP {status} from ")


def test_malformed_json_is_read_as_one_line(real_vllm: VllmServer) -> None:
    r = httpx.post(real_vllm.url + "/v1/chat/completions", content=b"{not json",
                   headers={"content-type": "application/json"}, timeout=60)
    assert r.status_code == 400
    err = from_status(400, r.content, real_vllm.url)
    assert "\n" not in err.message and "json_invalid" in err.message
    assert "could not read the request body" in err.remedy


def _cockpit(*args: str, timeout: float = 900) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "cockpit", *args], capture_output=True, text=True,
                          timeout=timeout)


def test_smoke_against_real_vllm(real_vllm: VllmServer) -> None:
    out = _cockpit("smoke", "--api-url", real_vllm.url, "--json")
    steps = {s["name"]: s for s in json.loads(out.stdout)["steps"]}
    assert steps["health"]["ok"] and steps["models"]["ok"]
    assert steps["card request"]["ok"], steps["card request"]
    # a random model cannot count, and this server has no tool parser: honest failures, each with a remedy
    tool = steps["tool call"]
    assert not tool["ok"] and "--enable-auto-tool-choice" in tool["remedy"]
    assert out.returncode == 1


def test_bench_quick_against_real_vllm(real_vllm: VllmServer, tmp_path: Path) -> None:
    t0 = time.monotonic()
    out = _cockpit("bench", "--suite", "quick", "--api-url", real_vllm.url, "-o", str(tmp_path / "run"))
    assert out.returncode in (0, 1), out.stderr[-2000:]
    records = [json.loads(line) for line in (tmp_path / "run" / "requests.jsonl").read_text().splitlines()]
    decode = [r for r in records if r.get("kind") == "decode"]
    assert decode and all(r["ok"] for r in decode), [r for r in decode if not r["ok"]][:2]
    assert all(r["completion_tokens"] for r in decode)
    assert time.monotonic() - t0 < 900


def test_access_log_lines_are_written_for_the_probes(real_vllm: VllmServer) -> None:
    httpx.get(real_vllm.url + "/health", timeout=30)
    assert real_vllm.wait_log('"GET /health HTTP/1.1" 200', 30)
    assert any(is_access_log(line) for line in real_vllm.log_lines())


def test_the_stats_line_is_printed_only_while_there_was_throughput(real_vllm: VllmServer) -> None:
    """vLLM logs `Avg … throughput` only while this or the previous interval had throughput (the
    interval is 2 s here): an idle engine goes quiet, so a log-based hang rule can never fire on it."""
    httpx.post(real_vllm.url + "/v1/chat/completions", timeout=120, json={
        "model": SERVED, "messages": [{"role": "user", "content": "x"}], "max_tokens": 32})
    n0 = len(real_vllm.log_lines())
    time.sleep(12)      # six intervals of idle
    stats = [ln for ln in real_vllm.log_lines()[n0:] if "Avg prompt throughput" in ln]
    assert len(stats) <= 2, stats


def engine_core_pid(api_pid: int) -> int | None:
    """The EngineCore process under the API server (vLLM names it `VLLM::EngineCore`)."""
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            ppid = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            cmd = (entry / "cmdline").read_bytes().replace(b"\0", b" ")
        except (OSError, ValueError, IndexError):
            continue
        if ppid == api_pid and b"EngineCore" in cmd:
            return int(entry.name)
    return None


async def test_a_stopped_engine_core_is_hung_by_metrics(real_vllm: VllmServer) -> None:
    """A real hang: SIGSTOP the EngineCore mid-answer. The API server still answers /metrics, the request
    stays running, the generation counter stays flat: the cockpit's tracker says hung, with its remedy;
    after SIGCONT the answer finishes."""
    if real_vllm.proc is None:
        pytest.skip("R37_VLLM_URL: a server this run did not start is not signalled")
    core = engine_core_pid(real_vllm.proc.pid)
    assert core is not None, "no EngineCore process under the API server"
    tracker = HangTracker(hang_after_s=6)
    async with ApiClient(real_vllm.url, deadlines=StreamDeadlines(300.0, 300.0)) as client:
        # answers kept coming (two, staggered, each replaced as it ends) until the engine is caught holding
        # one: a fast machine ends an answer of 2 000 tokens between two reads
        answers: list[asyncio.Task] = []
        feeding = [True]

        def more(_done: object = None) -> None:
            if feeding[0]:
                task = asyncio.create_task(stream_turn(client, ask("a long story", thinking=False,
                                                                   max_tokens=2000)))
                task.add_done_callback(more)
                answers.append(task)

        more()
        await asyncio.sleep(0.3)
        more()
        t0 = time.monotonic()
        while True:
            sample = await read_sample(client)
            tracker.feed(sample)
            if sample.busy and sample.generation_tokens_total > 0:
                os.kill(core, signal.SIGSTOP)
                held = await read_sample(client)     # what the stopped engine holds (its last stats)
                if held.busy:
                    break
                os.kill(core, signal.SIGCONT)        # stopped between two answers: again
            assert time.monotonic() - t0 < 120, "no answer was ever caught running"
            await asyncio.sleep(0.2)
        feeding[0] = False
        try:
            live = tracker.feed(held)
            while live.state != "hung" and time.monotonic() - t0 < 240:
                await asyncio.sleep(1.0)
                live = tracker.feed(await read_sample(client))
            assert live.state == "hung", live
            assert "has not grown" in live.message and "logs --rank 0" in live.remedy
            assert live.since is not None and time.monotonic() - live.since >= 6   # not before the limit
        finally:
            os.kill(core, signal.SIGCONT)
        turns = await asyncio.wait_for(asyncio.gather(*answers), 300)
    assert all(t.error_kind is None and t.finish_reason == "length" for t in turns), turns
