"""Snapshots of the chat pane: a streaming answer with thinking collapsed, a tool call, API not ready, an
answer waiting for its first token (the pane's clock frozen) and one given up on at its deadline; and the
matrix's scene (`scene`): a finished answer with its thinking folded and its figures."""

from __future__ import annotations

from cockpit.api import ContentDelta, Finished, ReasoningDelta, RoleStarted, StreamStats, ToolCallDelta, Usage
from cockpit.api.errors import REMEDY_NOT_READY, no_first_token
from cockpit.api.smoke import WEATHER_TOOL
from cockpit.api.status import ApiStatus
from cockpit.api.stream import ChatResult, StreamError, ToolCall
from cockpit.tui.app import CockpitApp
from cockpit.tui.panes.chat import ChatPane

SIZE = (130, 32)
READY = ApiStatus("ready", "ready: /health 200, /v1/models lists deepseek-v4.1-flash",
                     url="http://127.0.0.1:40123", checked_at=0.0)


async def _open_chat(app: CockpitApp, pilot, status: ApiStatus) -> ChatPane:  # type: ignore[no-untyped-def]
    await pilot.pause()
    app.action_show_pane("chat")
    pane = app.query_one(ChatPane)
    pane.query_one("#chat-input").focus()
    await pilot.pause()
    pane.show_api_status(status)
    return pane


def ask(pane: ChatPane, prompt: str) -> None:
    """The operator's message, and the answer's place opened under it."""
    pane.session.add_user(prompt)
    pane.rebuild()
    pane.begin_answer()


def test_streaming_answer_reasoning_collapsed(snap_compare, fixed_config) -> None:
    app = CockpitApp(fixed_config, connect=False)

    async def before(pilot) -> None:  # type: ignore[no-untyped-def]
        pane = await _open_chat(app, pilot, READY)
        ask(pane, "Write two sentences about the ocean.")
        live = StreamStats(t_start=0.0, t_first_token=0.31, t_end=1.2, completion_tokens=None, chunks=12,
                           max_gap_s=0.05, mean_gap_s=0.04)
        pane.feed(RoleStarted(), live)
        for piece in ["The user wants ", "two sentences ", "about the ocean."]:
            pane.feed(ReasoningDelta(piece), live)
        answer = ["The ocean covers ", "most of the planet", " and [bold]holds[/bold] *most* of its water."]
        for piece in answer:
            pane.feed(ContentDelta(piece), live)
        pane.action_fold_reasoning()
        pane.flush()
        await pilot.pause()

    assert snap_compare(app, terminal_size=SIZE, run_before=before)


def test_streaming_answer_with_live_usage(snap_compare, fixed_config) -> None:
    """Usage on every chunk: tokens and tok/s shown while the answer still streams (thinking unfolded)."""
    app = CockpitApp(fixed_config, connect=False)

    async def before(pilot) -> None:  # type: ignore[no-untyped-def]
        pane = await _open_chat(app, pilot, READY)
        ask(pane, "Count from 1 to 30.")
        pane.feed(RoleStarted())
        pane.feed(ReasoningDelta("Counting, one number a line."))
        pane.feed(ContentDelta("1\n2\n3\n4\n5\n6\n7\n8"))
        live = StreamStats(t_start=0.0, t_first_token=0.05, t_end=0.65, completion_tokens=31, chunks=9,
                           max_gap_s=0.04, mean_gap_s=0.04)
        pane._turn.set_stats(live)  # what flush() takes from the running stream
        pane.flush()
        await pilot.pause()

    assert snap_compare(app, terminal_size=SIZE, run_before=before)


def test_tool_call_shown(snap_compare, fixed_config) -> None:
    app = CockpitApp(fixed_config, connect=False)

    async def before(pilot) -> None:  # type: ignore[no-untyped-def]
        pane = await _open_chat(app, pilot, READY)
        pane.session.tools = [WEATHER_TOOL]
        pane.session.settings.thinking = False
        ask(pane, "What is the weather in Paris right now?")
        pane.feed(RoleStarted())
        pane.feed(ToolCallDelta(0, "chatcmpl-tool-7f3a", "get_weather", ""))
        pane.feed(ToolCallDelta(0, None, None, '{"city": '))
        pane.feed(ToolCallDelta(0, None, None, '"Paris", "unit": "celsius"}'))
        usage = Usage(12, 24, 36)
        pane.feed(usage)
        stats = StreamStats(0.0, 0.21, 0.70, 24, 9, 0.08, 0.06)
        call = ToolCall("chatcmpl-tool-7f3a", "get_weather", '{"city": "Paris", "unit": "celsius"}', 0)
        result = ChatResult("", "", (call,), "tool_calls", usage, stats)
        pane.feed(Finished("tool_calls", result, stats))
        pane.flush()
        await pilot.pause()

    assert snap_compare(app, terminal_size=SIZE, run_before=before)


def test_api_not_ready(snap_compare, fixed_config) -> None:
    app = CockpitApp(fixed_config, connect=False)
    status = ApiStatus("not_ready",
        "not ready: http://127.0.0.1:40123/health closed the connection without a response",
        REMEDY_NOT_READY, url="http://127.0.0.1:40123", checked_at=0.0)

    async def before(pilot) -> None:  # type: ignore[no-untyped-def]
        await _open_chat(app, pilot, status)
        await pilot.pause()

    assert snap_compare(app, terminal_size=SIZE, run_before=before)


def test_waiting_for_the_first_token(snap_compare, fixed_config) -> None:
    """Role chunk in, no token yet: the turn shows how long it has waited (12 s on the frozen clock)."""
    app = CockpitApp(fixed_config, connect=False)

    async def before(pilot) -> None:  # type: ignore[no-untyped-def]
        pane = await _open_chat(app, pilot, READY)
        now = [1000.0]
        pane.clock = lambda: now[0]  # the clock the pane counts the wait on
        ask(pane, "Summarise the recipe card in three lines.")
        pane.feed(RoleStarted())
        now[0] = 1012.6
        pane.tick()  # what its once-a-second timer calls
        pane.flush()
        await pilot.pause()

    assert snap_compare(app, terminal_size=SIZE, run_before=before)


def test_first_token_deadline_missed(snap_compare, fixed_config) -> None:
    """The first-token deadline passed: the error and its remedy in the turn, the input free again."""
    app = CockpitApp(fixed_config, connect=False)

    async def before(pilot) -> None:  # type: ignore[no-untyped-def]
        pane = await _open_chat(app, pilot, READY)
        ask(pane, "Summarise the recipe card in three lines.")
        pane.feed(RoleStarted())
        err = no_first_token(10)
        stats = StreamStats(0.0, None, 10.0, None, 1, 0.0, 0.0)
        partial = ChatResult("", "", (), None, None, stats)
        pane.feed(StreamError(err.message, err.kind, err.remedy, None, partial))
        await pilot.pause()

    assert snap_compare(app, terminal_size=SIZE, run_before=before)


def test_escapes_and_markup_in_an_answer_are_inert(snap_compare, fixed_config) -> None:
    """An answer (and its thinking and error) holding OSC 52, title, clear-screen, cursor-move and
    hyperlink escapes and markup-like text: all shown as visible symbols and literal text."""
    app = CockpitApp(fixed_config, connect=False)
    hostile = ("copy \x1b]52;c;cm0gLXJmIH4=\x07 title \x1b]0;pwned\x07 clear \x1b[2J\x1b[H moved \x1b[10;10H "
               "link \x1b]8;;http://evil.example/\x1b\\click\x1b]8;;\x1b\\")

    async def before(pilot) -> None:  # type: ignore[no-untyped-def]
        pane = await _open_chat(app, pilot, READY)
        ask(pane, "Say something nasty.")
        pane.feed(RoleStarted())
        pane.feed(ReasoningDelta("thinking " + hostile))
        pane.feed(ContentDelta("line one " + hostile + "\nmarkup [bold red]not bold[/] [link=http://x]x[/link]"))
        stats = StreamStats(0.0, 0.2, 1.0, None, 3, 0.1, 0.1)
        partial = ChatResult("", "", (), None, None, stats)
        pane.feed(StreamError("HTTP 500: engine says \x1b]0;owned\x07\x1b[2J [red]no[/]", "http_error",
                              "", 500, partial))
        await pilot.pause()

    assert snap_compare(app, terminal_size=SIZE, run_before=before)


async def scene(app: CockpitApp, pilot) -> None:  # type: ignore[no-untyped-def]
    """The matrix's chat state: the API ready, one question and its finished answer (thinking folded,
    TTFT, tok/s, tokens, finish reason), the key hints under the input."""
    pane = await _open_chat(app, pilot, READY)
    ask(pane, "Write two sentences about the ocean.")
    pane.feed(RoleStarted())
    pane.feed(ReasoningDelta("The user wants two sentences about the ocean."))
    answer = "The ocean covers most of the planet. It holds nearly all of its water and much of its life."
    pane.feed(ContentDelta(answer))
    usage = Usage(14, 38, 52)
    pane.feed(usage)
    stats = StreamStats(0.0, 0.31, 1.07, 38, 12, 0.05, 0.04)
    pane.feed(Finished("stop", ChatResult(answer, "The user wants two sentences about the ocean.", (), "stop",
                                          usage, stats), stats))
    pane.action_fold_reasoning()
    pane.flush()
    await pilot.pause()
