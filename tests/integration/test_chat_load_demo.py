"""Chat on the demo cluster under stress: the engine killed mid-answer, and 256 streams at once through
the SSH tunnel to rank 0 (the engine is the simulated one, started on rank 0 over SSH as in
test_chat_demo.py)."""

from __future__ import annotations

import asyncio
import contextlib
import os
import shlex
import sys
from collections.abc import AsyncIterator

import pytest

from cockpit.api import ChatSession, ChatSettings, ContentDelta, Finished, StreamError
from cockpit.api.endpoint import ApiEndpoint
from cockpit.api.stream import ChatEvent
from cockpit.hosts import Fleet

STREAMS = 256


class Engine:
    """The simulated engine on rank 0, its PID on rank 0's host known (to kill it as a crash would)."""

    def __init__(self, fleet: Fleet, endpoint: ApiEndpoint) -> None:
        self.fleet, self.endpoint = fleet, endpoint
        self.pid: asyncio.Future[str] = asyncio.get_running_loop().create_future()
        self.task: asyncio.Task[None] | None = None

    async def start(self, cluster) -> None:  # type: ignore[no-untyped-def]
        cfg = cluster.config
        engine = [sys.executable, "-m", "cockpit.sim.engine", "serve-ready",
                  "--port", str(cfg.cluster.api_port), "--bind", cfg.host(0).fabric_ip, "--speed", "5"]
        argv = ["sh", "-c", "echo ENGINE_PID $$; exec " + shlex.join(engine)]

        async def run() -> None:
            async for line in self.fleet[0].stream(argv):
                if line.startswith("ENGINE_PID ") and not self.pid.done():
                    self.pid.set_result(line.split()[1])

        self.task = asyncio.create_task(run())
        status = await self.endpoint.wait_ready(30)
        assert status.ok, status

    async def kill(self) -> None:
        """SIGKILL, as the OOM killer or `docker kill` would: no clean shutdown, sockets reset."""
        result = await self.fleet[0].run(["kill", "-9", await asyncio.wait_for(self.pid, 10)])
        assert result.exit_status == 0, result

    async def stop(self) -> None:
        if self.task is not None:
            self.task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self.task
            self.task = None


@pytest.fixture
async def engine(demo_cluster) -> AsyncIterator[Engine]:  # type: ignore[no-untyped-def]
    async with Fleet(demo_cluster.config) as fleet:
        assert await fleet[0].wait_connected(20)
        async with ApiEndpoint(fleet, demo_cluster.config.cluster.api_port) as endpoint:
            eng = Engine(fleet, endpoint)
            await eng.start(demo_cluster)
            try:
                yield eng
            finally:
                await eng.stop()


async def test_engine_killed_mid_answer_chat_keeps_the_partial(engine: Engine,
                                                                demo_cluster) -> None:  # type: ignore[no-untyped-def]
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "cockpit", "--config", str(demo_cluster.config_path), "chat", "--no-thinking",
        "--max-tokens", "5000", "--timeout", "20", "Write a very long essay about the ocean.",
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE, env=dict(os.environ))
    assert proc.stdout is not None and proc.stderr is not None
    first = await asyncio.wait_for(proc.stdout.read(64), 60)  # the answer is streaming
    assert first.strip()
    await engine.kill()
    rest, err = await asyncio.wait_for(proc.communicate(), 60)
    out, errors = (first + rest).decode(), err.decode()
    assert proc.returncode == 1, (out, errors)
    assert len(out.strip()) >= len(first.strip())  # the partial answer is on stdout
    assert "r37-cockpit: stream failed (" in errors and "Traceback" not in errors
    assert "remedy: " in errors and "engine may have died" in errors and "logs --rank 0 -n 200" in errors


async def _one(endpoint: ApiEndpoint, i: int) -> list[ChatEvent]:
    session = ChatSession(ChatSettings(thinking=False, max_tokens=8))
    session.add_user(f"Say hello to stream {i}.")
    client = await endpoint.client()
    async with client.chat_stream(session.request()) as stream:
        return [ev async for ev in stream]


async def test_256_streams_at_once_through_the_tunnel(engine: Engine) -> None:
    results = await asyncio.wait_for(
        asyncio.gather(*(_one(engine.endpoint, i) for i in range(STREAMS))), 240)  # no exception escapes
    finished = [r[-1] for r in results if isinstance(r[-1], Finished)]
    failed = [r[-1] for r in results if isinstance(r[-1], StreamError)]
    assert len(finished) + len(failed) == STREAMS  # each ended with exactly one terminal event
    for err in failed:  # a failure is a clear one: typed, with a message and a remedy
        assert err.message and err.remedy and err.kind, err
    assert all(f.result.content for f in finished)
    assert len(finished) >= STREAMS * 0.9, [(e.kind, e.message) for e in failed[:5]]
    assert all(any(isinstance(e, ContentDelta) for e in r) for r in results if isinstance(r[-1], Finished))
    # The tunnel survives: the API still answers, and one more answer streams through it.
    assert (await engine.endpoint.check()).ok
    assert isinstance((await _one(engine.endpoint, STREAMS))[-1], Finished)
