"""The dialogs keep their keys on screen: a confirm with many host commands at 80×24 scrolls the commands,
never the line that says how to run or cancel them."""

from __future__ import annotations

from cockpit.tui.app import CockpitApp
from cockpit.tui.dialogs import ConfirmCommands, ConfirmOverwrite


async def test_a_long_command_list_leaves_the_keys_visible_at_80x24(fixed_config) -> None:
    app = CockpitApp(fixed_config, connect=False)
    commands = [(f"rank {r % 4} — step {r}", f"hf download repo --include 'file-{r}/*' --local-dir d")
                for r in range(30)]
    async with app.run_test(size=(80, 24)) as pilot:
        app.push_screen(ConfirmCommands("Run these?", commands, note="a note", override_label="override it"))
        await pilot.pause()
        keys = app.screen.query_one("#confirm-keys")
        region = keys.region
        assert region.height >= 1 and region.bottom <= 24, region
        assert "cancel" in str(keys.render())
        await pilot.press("y")              # refused until the override is ticked
        await pilot.pause()
        assert isinstance(app.screen, ConfirmCommands)
        await pilot.press("o", "y")
        await pilot.pause()
        assert not isinstance(app.screen, ConfirmCommands)


async def test_the_overwrite_dialog_names_the_file_and_its_keys(fixed_config) -> None:
    app = CockpitApp(fixed_config, connect=False)
    answers: list[bool | None] = []
    async with app.run_test(size=(80, 24)) as pilot:
        app.push_screen(ConfirmOverwrite("/tmp/x.log", "this view"), answers.append)
        await pilot.pause()
        text = " ".join(str(s.render()) for s in app.screen.query("Static"))
        assert "/tmp/x.log exists. Overwrite it with this view?" in text
        assert "y overwrite it" in text and "esc/n keep it" in text
        await pilot.press("n")
        await pilot.pause()
    assert answers == [False]
