"""Integration: the API client against the simulated engine (`python -m cockpit.sim.engine serve-ready`)."""

from __future__ import annotations

import asyncio
import importlib.util
import re
import struct
import subprocess
import zlib
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from cockpit.api.chat import ChatSession, ChatSettings
from cockpit.api.client import ApiClient
from cockpit.api.smoke import WEATHER_TOOL, all_passed, run_smoke
from cockpit.api.stream import ChatEvent, ContentDelta, Finished, ReasoningDelta, StreamError
from cockpit.constants import SERVED_MODEL
from cockpit.sim.engine.spawn import free_port, spawn_ready

ENGINE_MISSING = importlib.util.find_spec("cockpit.sim.engine.__main__") is None
ENGINE_MISSING_REASON = "the simulated engine module cockpit.sim.engine.__main__ has not landed yet"
REPO = Path(__file__).resolve().parents[2]


async def _wait_ready(client: ApiClient, proc: subprocess.Popen[bytes], deadline_s: float = 60.0) -> None:
    loop = asyncio.get_running_loop()
    end = loop.time() + deadline_s
    while loop.time() < end:
        if proc.poll() is not None:
            raise RuntimeError(f"engine exited with {proc.returncode}")
        if (await client.health()).ok:
            return
        await asyncio.sleep(0.1)
    raise RuntimeError("engine did not become ready")


@pytest.fixture
async def engine(tmp_path: Path) -> AsyncIterator[ApiClient]:
    if ENGINE_MISSING:
        pytest.skip(ENGINE_MISSING_REASON)
    port = free_port()
    proc = spawn_ready(port, "--speed", "5", log=tmp_path / "engine.log", cwd=tmp_path)
    client = ApiClient(f"http://127.0.0.1:{port}")
    try:
        try:
            await _wait_ready(client, proc)
        except RuntimeError as exc:
            pytest.fail(f"{exc}; log:\n{(tmp_path / 'engine.log').read_text()[-3000:]}")
        yield client
    finally:
        await client.aclose()
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


async def stream(client: ApiClient, session: ChatSession, **overrides: object) -> list[ChatEvent]:
    async with client.chat_stream(session.request(**overrides)) as s:
        return [ev async for ev in s]


def finished(events: list[ChatEvent]) -> Finished:
    last = events[-1]
    assert isinstance(last, Finished), last
    return last


async def test_streamed_answer_thinking_off(engine: ApiClient) -> None:
    s = ChatSession(ChatSettings(thinking=False, temperature=0.0))
    s.add_user("Write two sentences about the ocean.")
    events = await stream(engine, s, max_tokens=128)
    fin = finished(events)
    assert not any(isinstance(e, ReasoningDelta) for e in events)
    assert (
        fin.result.content.strip()
        and "".join(e.text for e in events if isinstance(e, ContentDelta)) == fin.result.content
    )
    usage = fin.result.usage
    assert usage is not None and usage.completion_tokens >= 2
    # Speculative decoding: fewer content chunks than tokens.
    assert sum(isinstance(e, ContentDelta) for e in events) < usage.completion_tokens
    assert fin.stats.ttft_s is not None and fin.stats.decode_tps is not None
    s.add_result(fin.result)
    assert s.last_answer() == fin.result.content


async def test_thinking_on_streams_reasoning_first(engine: ApiClient) -> None:
    s = ChatSession()  # serving defaults: thinking on, xhigh
    s.add_user("Why is the sky blue?")
    events = await stream(engine, s, max_tokens=400)
    fin = finished(events)
    kinds = [type(e).__name__ for e in events if isinstance(e, ReasoningDelta | ContentDelta)]
    assert kinds[0] == "ReasoningDelta" and "ContentDelta" in kinds
    assert "ReasoningDelta" not in kinds[kinds.index("ContentDelta") :]  # thinking first, then the answer
    assert fin.result.reasoning.strip() and fin.result.content.strip()
    usage = fin.result.usage
    assert usage is not None and usage.reasoning_tokens
    s.add_result(fin.result)
    assert "reasoning" in s.messages[-1] and "reasoning" not in s.api_messages()[-1]


def _png_stripes(colours: list[tuple[int, int, int]], width: int = 60, height: int = 20) -> bytes:
    band = width // len(colours)
    row = b"".join(bytes(colours[min(x // band, len(colours) - 1)]) for x in range(width))
    raw = b"".join(b"\x00" + row for _ in range(height))

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    ihdr = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return (
        b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr) + chunk(b"IDAT", zlib.compress(raw)) + chunk(b"IEND", b"")
    )


async def test_image_is_seen(engine: ApiClient, tmp_path: Path) -> None:
    f = tmp_path / "stripes.png"
    f.write_bytes(_png_stripes([(255, 0, 0), (0, 255, 0), (0, 0, 255)]))
    s = ChatSession(ChatSettings(thinking=False, temperature=0.0))
    s.attach_image(f)
    s.add_user("Describe this image.")
    fin = finished(await stream(engine, s, max_tokens=200))
    text = fin.result.content.lower()
    assert "stripes" in text and all(c in text for c in ("red", "green", "blue"))


async def test_tool_round_trip(engine: ApiClient) -> None:
    s = ChatSession(ChatSettings(thinking=False, temperature=0.0), tools=[WEATHER_TOOL])
    s.add_user("What is the weather in Tokyo right now?")
    fin = finished(await stream(engine, s, max_tokens=256))
    assert fin.finish_reason == "tool_calls"
    (call,) = fin.result.tool_calls
    assert call.name == "get_weather" and "tokyo" in call.arguments_json.lower()
    s.add_result(fin.result)
    s.add_tool_result(call.id, {"city": "Tokyo", "temperature_c": 23, "sky": "clear"})
    fin2 = finished(await stream(engine, s, max_tokens=256))
    assert fin2.finish_reason == "stop" and "23" in fin2.result.content
    s.add_result(fin2.result)
    assert [m["role"] for m in s.messages] == ["user", "assistant", "tool", "assistant"]


async def _running(client: ApiClient) -> float:
    text = await client.metrics_text()
    m = re.search(r"^vllm:num_requests_running\{[^}]*\} (\S+)$", text, re.M)
    assert m, "no vllm:num_requests_running in /metrics"
    return float(m.group(1))


async def test_cancel_mid_stream_aborts_on_server(engine: ApiClient) -> None:
    s = ChatSession(ChatSettings(thinking=False, temperature=0.0))
    s.add_user("Write a long story about a lighthouse keeper.")
    async with engine.chat_stream(s.request(max_tokens=4000)) as st:
        async for ev in st:
            if isinstance(ev, ContentDelta):
                break
        assert await _running(engine) == 1.0
    loop = asyncio.get_running_loop()
    end = loop.time() + 10
    while await _running(engine) != 0.0:
        assert loop.time() < end, "the engine still runs the cancelled request"
        await asyncio.sleep(0.05)


async def test_smoke_all_pass(engine: ApiClient) -> None:
    steps = [step async for step in run_smoke(engine)]
    assert all_passed(steps), steps


async def test_models_lists_served_model(engine: ApiClient) -> None:
    assert SERVED_MODEL in [m.id for m in await engine.models()]


async def test_engine_stopped_is_unreachable() -> None:
    client = ApiClient(f"http://127.0.0.1:{free_port()}")
    try:
        h = await client.health()
        s = ChatSession()
        s.add_user("hi")
        async with client.chat_stream(s.request()) as st:
            events = [ev async for ev in st]
    finally:
        await client.aclose()
    assert h.state == "unreachable" and h.remedy
    assert isinstance(events[-1], StreamError) and events[-1].kind == "unreachable"
