"""Fixtures of the API tests; the fake engine itself lives in apifakes.py."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
from aiohttp import web
from apifakes import FakeEngine, build_app, free_port


@pytest.fixture
async def fake_engine() -> AsyncIterator[FakeEngine]:
    state = FakeEngine()
    runner = web.AppRunner(build_app(state))
    await runner.setup()
    port = free_port()
    site = web.TCPSite(runner, "127.0.0.1", port)
    await site.start()
    state.base = f"http://127.0.0.1:{port}"
    try:
        yield state
    finally:
        await runner.cleanup()
