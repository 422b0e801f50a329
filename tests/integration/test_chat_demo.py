"""Chat against the demo cluster: the API through the SSH tunnel to rank 0, as the cockpit reaches it.

The engine is a simulated, already-booted one started on rank 0 over SSH (bound to rank 0's own
address, which the demo host forwards 127.0.0.1:<api_port> to) and stopped by closing that SSH stream.
With its ``hang`` fault (requests get their role chunk, then no token) `chat`, `smoke` and the chat pane
give up after their deadlines instead of waiting forever.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import re
import struct
import sys
import time
import zlib
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from textual.widgets import Static

from cockpit.api import ChatSession, ChatSettings, ContentDelta, Finished, ReasoningDelta
from cockpit.api.endpoint import ApiEndpoint
from cockpit.api.smoke import WEATHER_TOOL
from cockpit.config import EngineSection
from cockpit.hosts import Fleet, HostState
from cockpit.tui.app import CockpitApp
from cockpit.tui.panes.chat import ChatPane
from cockpit.tui.widgets.chat_turns import AssistantTurn, SmokeTurn

ABORT = 'finished_reason="abort"'


@dataclass
class Rank0Engine:
    fleet: Fleet
    endpoint: ApiEndpoint
    task: asyncio.Task[None] | None = None

    async def start(self, cluster) -> None:  # type: ignore[no-untyped-def]
        cfg = cluster.config
        argv = [sys.executable, "-m", "cockpit.sim.engine", "serve-ready",
                "--port", str(cfg.cluster.api_port), "--bind", cfg.host(0).fabric_ip, "--speed", "5",
                "--fault-root", str(cluster.root(0))]  # cluster.fault(0, "hang") applies

        async def run() -> None:
            async for _ in self.fleet[0].stream(argv):
                pass

        self.task = asyncio.create_task(run())
        status = await self.endpoint.wait_ready(30)
        assert status.ok, status

    async def stop(self) -> None:
        if self.task is not None:
            self.task.cancel()  # closes the SSH stream: the remote engine gets TERM
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self.task
            self.task = None


async def _metrics(endpoint: ApiEndpoint, name: str, label: str = "") -> float:
    """Sum of a metric's samples (those carrying `label`, e.g. 'finished_reason="abort"')."""
    text = await (await endpoint.client()).metrics_text()
    pattern = rf"^{re.escape(name)}(\{{[^}}]*\}})? (\S+)$"
    return sum(float(m.group(2)) for m in re.finditer(pattern, text, re.M) if label in (m.group(1) or ""))


@pytest.fixture
async def rank0(demo_cluster) -> AsyncIterator[Rank0Engine]:  # type: ignore[no-untyped-def]
    async with Fleet(demo_cluster.config) as fleet:
        assert await fleet[0].wait_connected(20)
        async with ApiEndpoint(fleet, demo_cluster.config.cluster.api_port) as endpoint:
            engine = Rank0Engine(fleet, endpoint)
            await engine.start(demo_cluster)
            try:
                yield engine
            finally:
                await engine.stop()


def _png(path: Path) -> Path:
    raw = b"".join(b"\x00" + bytes((20, 40, 220)) * 16 for _ in range(16))

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    ihdr = struct.pack(">IIBBBBB", 16, 16, 8, 2, 0, 0, 0)
    path.write_bytes(b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr) + chunk(b"IDAT", zlib.compress(raw))
                     + chunk(b"IEND", b""))
    return path


async def _answer(endpoint: ApiEndpoint, session: ChatSession, **overrides: object) -> list[object]:
    client = await endpoint.client()
    async with client.chat_stream(session.request(**overrides)) as stream:
        return [ev async for ev in stream]


async def test_streamed_answers_thinking_images_and_tools(rank0: Rank0Engine, tmp_path: Path) -> None:
    assert rank0.endpoint.via == "tunnel"
    url = await rank0.endpoint.url()
    assert url.startswith("http://127.0.0.1:")  # the forward binds loopback only

    on = ChatSession()
    on.add_user("Why is the sky blue?")
    events = await _answer(rank0.endpoint, on, max_tokens=300)
    fin = events[-1]
    assert isinstance(fin, Finished), fin
    assert any(isinstance(e, ReasoningDelta) for e in events)
    assert any(isinstance(e, ContentDelta) for e in events)
    assert fin.stats.ttft_s is not None and fin.stats.decode_tps is not None

    off = ChatSession(ChatSettings(thinking=False))
    off.attach_image(_png(tmp_path / "blue.png"))
    off.add_user("What is in this image?")
    events = await _answer(rank0.endpoint, off, max_tokens=200)
    fin = events[-1]
    assert isinstance(fin, Finished), fin
    assert not any(isinstance(e, ReasoningDelta) for e in events) and fin.result.content.strip()

    tools = ChatSession(ChatSettings(thinking=False), tools=[WEATHER_TOOL])
    tools.add_user("What is the weather in Paris right now?")
    fin = (await _answer(rank0.endpoint, tools))[-1]
    assert isinstance(fin, Finished) and fin.finish_reason == "tool_calls"
    tools.add_result(fin.result)
    (call,) = tools.pending_tool_calls()
    assert call.name == "get_weather" and call.arguments()["city"].lower() == "paris"
    tools.add_tool_result(call.id, {"city": "Paris", "temperature_c": 18, "sky": "overcast"})
    fin = (await _answer(rank0.endpoint, tools))[-1]
    assert isinstance(fin, Finished) and fin.finish_reason == "stop"
    assert "18" in fin.result.content


async def test_cancel_mid_stream_aborts_server_side(rank0: Rank0Engine) -> None:
    session = ChatSession(ChatSettings(thinking=False))
    session.add_user("Write a very long essay about the ocean.")
    aborted_before = await _metrics(rank0.endpoint, "vllm:request_success_total", ABORT)
    client = await rank0.endpoint.client()
    async with client.chat_stream(session.request(max_tokens=5000)) as stream:
        async for event in stream:
            if isinstance(event, ContentDelta):
                break  # leaving the block closes the response
    for _ in range(50):
        running = await _metrics(rank0.endpoint, "vllm:num_requests_running")
        aborted = await _metrics(rank0.endpoint, "vllm:request_success_total", ABORT)
        if running == 0 and aborted > aborted_before:
            break
        await asyncio.sleep(0.1)
    assert running == 0 and aborted == aborted_before + 1


async def test_api_down_is_a_clear_state(demo_cluster) -> None:  # type: ignore[no-untyped-def]
    async with Fleet(demo_cluster.config) as fleet:
        assert await fleet[0].wait_connected(20)
        async with ApiEndpoint(fleet, demo_cluster.config.cluster.api_port) as endpoint:
            before = endpoint.describe()
            status = await endpoint.check()
            after = endpoint.describe()
    assert status.state in ("not_ready", "unreachable") and not status.ok
    # The API line names no placeholder port before the tunnel opens, and the real local port once it is.
    assert "<local port>" not in before and "not open yet" in before
    assert re.match(r"http://127\.0\.0\.1:\d+ → rank 0's 127\.0\.0\.1:\d+ over SSH", after), after
    assert "not ready" in status.message and "rank 0" in status.remedy


async def test_tunnel_comes_back_on_the_same_port_after_reconnect(rank0: Rank0Engine, demo_cluster) -> None:
    url = await rank0.endpoint.url()
    demo_cluster.fault(0, "host-down")
    try:
        for _ in range(150):
            if rank0.fleet[0].status.state is HostState.LOST:
                break
            await asyncio.sleep(0.1)
        status = await rank0.endpoint.check()
        assert status.state == "tunnel_down" and "rank 0" in status.message and status.remedy
    finally:
        demo_cluster.fault(0, "host-down", on=False)
    assert await rank0.fleet[0].wait_connected(30)
    # The engine ran in rank 0's old SSH session; a restarted one answers on the re-established forward.
    await rank0.stop()
    await rank0.start(demo_cluster)
    assert await rank0.endpoint.url() == url
    assert (await rank0.endpoint.check()).ok


async def _until(pilot, pred, timeout: float) -> None:  # type: ignore[no-untyped-def]
    t0 = time.monotonic()
    while not pred():
        await pilot.pause(0.1)
        assert time.monotonic() - t0 < timeout, "timed out"


async def test_pane_streams_stops_and_runs_the_smoke_test(rank0: Rank0Engine, demo_cluster) -> None:
    app = CockpitApp(demo_cluster.config, demo_cluster.config_path)
    async with app.run_test(size=(130, 35)) as pilot:
        await pilot.pause()
        app.action_show_pane("chat")
        pane = app.query_one(ChatPane)
        await _until(pilot, lambda: pane.api_status is not None and pane.api_status.ready, 30)
        pane.query_one("#chat-input").focus()
        await pilot.pause()

        await pilot.press("ctrl+t")  # thinking off: the answer starts at once
        assert not pane.session.settings.thinking
        # 25 000 tokens planned by the simulated engine: still streaming whenever the Esc lands (loaded box)
        assert "not open yet" in str(pane.query_one("#chat-status", Static).render())
        pane.send("Write a 20000-word essay about the ocean.")
        await _until(pilot, lambda: pane._turn is not None and pane._turn.content_text, 20)
        # the answer comes through the tunnel: the API line says so (it said "not open yet" while it streamed)
        api_line = str(pane.query_one("#chat-status", Static).render())
        assert re.search(r"http://127\.0\.0\.1:\d+ → rank 0's 127\.0\.0\.1:\d+ over SSH", api_line), api_line
        # usage on every chunk (continuous_usage_stats): tokens and tok/s move while it streams
        # (a loaded machine can deliver the first chunks in one read: wait for tokens after the first)
        await _until(pilot, lambda: pane._turn is not None and pane._turn.stats is not None
                     and (pane._turn.stats.completion_tokens or 0) >= 5
                     and pane._turn.stats.decode_tps is not None, 20)
        live = pane._turn.stats
        assert pane._streaming and live is not None and live.decode_tps is not None
        await pilot.press("escape")
        await _until(pilot, lambda: not pane._streaming, 10)
        stopped = list(app.query(AssistantTurn))[-1]
        assert stopped.finish == "stopped" and stopped.content_text

        pane.send("Write two sentences about the ocean.")
        await _until(pilot, lambda: not pane._streaming and len(app.query(AssistantTurn)) == 2, 30)
        done = list(app.query(AssistantTurn))[-1]
        assert done.finish in ("stop", "length") and not done.reasoning_text
        assert done.stats is not None and done.stats.ttft_s is not None
        assert pane.session.last_answer() == done.content_text

        await pilot.press("ctrl+g")
        await _until(pilot, lambda: bool(app.query(SmokeTurn)) and app.query_one(SmokeTurn).done, 60)
        smoke = app.query_one(SmokeTurn)
        assert [s.name for s in smoke.steps] == ["health", "models", "card request", "counting", "tool call"]
        assert all(s.ok for s in smoke.steps)


# --- a hung engine: nothing waits forever -----------------------------------------------------------


@contextlib.contextmanager
def hung(cluster) -> object:  # type: ignore[no-untyped-def]
    cluster.fault(0, "hang")
    try:
        yield
    finally:
        cluster.fault(0, "hang", on=False)


async def _cockpit(cluster, *argv: str) -> tuple[int, str, str, float]:  # type: ignore[no-untyped-def]
    """Run `r37-cockpit --config <the demo's> ARGV…` as the operator would; exit code, out, err, seconds."""
    t0 = time.monotonic()
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "cockpit", "--config", str(cluster.config_path), *argv,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE, env=dict(os.environ))
    try:
        out, err = await asyncio.wait_for(proc.communicate(), 60)
    except TimeoutError:
        proc.kill()
        await proc.wait()
        raise AssertionError(f"r37-cockpit {' '.join(argv)} still running after 60 s") from None
    assert proc.returncode is not None
    return proc.returncode, out.decode(), err.decode(), time.monotonic() - t0


async def test_chat_and_smoke_give_up_on_a_hung_engine(rank0: Rank0Engine, demo_cluster) -> None:
    aborted_before = await _metrics(rank0.endpoint, "vllm:request_success_total", ABORT)
    with hung(demo_cluster):
        (rc, out, err, took), (src, sout, serr, stook) = await asyncio.gather(
            _cockpit(demo_cluster, "chat", "--timeout", "10", "hi"),
            _cockpit(demo_cluster, "smoke", "--timeout", "10", "--json"))
        assert (await _metrics(rank0.endpoint, "vllm:num_requests_running")) >= 1  # hung, not refused

    assert rc == 1 and out == "", (rc, out, err)
    assert "stream failed (first_token_timeout): no first token within 10 s" in err
    cockpit = f"r37-cockpit --config {demo_cluster.config_path.resolve()}"  # the demo's is no default
    assert f"`{cockpit} status`" in err and f"`{cockpit} logs --rank 0 -n 200`" in err
    assert "stop head first" in err
    # the 10 s deadline, not the 300 s default; the rest is start-up, which a busy machine makes slow
    assert 10 <= took < 60, took

    smoke = json.loads(sout)
    assert src == 1 and not smoke["passed"], (src, sout, serr)
    assert [(s["name"], s["ok"]) for s in smoke["steps"]] == [
        ("health", True), ("models", True), ("card request", False)]
    assert smoke["error"]["kind"] == "first_token_timeout" and "hung" in smoke["error"]["remedy"]
    assert "smoke test stopped (first_token_timeout): card request: no answer within 10 s" in serr
    assert 10 <= stook < 60, stook

    # Healed, the engine goes on with the hung requests: the streamed one finds its client gone (the
    # connection was closed when the deadline passed) and is aborted, not answered.
    for _ in range(100):
        if (await _metrics(rank0.endpoint, "vllm:num_requests_running")) == 0:
            break
        await asyncio.sleep(0.1)
    assert await _metrics(rank0.endpoint, "vllm:request_success_total", ABORT) >= aborted_before + 1


async def test_pane_gives_up_on_a_hung_engine_and_takes_the_next_message(rank0: Rank0Engine,
                                                                         demo_cluster) -> None:
    engine = EngineSection(hang_after_s=90.0, first_token_timeout_s=3.0, idle_timeout_s=3.0)
    config = demo_cluster.config.model_copy(update={"engine": engine})
    app = CockpitApp(config, demo_cluster.config_path)
    async with app.run_test(size=(130, 35)) as pilot:
        await pilot.pause()
        app.action_show_pane("chat")
        pane = app.query_one(ChatPane)
        await _until(pilot, lambda: pane.api_status is not None and pane.api_status.ready, 30)
        field = pane.query_one("#chat-input")
        field.focus()
        await pilot.pause()
        await pilot.press("ctrl+t")  # thinking off: a healed engine answers at once

        with hung(demo_cluster):
            t0 = time.monotonic()
            await pilot.press(*"hi", "enter")
            await _until(pilot, lambda: pane._streaming, 5)
            turn = list(app.query(AssistantTurn))[-1]
            await _until(pilot, lambda: (turn.waited or 0) >= 2, 10)  # the wait is shown, ticking
            assert re.search(r"waiting for the first token · \d+ s", str(turn.query_one(".stats").render()))
            await _until(pilot, lambda: not pane._streaming, 10)
            took = time.monotonic() - t0
        assert 3 <= took < 20, took             # its 3 s deadline (a busy machine draws the rest late)
        assert turn.finish == "error" and turn.error is not None
        message, remedy = turn.error
        assert "no first token within 3 s" in message
        assert f"`r37-cockpit --config {demo_cluster.config_path.resolve()} logs --rank 0 -n 200`" in remedy
        shown = str(turn.query_one(".error").render())
        assert "no first token within 3 s" in shown and "remedy:" in shown

        assert app.focused is field  # the input is ready for the next message
        await pilot.press(*"Write two sentences about the ocean.", "enter")
        await _until(pilot, lambda: len(app.query(AssistantTurn)) == 2 and not pane._streaming, 30)
        answer = list(app.query(AssistantTurn))[-1]
        assert answer.finish in ("stop", "length") and answer.content_text and answer.error is None
