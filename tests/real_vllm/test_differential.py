"""Differential tests: one scenario against the real vLLM 0.32 and the simulated engine, read by the
cockpit's own code; the two must read the same (the version drift accepted is named where it is).

- boot log → phases and no failure (drift: the sim is a GPU engine with a CUDA-graph phase, the CPU build
  has none);
- /metrics → liveness (idle, then the counters grow by the answer's tokens) and the engine figures the
  stats pane shows;
- SSE → the parsed turn (event order, thinking vs content, usage, finish reason; a named tool call: the
  capture of a server started with the tool flags against the sim, tests/sim/test_engine_faithful.py);
- error bodies → the same error kind and remedy; the access log → one line per request, the cockpit's
  own probes marked; /metrics plain (never gzip'd) whatever the client accepts.
"""

from __future__ import annotations

import asyncio
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from vllmread import Turn, read_boot, stream_turn
from vllmserver import SERVED, VllmServer

from cockpit.api.chat import ChatRequest
from cockpit.api.client import ApiClient
from cockpit.api.errors import from_status
from cockpit.api.liveness import HangTracker, read_sample
from cockpit.api.readiness import probe
from cockpit.api.stream import StreamDeadlines
from cockpit.constants import PROBE_QUERY
from cockpit.recipe.phases import Phase, is_access_log
from cockpit.sim.engine.spawn import ready_engine
from cockpit.telemetry.engine_stats import EngineStats, read_snapshot
from cockpit.telemetry.logfilter import is_probe_line

sys.path.insert(0, str(Path(__file__).parents[1] / "sim"))
from test_engine_boot import Cluster, healthy, wait_until  # the sim engine's own test rig

pytestmark = pytest.mark.xdist_group("real_vllm")   # one worker, one server (conftest.py)

DEADLINES = StreamDeadlines(120.0, 60.0)
WEATHER = {"type": "function", "function": {
    "name": "get_weather", "description": "the weather in a city",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}
# what both must show on the way to serving (the sim's GPU engine also captures CUDA graphs: drift)
COMMON_PHASES = (Phase.RUNNING, Phase.DIST_INIT, Phase.LOADING, Phase.KV_CACHE, Phase.API_START)


@pytest.fixture(scope="module")
def sim_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Path]]:
    log = tmp_path_factory.mktemp("sim-engine") / "engine.log"
    with ready_engine(log) as url:
        yield url, log


def test_boot_log_phases_alike(real_vllm: VllmServer, tmp_path: Path) -> None:
    c = Cluster(tmp_path, 1)
    c.provision()
    head = c.start(0)
    try:
        wait_until(lambda: healthy(c.url), "the simulated engine's /health", timeout=60)
        sim = read_boot(head.text().splitlines())
    finally:
        c.stop()
    real = read_boot(real_vllm.log_lines())
    assert real.failure is None and sim.failure is None, (real.cause, sim.cause)
    for reading in (real, sim):
        assert [p for p in reading.phases if p in COMMON_PHASES] == list(COMMON_PHASES)
    assert Phase.CUDA_GRAPHS in sim.phases and Phase.CUDA_GRAPHS not in real.phases   # the drift, named


async def _metrics_story(url: str, model: str) -> tuple[list[str], float, int, dict[str, bool]]:
    tracker = HangTracker(hang_after_s=60)
    stats = EngineStats()
    async with ApiClient(url, deadlines=DEADLINES) as client:
        before = await read_sample(client)
        states = [tracker.feed(before).state]
        stats.feed(await read_snapshot(client))
        turn = await stream_turn(client, ChatRequest(messages=[{"role": "user", "content": "clouds"}],
                                                     model=model, thinking=False, max_tokens=48,
                                                     extra={"ignore_eos": True}))
        time.sleep(1.0)   # vLLM's metrics follow the answer's end by one engine step
        after = await read_sample(client)
        states.append(tracker.feed(after).state)
        reading = stats.feed(await read_snapshot(client))
    shown = {name: getattr(reading, name) is not None
             for name in ("running", "waiting", "kv_cache_usage", "generation_tokens_per_s", "ttft_p50_s",
                          "itl_p50_s", "request_success")}
    assert turn.completion_tokens is not None
    grew = after.generation_tokens_total - before.generation_tokens_total
    return states, grew, turn.completion_tokens, shown


async def test_metrics_read_alike(real_vllm: VllmServer, sim_url: tuple[str, Path]) -> None:
    real = await _metrics_story(real_vllm.url, SERVED)
    sim = await _metrics_story(sim_url[0], SERVED)
    for states, grew, tokens, _ in (real, sim):
        assert states == ["idle", "serving"] or states == ["idle", "idle"], states
        assert grew == tokens      # the generation counter grew by exactly the answer's tokens
    assert real[3] == sim[3], (real[3], sim[3])
    assert all(real[3].values())


def _shape(turn: Turn, thinking: bool) -> tuple[object, ...]:
    """What must read the same. With thinking on, a random model may sample `</think>` mid-answer and
    go on in content: the content part is then left out (thinking first, then usage and the end, count)."""
    kinds = tuple(k for k in turn.kinds if k != "ContentDelta") if thinking else turn.kinds
    return (kinds, bool(turn.reasoning), thinking or bool(turn.content), [t[0] for t in turn.tools],
            turn.finish_reason, turn.completion_tokens, turn.error_kind)


@pytest.mark.parametrize("thinking", [True, False])
async def test_sse_turns_alike(real_vllm: VllmServer, sim_url: tuple[str, Path], thinking: bool) -> None:
    req = ChatRequest(messages=[{"role": "user", "content": "tell me about the sea"}], model=SERVED,
                      thinking=thinking, max_tokens=16, extra={"ignore_eos": True})  # vLLM's: to max_tokens
    async with (ApiClient(real_vllm.url, deadlines=DEADLINES) as a,
                ApiClient(sim_url[0], deadlines=DEADLINES) as b):
        real, sim = await stream_turn(a, req), await stream_turn(b, req)
    assert _shape(real, thinking) == _shape(sim, thinking), (real, sim)
    assert real.finish_reason == "length" and real.completion_tokens == 16


@pytest.mark.parametrize(("body", "path"), [
    ({"model": "nope", "messages": [{"role": "user", "content": "x"}]}, "/v1/chat/completions"),
    ({"model": SERVED}, "/v1/nowhere"),
])
def test_error_bodies_alike(real_vllm: VllmServer, sim_url: tuple[str, Path], body: dict[str, object],
                            path: str) -> None:
    errs = []
    for url in (real_vllm.url, sim_url[0]):
        r = httpx.post(url + path, json=body, timeout=60)
        errs.append((r.status_code, from_status(r.status_code, r.content, url)))
    (rs, real), (ss, sim) = errs
    assert rs == ss and real.kind == sim.kind and real.remedy == sim.remedy, (real, sim)


def test_access_log_alike(real_vllm: VllmServer, sim_url: tuple[str, Path]) -> None:
    for url, read in ((real_vllm.url, real_vllm.log_text), (sim_url[0], sim_url[1].read_text)):
        httpx.get(url + "/metrics?r37=differential", timeout=30)
        time.sleep(0.5)
        lines = [ln for ln in read().splitlines() if is_access_log(ln) and "r37=differential" in ln]
        assert len(lines) == 1 and lines[0].endswith('"GET /metrics?r37=differential HTTP/1.1" 200 OK'), lines


def test_probe_lines_marked_alike(real_vllm: VllmServer, sim_url: tuple[str, Path]) -> None:
    """The cockpit's own looks (readiness, /metrics) reach the access log marked, and only they: the Logs
    pane drops exactly those lines (`is_probe_line`), an operator's own /health stays."""
    for url, read in ((real_vllm.url, real_vllm.log_text), (sim_url[0], sim_url[1].read_text)):
        before = len(read().splitlines())
        ready = asyncio.run(probe(url, SERVED, 30))
        assert ready.ready, ready

        async def metrics(base: str = url) -> None:
            async with ApiClient(base, via="tunnel", health_timeout=30) as client:
                await client.metrics_text()

        asyncio.run(metrics())
        httpx.get(url + "/health", timeout=30)          # an operator's own look
        time.sleep(0.5)
        lines = [ln for ln in read().splitlines()[before:] if is_access_log(ln)]
        probes = [ln for ln in lines if is_probe_line(ln)]
        assert [ln.split('"')[1] for ln in probes] == [
            f"GET /health?{PROBE_QUERY} HTTP/1.1", f"GET /v1/models?{PROBE_QUERY} HTTP/1.1",
            f"GET /metrics?{PROBE_QUERY} HTTP/1.1"], lines
        assert [ln.split('"')[1] for ln in lines if not is_probe_line(ln)] == ["GET /health HTTP/1.1"], lines


@pytest.mark.parametrize("accept", ["gzip, deflate", "identity"])
def test_metrics_encoding_alike(real_vllm: VllmServer, sim_url: tuple[str, Path], accept: str) -> None:
    """/metrics comes plain whatever the client accepts (vLLM 0.32 does not gzip it, though httpx asks:
    every byte of it crosses the SSH tunnel at each read), from the sim as from vLLM."""
    for url in (real_vllm.url, sim_url[0]):
        r = httpx.get(url + "/metrics", headers={"Accept-Encoding": accept}, timeout=30)
        assert r.status_code == 200
        assert r.headers.get("Content-Encoding") is None, (url, r.headers)
        assert "vllm:num_requests_running" in r.text
