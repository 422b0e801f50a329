"""The simulated engine writes what real vLLM 0.32 writes where the cockpit reads it (captures:
tests/fixtures/samples/real-vllm-0.32-cpu; the live comparison: tests/real_vllm/test_differential.py)."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import httpx
from vllmread import sample_sections, stream_turn, turn_from_sse

from cockpit.api.chat import ChatRequest
from cockpit.api.client import ApiClient
from cockpit.api.errors import from_status
from cockpit.constants import SERVED_MODEL
from cockpit.recipe.phases import is_access_log, match_stats
from cockpit.sim import layout
from cockpit.sim.engine.spawn import ready_engine

WEATHER = {"type": "function", "function": {
    "name": "get_weather", "description": "the weather in a city",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}

CHAT = {"messages": [{"role": "user", "content": "Tell me about clouds."}], "max_tokens": 64,
        "chat_template_kwargs": {"thinking": False}}


def stats_lines(log: Path) -> list[tuple[float, float, int, int]]:
    return [s for line in log.read_text(errors="replace").splitlines() if (s := match_stats(line))]


def test_one_access_log_line_per_request(tmp_path: Path) -> None:
    log = tmp_path / "engine.log"
    with ready_engine(log) as url:
        for path in ("/health", "/metrics", "/v1/models"):
            assert httpx.get(url + path, timeout=10).status_code == 200
        httpx.post(url + "/v1/chat/completions", json=CHAT, timeout=60)
        time.sleep(0.3)
        access = [line for line in log.read_text().splitlines() if is_access_log(line)]
    # ready_engine's own /health probes come first
    assert [a.split(" - ", 1)[1] for a in access[-4:]] == [
        '"GET /health HTTP/1.1" 200 OK', '"GET /metrics HTTP/1.1" 200 OK', '"GET /v1/models HTTP/1.1" 200 OK',
        '"POST /v1/chat/completions HTTP/1.1" 200 OK']
    assert all(a.startswith("INFO:     127.0.0.1:") for a in access)


def test_an_idle_engine_prints_no_stats_line(tmp_path: Path) -> None:
    log = tmp_path / "engine.log"
    with ready_engine(log, "--time-scale", "0.1") as url:    # a stats interval of 1 s
        httpx.post(url + "/v1/chat/completions", json=CHAT, timeout=60)
        time.sleep(3)     # the interval with the answer's throughput and the one after it
        n = len(stats_lines(log))
        assert n >= 1
        time.sleep(5)
        assert len(stats_lines(log)) == n, stats_lines(log)   # idle: quiet


def test_a_hung_engine_prints_one_flat_stats_line_then_nothing(tmp_path: Path) -> None:
    log = tmp_path / "engine.log"
    faults = layout.faults_dir(tmp_path / "root")
    faults.mkdir(parents=True)
    with ready_engine(log, "--time-scale", "0.1", "--fault-root", str(tmp_path / "root")) as url:
        # an answer longer than max_tokens: still running when the hang comes, however late this test
        # sees it start (a natural answer of ~600 tokens could end first on a loaded machine: CI)
        body = {**CHAT, "messages": [{"role": "user", "content": "Write a 30000-word essay about clouds."}],
                "stream": True, "max_tokens": 20000}
        t = threading.Thread(target=lambda: _stream_until_closed(url, body), daemon=True)
        t.start()
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and not any(s[1] > 0 and s[2] for s in stats_lines(log)):
            time.sleep(0.1)
        assert any(s[1] > 0 and s[2] for s in stats_lines(log)), "the answer never showed as generating"
        (faults / "hang").write_text("")      # the engine stops mid-answer, its request still running
        n = len(stats_lines(log))
        time.sleep(6)     # six intervals of the hang
        after = stats_lines(log)[n:]
    flat = [s for s in after if s[1] == 0.0]
    assert all(s[2] >= 1 for s in after) and len(flat) <= 1, after


def _stream_until_closed(url: str, body: dict[str, object]) -> None:
    try:
        with httpx.stream("POST", url + "/v1/chat/completions", json=body, timeout=30) as r:
            for _ in r.iter_bytes():
                pass
    except httpx.HTTPError:
        pass


def test_an_unknown_path_answers_as_fastapi_does(tmp_path: Path) -> None:
    with ready_engine(tmp_path / "engine.log") as url:
        r = httpx.get(url + "/v1/nowhere", timeout=10)
    assert r.status_code == 404 and r.json() == {"detail": "Not Found"}
    assert "Wrong path" in from_status(404, r.content, url).remedy


async def test_a_named_tool_call_reads_as_the_real_capture(tmp_path: Path) -> None:
    """Differential, on the capture of real 0.32 (started with the tool flags): the cockpit reads one call,
    named once, with JSON arguments, from both."""
    real = turn_from_sse(sample_sections("sse-tool-calls.txt")["forced named tool call, stream"])
    req = ChatRequest(messages=[{"role": "user", "content": "weather in Paris?"}], model=SERVED_MODEL,
                      thinking=False, max_tokens=400, tools=[WEATHER],
                      tool_choice={"type": "function", "function": {"name": "get_weather"}})
    with ready_engine(tmp_path / "engine.log") as url:
        async with ApiClient(url) as client:
            sim = await stream_turn(client, req)
    for turn in (real, sim):
        assert turn.error_kind is None, turn
        assert [name for name, _ in turn.tools] == ["get_weather"]
        assert turn.tools[0][1].startswith('{"')
        assert turn.kinds[0] == "RoleStarted" and turn.kinds[-1] == "Finished"
    # drift: the random model's guided JSON ran to max_tokens ("length"); the sim's call ends
    assert real.finish_reason == "length" and sim.finish_reason in ("stop", "tool_calls")
