"""The Chat pane through an --api-url gateway that is not vLLM (the second test server over real HTTP): it
asks the one model the gateway serves, with the key from OPENAI_API_KEY, and a refused key is said so."""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "fixtures"))
from openai_server import ALIAS, OpenAIServer

from cockpit.tui.app import CockpitApp
from cockpit.tui.panes.chat import ChatPane
from cockpit.tui.widgets.chat_turns import AssistantTurn

KEY = "sk-gateway-test-4242"


@pytest.fixture(scope="module")
def gateway() -> Iterator[OpenAIServer]:
    with OpenAIServer(KEY) as server:
        yield server


async def _until(pilot, pred: Callable[[], object], timeout: float = 30) -> None:  # type: ignore[no-untyped-def]
    t0 = time.monotonic()
    while not pred():
        await pilot.pause(0.05)
        assert time.monotonic() - t0 < timeout, "timed out"


async def test_the_pane_asks_the_gateways_only_model_with_the_environment_key(
        gateway: OpenAIServer, fixed_config, monkeypatch: pytest.MonkeyPatch) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    app = CockpitApp(fixed_config, connect=False, api_url=gateway.url)
    async with app.run_test(size=(130, 35)) as pilot:
        await pilot.pause()
        app.action_show_pane("chat")
        pane = app.query_one(ChatPane)
        await app.ctx.watcher.probe()
        await _until(pilot, lambda: pane.api_status is not None and pane.api_status.ready)
        assert pane._model() == ALIAS                        # not the cluster's served name
        pane.send("hello")
        await _until(pilot, lambda: app.query(AssistantTurn) and not pane._streaming)
        turn = app.query_one(AssistantTurn)
        assert "Hello from the other server." in str(turn.query_one(".content").render())
        assert KEY not in app.export_screenshot().replace("&#160;", " ")


async def test_a_refused_key_is_said(gateway: OpenAIServer, fixed_config,  # type: ignore[no-untyped-def]
                                     monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-wrong")
    app = CockpitApp(fixed_config, connect=False, api_url=gateway.url)
    async with app.run_test(size=(130, 35)) as pilot:
        await pilot.pause()
        app.action_show_pane("chat")
        pane = app.query_one(ChatPane)
        await app.ctx.watcher.probe()
        await _until(pilot, lambda: pane.api_status is not None and pane.api_status.state == "unauthorized")
        pane.api_changed()              # (connect=False: no watcher loop posts the change)
        await pilot.pause()
        assert "API key needed or refused" in str(pane.query_one("#chat-status").render())
