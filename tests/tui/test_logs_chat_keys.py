"""The Logs and Chat panes on the Pane base: key hints and every key they name follow the keymap, the
status lines show every part at 80 columns, a theme switch recolours the log rows, and a failed smoke test
ends its turn (the error itself shown once, by the app)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable

import pytest
from rich.style import Style

from cockpit.api import SmokeStep
from cockpit.telemetry.logline import LogLine
from cockpit.tui.app import CockpitApp
from cockpit.tui.panes.chat import ChatPane
from cockpit.tui.panes.logs import LogsPane
from cockpit.tui.widgets.chat_turns import SmokeTurn
from cockpit.tui.widgets.statusline import StatusLine

T0 = 1_795_993_157_000_000_000


async def _until(pilot, pred: Callable[[], object], tries: int = 100) -> None:  # type: ignore[no-untyped-def]
    for _ in range(tries):
        if pred():
            return
        await pilot.pause(0.02)
    raise AssertionError("timed out")


def _feed(pane: LogsPane, failure_at: int | None = None) -> None:
    lines = [LogLine(T0 + i * 1000, 0, f"INFO step {i}") for i in range(300)]
    if failure_at is not None:
        lines[failure_at] = LogLine(lines[failure_at].ts, 0, "NCCL WARN NET/IB : Got completion from peer")
    pane.ingest(0, lines)
    pane.flush(now=True)


def _status(pane: LogsPane) -> str:
    return pane.query_one("#logs-status", StatusLine).text.plain


async def test_logs_hints_and_messages_show_remapped_keys(fixed_config) -> None:  # type: ignore[no-untyped-def]
    app = CockpitApp(fixed_config, connect=False)
    async with app.run_test(size=(160, 48)) as pilot:
        app.set_keymap({"logs.follow": "g", "logs.next_error": "j", "logs.clear_filter": "ctrl+x"})
        app.action_show_pane("logs")
        await pilot.pause()
        pane = app.query_one(LogsPane)
        _feed(pane, failure_at=150)
        await pilot.pause()
        shown = _status(pane)
        assert "g follow" in shown and "j next error" in shown and "f/end follow" not in shown
        assert "^x closes" in pane.query_one("#logs-filter").placeholder  # type: ignore[attr-defined]
        await pilot.press("up", "up")  # scrolling up pauses following
        pane.ingest(0, [LogLine(T0 + 10**9, 0, "later")])
        pane.flush(now=True)
        await pilot.pause()
        assert not pane.view.following and "(g to follow)" in _status(pane)
        await pilot.press("e")
        await _until(pilot, lambda: pane.view.marked is not None)
        assert pane.message == "failure at line 151: j for the next one"
        await pilot.press("f")  # no longer the follow key
        assert not pane.view.following
        await pilot.press("g")
        assert pane.view.following
        app.set_keymap({})  # back to the defaults: the hints follow at once
        await pilot.pause()
        assert "f/end follow" in _status(pane) and "g follow" not in _status(pane)


@pytest.mark.parametrize("size", [(80, 24), (160, 48)])
async def test_logs_status_shows_every_part_whole(fixed_config, size: tuple[int, int]) -> None:  # type: ignore[no-untyped-def]
    """No hint or counter is cut: at 80 columns the status flows onto more lines, each within the width;
    the log view keeps most of the screen."""
    app = CockpitApp(fixed_config, connect=False)
    async with app.run_test(size=size) as pilot:
        app.action_show_pane("logs")
        await pilot.pause()
        pane = app.query_one(LogsPane)
        _feed(pane)
        await pilot.press("slash", *"step 1", "enter")
        await pilot.pause()
        status = pane.query_one("#logs-status", StatusLine)
        lines = status.text.plain.splitlines()
        for part in (*pane.hint_parts(), *[p for parts, _ in pane.status_rows()[:2] for p in parts]):
            assert any(part.plain in line for line in lines), part.plain
        assert all(len(line) <= status.content_size.width for line in lines)
        assert status.size.height == len(lines)
        assert pane.view.size.height >= size[1] // 2 - 1


async def test_a_theme_switch_recolours_the_log_rows(fixed_config) -> None:  # type: ignore[no-untyped-def]
    app = CockpitApp(fixed_config, connect=False)
    async with app.run_test(size=(120, 30)) as pilot:
        app.action_show_pane("logs")
        await pilot.pause()
        pane = app.query_one(LogsPane)
        _feed(pane, failure_at=299)
        await pilot.pause()

        def rank_and_failure() -> tuple[Style, Style]:
            strip = pane.view.line_strip(299)
            segments = list(strip)
            return segments[0].style, segments[-1].style  # type: ignore[return-value]

        dark = rank_and_failure()
        assert dark == (app.console.get_style("rank.0"), app.console.get_style("fail"))
        app.theme = "cockpit-light"
        await pilot.pause()
        light = rank_and_failure()
        assert light == (app.console.get_style("rank.0"), app.console.get_style("fail"))
        assert light[0].color != dark[0].color and light[1].color != dark[1].color


async def test_chat_hints_and_messages_show_remapped_keys(fixed_config) -> None:  # type: ignore[no-untyped-def]
    app = CockpitApp(fixed_config, connect=False)
    async with app.run_test(size=(80, 24)) as pilot:
        app.set_keymap({"chat.stop": "f9", "chat.smoke": "f10"})
        app.action_show_pane("chat")
        await pilot.pause()
        pane = app.query_one(ChatPane)
        keys = pane.query_one("#chat-keys", StatusLine).text.plain
        assert "f9 stop" in keys and "f10 smoke test" in keys and "esc stop" not in keys
        assert "^t thinking" in keys and "^o load" in keys  # at 80 columns too: every hint, whole
        assert all(len(line) <= pane.query_one("#chat-keys").content_size.width for line in keys.splitlines())
        pane._streaming = True  # an answer in flight: a second message is refused, naming the stop key
        pane.send("hello")
        await pilot.pause()
        notice = str(list(pane.query("Notice"))[-1].render())
        assert "an answer is still streaming: f9 stops it" in notice
        pane._streaming = False


async def test_chat_esc_leaves_the_input_when_nothing_runs_and_i_types_again(fixed_config) -> None:  # type: ignore[no-untyped-def]
    """Typing keeps every key (pane digits too); Esc with nothing to stop gives the keys to the transcript,
    where the app's keys work again; `i`, or showing the pane again, types again (`i` is a letter while
    typing), after the draft: focusing the line selected it, so the next key replaced it."""
    from textual.widgets import Input, TabbedContent

    from cockpit.tui.widgets.transcript import Transcript

    app = CockpitApp(fixed_config, connect=False)
    async with app.run_test(size=(80, 24)) as pilot:
        app.action_show_pane("chat")
        await pilot.pause()
        pane = app.query_one(ChatPane)
        field = pane.query_one("#chat-input", Input)
        assert field.has_focus
        tabs = app.query_one(TabbedContent)
        await pilot.press("i", "2")
        assert field.value == "i2" and tabs.active == "chat", "typing keeps every key"
        assert "esc stop/leave input · i type" in pane.query_one("#chat-keys", StatusLine).text.plain
        await pilot.press("escape")
        assert isinstance(app.focused, Transcript), app.focused
        assert field.value == "i2", "leaving the input keeps what was typed"
        await pilot.press("1")              # a pane key again
        await pilot.pause()
        assert tabs.active != "chat"
        app.action_show_pane("chat")
        await pilot.pause()
        assert field.has_focus, "shown again, the pane types at once"
        await pilot.press("x")
        assert field.value == "i2x", "the draft is kept: a key adds to it, not replaces it"
        await pilot.press("escape")
        assert isinstance(app.focused, Transcript)
        await pilot.press("i")
        assert field.has_focus and field.value == "i2x"
        await pilot.press("y")
        assert field.value == "i2xy"


async def test_a_smoke_test_that_fails_with_an_error_ends_its_turn(fixed_config, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """The worker's error is the app's to show (notification, the pane's error line); the turn says
    FAILED instead of "running…" forever, and the app keeps running (the worker runs with
    exit_on_error=False)."""
    import cockpit.tui.panes.chat as chat

    async def broken(_endpoint: object) -> AsyncIterator[SmokeStep]:
        yield SmokeStep("health", True, "200", 0.01)
        raise RuntimeError("the smoke runner broke")

    monkeypatch.setattr(chat, "smoke_through", broken)
    app = CockpitApp(fixed_config, connect=False)
    async with app.run_test(size=(120, 30)) as pilot:
        app.action_show_pane("chat")
        await pilot.pause()
        pane = app.query_one(ChatPane)
        await pilot.press("ctrl+g")
        await _until(pilot, lambda: bool(app.query(SmokeTurn)) and app.query_one(SmokeTurn).done)
        turn = app.query_one(SmokeTurn)
        shown = str(turn.render())
        assert "FAILED" in shown and "PASS health" in shown and "error line" in shown
        await _until(pilot, lambda: pane.worker_error is not None)
        assert "smoke test failed: RuntimeError: the smoke runner broke" in pane.worker_error.plain  # type: ignore[union-attr]
        assert "the smoke runner broke" not in shown  # shown once: on the error line, not in the turn too
        notes = [n.message for n in app._notifications]
        assert sum("the smoke runner broke" in n for n in notes) == 1
        assert app.is_running and pane._smoke is turn


async def test_logs_save_asks_for_the_path_and_before_overwriting(fixed_config, tmp_path) -> None:  # type: ignore[no-untyped-def]
    """`s` asks for a file (the shared path prompt); an existing file is kept unless the one overwrite
    dialog is answered yes."""
    from textual.widgets import Input

    from cockpit.tui.dialogs import ConfirmOverwrite, PathPrompt

    target = tmp_path / "kept.log"
    target.write_text("old\n")
    app = CockpitApp(fixed_config, connect=False)
    async with app.run_test(size=(120, 30)) as pilot:
        app.action_show_pane("logs")
        await pilot.pause()
        pane = app.query_one(LogsPane)
        _feed(pane)
        for answer, expect in (("n", "old\n"), ("y", None)):
            await pilot.press("s")
            await pilot.pause()
            assert isinstance(app.screen, PathPrompt)
            app.screen.query_one(Input).value = str(target)
            await pilot.press("enter")
            await pilot.pause()
            assert isinstance(app.screen, ConfirmOverwrite) and str(target) in app.screen.question
            await pilot.press(answer)
            await _until(pilot, lambda: "saved" in pane.message)
            if expect is not None:
                assert pane.message == f"not saved: {target} kept as it was" and target.read_text() == expect
            else:
                assert pane.message == f"saved 300 lines to {target}"
                assert target.read_text().count("\n") == 300


async def test_chat_save_over_a_file_asks_first(fixed_config, tmp_path) -> None:  # type: ignore[no-untyped-def]
    from cockpit.tui.dialogs import ConfirmOverwrite

    target = tmp_path / "chat.json"
    target.write_text("{}")
    app = CockpitApp(fixed_config, connect=False)
    async with app.run_test(size=(120, 30)) as pilot:
        app.action_show_pane("chat")
        await pilot.pause()
        pane = app.query_one(ChatPane)
        pane.session.add_user("hello")
        pane.command(f"/save {target}")
        await pilot.pause()
        assert isinstance(app.screen, ConfirmOverwrite) and "this conversation" in app.screen.question
        await pilot.press("n")
        await pilot.pause()
        assert target.read_text() == "{}"
        assert "kept as it was" in str(list(pane.query("Notice"))[-1].render())
        pane.command(f"/save {target}")
        await pilot.pause()
        await pilot.press("y")
        await pilot.pause()
        assert "hello" in target.read_text()


async def test_the_line_a_jump_shows_stays_a_third_down_when_the_status_grows(fixed_config) -> None:  # type: ignore[no-untyped-def]
    app = CockpitApp(fixed_config, connect=False)
    async with app.run_test(size=(80, 24)) as pilot:
        app.action_show_pane("logs")
        await pilot.pause()
        pane = app.query_one(LogsPane)
        _feed(pane, failure_at=150)
        await pilot.press("e")
        await _until(pilot, lambda: pane.view.marked is not None)
        view = pane.view
        # the status line's new message may change the view's height once more: the jump is placed again
        await _until(pilot, lambda: 150 - view.top_index == view.size.height // 3, tries=500)
        before = view.size.height
        pane._set_message("a long message " * 12)  # the status line needs more lines: the view shrinks
        await _until(pilot, lambda: view.size.height < before, tries=500)   # the layout settles (loaded box)
        await pilot.pause()
        assert view.size.height < before and 150 - view.top_index == view.size.height // 3
        await pilot.press("up")  # the operator scrolls: the view is theirs, no more re-placing
        await pilot.pause()
        top, shrunk = view.top_index, view.size.height
        assert top == 150 - shrunk // 3 - 1
        pane._set_message("")
        await _until(pilot, lambda: view.size.height > shrunk, tries=500)
        await pilot.pause()
        assert view.size.height > shrunk and view.top_index == top
