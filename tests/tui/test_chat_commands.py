"""The Chat pane's slash commands are one table: /help and the refusal of an unknown command are made from
it, every name and alias in it runs its handler, and nothing outside it is taken."""

from __future__ import annotations

import json
from pathlib import Path

from cockpit.tui.app import CockpitApp
from cockpit.tui.panes.chat import BY_NAME, COMMANDS, HELP, HELP_TABLE, ChatPane
from cockpit.tui.widgets.chat_turns import Notice


def _notices(app: CockpitApp) -> list[str]:
    return [str(n.render()) for n in app.query(Notice)]


def test_the_help_is_made_from_the_table() -> None:
    names = [c.name for c in COMMANDS]
    assert len(set(names)) == len(names)
    assert set(BY_NAME) == {n for c in COMMANDS for n in (c.name, *c.aliases)}
    for c in COMMANDS:
        assert c.usage in HELP_TABLE and c.help in HELP_TABLE
        assert c.name == "/help" or c.usage in HELP
    assert "/effort low|high|xhigh|max" in HELP and "/temp T" in HELP


async def test_commands_run_from_the_table_and_others_are_refused(fixed_config, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    app = CockpitApp(fixed_config, connect=False, api_url="http://127.0.0.1:9")
    async with app.run_test(size=(130, 35)) as pilot:
        await pilot.pause()
        app.action_show_pane("chat")
        pane = app.query_one(ChatPane)
        s = pane.session.settings
        pane.command("/temperature 0.25")                   # an alias
        pane.command("/top_p 0.5")
        pane.command("/max 64")
        pane.command("/effort xhigh")
        pane.command("/think off")
        assert (s.temperature, s.top_p, s.max_tokens, s.reasoning_effort, s.thinking) == (
            0.25, 0.5, 64, "xhigh", False)
        pane.command("/help")
        await pilot.pause()
        assert _notices(app)[-1] == HELP_TABLE
        pane.command("/frobnicate 3")
        await pilot.pause()
        assert _notices(app)[-1] == f"unknown command /frobnicate ({HELP})"
        pane.command("/effort extreme")
        await pilot.pause()
        assert _notices(app)[-1].startswith("effort must be one of low, high")
        pane.command(f"/save {tmp_path / 'chat.json'}")
        await pilot.pause()
        assert json.loads((tmp_path / "chat.json").read_text()) is not None
