"""The chat pane against the hostile server (real HTTP, ``api_url``): a malformed answer ends the turn with
the error and the partial text (never "streaming…" forever), and escapes in an answer are shown inert."""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "api"))
from hostile_server import PARTIAL, HostileState, hostile_server

from cockpit.tui.app import CockpitApp
from cockpit.tui.panes.chat import ChatPane
from cockpit.tui.widgets.chat_turns import AssistantTurn


@pytest.fixture(scope="module")
def hostile() -> Iterator[HostileState]:
    with hostile_server() as state:
        yield state


async def _until(pilot, pred: Callable[[], object], timeout: float = 30) -> None:  # type: ignore[no-untyped-def]
    t0 = time.monotonic()
    while not pred():
        await pilot.pause(0.05)
        assert time.monotonic() - t0 < timeout, "timed out"


async def _answer(config, url: str) -> tuple[AssistantTurn, str, str]:  # type: ignore[no-untyped-def]
    """Send one message through the pane to ``url``; the finished turn, what it shows (content, thinking
    and tool calls) and its error as drawn."""
    app = CockpitApp(config, connect=False, api_url=url)
    async with app.run_test(size=(130, 35)) as pilot:
        await pilot.pause()
        app.action_show_pane("chat")
        pane = app.query_one(ChatPane)
        pane.send("Write two sentences about the ocean.")
        await _until(pilot, lambda: app.query(AssistantTurn) and not app.query_one(AssistantTurn).streaming)
        await _until(pilot, lambda: not pane._streaming)
        await pilot.pause()
        turn = app.query_one(AssistantTurn)
        parts = ("content", "reasoning", "tool-calls")
        shown = "\n".join(str(turn.query_one(f".{part}").render()) for part in parts)
        return turn, shown, str(turn.query_one(".error").render())


@pytest.mark.parametrize("mode", ["badusage/types", "badusage/string", "nested"])
async def test_a_malformed_answer_ends_the_turn_with_the_error_and_the_partial(
        hostile: HostileState, fixed_config, mode: str) -> None:  # type: ignore[no-untyped-def]
    turn, content, error = await _answer(fixed_config, f"{hostile.base}/{mode}")
    assert not turn.streaming and turn.finish == "error"
    assert turn.content_text == PARTIAL and PARTIAL in content
    assert "stream failed (protocol_error)" in error and "remedy:" in error


async def test_escapes_in_an_answer_are_inert_in_the_pane(hostile: HostileState, fixed_config) -> None:  # type: ignore[no-untyped-def]
    turn, content, _error = await _answer(fixed_config, hostile.base + "/escapes")
    assert turn.finish == "stop" and "\x1b" in turn.content_text  # the model's text is kept as it came
    assert not any(c in content for c in "\x1b\x07\x9b")
    assert "␛]52;c;" in content and "[bold red]not bold[/]" in content  # visible, literal
    assert "line one" in content and "\nline two" in content  # line breaks kept
