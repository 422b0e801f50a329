"""Pane switching: number keys, F-keys while typing, and focus landing where the operator types."""

from __future__ import annotations

from textual.widgets import Input, TabbedContent

from cockpit.tui.app import CockpitApp


async def test_chat_gets_the_keyboard_and_fkey_leaves(fixed_config) -> None:
    app = CockpitApp(fixed_config, connect=False)
    async with app.run_test(size=(140, 40)) as pilot:
        tabs = app.query_one(TabbedContent)
        assert tabs.active == "hosts"
        await pilot.press("6")
        await pilot.pause(0.2)
        assert tabs.active == "chat"
        assert isinstance(app.focused, Input) and app.focused.id == "chat-input"
        await pilot.press("1", "0")  # typed into the message line, not pane keys
        await pilot.pause(0.2)
        assert tabs.active == "chat" and app.focused.value == "10"
        await pilot.press("f2")
        await pilot.pause(0.2)
        assert tabs.active == "preflight"
        await pilot.press("1")
        await pilot.pause(0.2)
        assert tabs.active == "hosts"


async def test_quit_during_a_setup_job_asks_first_and_quits_at_once_otherwise(fixed_config) -> None:
    from cockpit.tui.dialogs import Confirm
    from cockpit.tui.panes.setup import SetupPane

    app = CockpitApp(fixed_config, connect=False)
    async with app.run_test(size=(140, 40)) as pilot:
        app.query_one(SetupPane).running = True        # a job in progress (its remote commands would stop)
        await pilot.press("q")
        await pilot.pause(0.2)
        assert isinstance(app.screen, Confirm) and "setup job" in app.screen.question
        await pilot.press("n")
        await pilot.pause(0.2)
        assert app.is_running and not isinstance(app.screen, Confirm)
        app.query_one(SetupPane).running = False
        await pilot.press("q")
        await pilot.pause(0.2)
        assert not app.is_running
