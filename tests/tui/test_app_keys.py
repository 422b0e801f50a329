"""Pane switching: number keys, F-keys while typing, and focus landing where the operator types."""

from __future__ import annotations

from textual.widgets import Input, TabbedContent

from cockpit.tui.app import CockpitApp


async def test_chat_gets_the_keyboard_and_fkey_leaves(fixed_config) -> None:
    app = CockpitApp(fixed_config, connect=False)
    async with app.run_test(size=(140, 40)) as pilot:
        tabs = app.query_one(TabbedContent)
        assert tabs.active == "hosts"
        await pilot.press("7")
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


async def test_a_running_benchmark_asks_before_quit_and_greys_its_start_key(fixed_config) -> None:
    """The app asks every pane what quitting would cut short (the bench was not asked before)."""
    from cockpit.tui.dialogs import Confirm
    from cockpit.tui.panes.bench import BenchPane

    app = CockpitApp(fixed_config, connect=False)
    async with app.run_test(size=(140, 40)) as pilot:
        bench = app.query_one(BenchPane)
        bench.phase = "running"
        assert bench.check_action("start", ()) is False and bench.check_action("cancel", ()) is True
        await pilot.press("q")
        await pilot.pause(0.2)
        assert isinstance(app.screen, Confirm) and "benchmark is running" in app.screen.question
        await pilot.press("n")
        await pilot.pause(0.2)
        assert app.is_running
        bench.phase = "finished"
        assert app.busy() == ""


async def test_a_launch_in_progress_greys_the_launch_keys_in_the_footer(fixed_config) -> None:
    from textual.widgets import Footer

    from cockpit.tui.panes.launch import LaunchPane

    app = CockpitApp(fixed_config, connect=False)
    async with app.run_test(size=(160, 40)) as pilot:
        await pilot.press("4")
        await pilot.pause(0.2)
        pane = app.query_one(LaunchPane)
        assert pane.check_action("launch", ()) is not None
        pane.launching = True
        await pilot.pause(0.2)
        assert pane.check_action("launch", ()) is None and pane.check_action("relaunch", ()) is None
        assert "launch is in progress" in app.busy()
        footer_keys = {k.action: k.has_class("-disabled") for k in app.query_one(Footer).query("FooterKey")}
        assert footer_keys.get("launch") is True and footer_keys.get("stop") is False


async def test_number_keys_follow_the_panes_that_exist(fixed_config) -> None:
    from cockpit.tui.app import PANES

    app = CockpitApp(fixed_config, connect=False)
    async with app.run_test(size=(140, 40)) as pilot:
        tabs = app.query_one(TabbedContent)
        for number, (pid, cls) in enumerate(PANES, start=1):
            if pid == "chat":
                continue          # the chat line takes digits; F-keys leave it (tested above)
            await pilot.press(str(number))
            await pilot.pause()
            assert tabs.active == pid
            label = str(tabs.get_tab(pid).label)
            assert label == f"{number} {cls.TITLE}"
        await pilot.press("1", str(len(PANES) + 1))      # no pane there: nothing happens
        await pilot.pause()
        assert tabs.active == "hosts"


def _keymap_rows(app: CockpitApp) -> dict[str, list[tuple[str, str, str]]]:
    from textual.widgets import DataTable

    table = app.screen.query_one("#keymap-table", DataTable)
    sections: dict[str, list[tuple[str, str, str]]] = {}
    current = ""
    for row in range(table.row_count):
        key, action, ident = (str(c) for c in table.get_row_at(row))
        if not action and not ident:
            current = key
            sections[current] = []
        else:
            sections[current].append((key, action, ident))
    return sections


async def test_the_key_map_shows_the_shown_panes_keys_and_a_remapped_key(fixed_config) -> None:
    from cockpit.tui.dialogs import KeyMapScreen
    from cockpit.tui.panes.launch import LaunchPane

    app = CockpitApp(fixed_config, connect=False)
    async with app.run_test(size=(140, 40)) as pilot:
        app.set_keymap({"launch.dry_run": "D", "app.keys": "f12"})
        await pilot.press("4")
        await pilot.pause()
        await pilot.press("f12")
        await pilot.pause()
        assert isinstance(app.screen, KeyMapScreen)
        sections = _keymap_rows(app)
        assert list(sections) == ["Launch pane", "App (every pane)"]
        launch = {ident: key for key, _a, ident in sections["Launch pane"]}
        assert launch["launch.dry_run"] == "D" and launch["launch.start"] == "l"
        app_keys = {ident: key for key, _a, ident in sections["App (every pane)"]}
        assert app_keys["app.keys"] == "f12" and app_keys["app.quit"] == "q" and app_keys["pane.chat"] == "7"
        await pilot.press("escape")
        await pilot.pause()
        pane = app.query_one(LaunchPane)
        assert pane.key_for("dry_run") == "D"
        assert "D dry run" in pane.key_hints(("dry_run", "launch")).plain


async def test_the_palette_offers_every_pane_action_and_runs_its_handler(fixed_config) -> None:
    from cockpit.tui.app import PANES
    from cockpit.tui.panes.logs import LogsPane

    app = CockpitApp(fixed_config, connect=False)
    async with app.run_test(size=(140, 40)) as pilot:
        commands = {c.title: c for c in app.get_system_commands(app.screen)}
        for pid, cls in PANES:
            pane = app.query_one(f"#{pid}-pane", cls)
            for binding, _key in pane.bindings():
                assert f"{cls.TITLE}: {binding.description}" in commands, binding
        for title in ("Preflight: Run all", "Launch: Launch", "Launch: Stop", "Chat: Smoke test",
                      "Logs: Save view"):
            assert title in commands
        logs = app.query_one(LogsPane)
        before = logs.view.show_timestamps
        await commands["Logs: Timestamps"].callback()
        await pilot.pause()
        tabs = app.query_one(TabbedContent)
        assert tabs.active == "logs" and logs.view.show_timestamps is not before


async def test_read_only_keeps_host_changing_actions_out_of_the_palette(fixed_config) -> None:
    app = CockpitApp(fixed_config, connect=False, read_only=True)
    async with app.run_test(size=(140, 40)) as pilot:
        await pilot.pause()
        titles = {c.title for c in app.get_system_commands(app.screen)}
        assert "Launch: Dry run" in titles
        assert not {"Launch: Launch", "Launch: Stop", "Launch: Relaunch"} & titles


async def test_a_worker_error_is_shown_with_its_pane_and_remedy_and_the_app_stays(fixed_config) -> None:
    from cockpit.tui.panes.hosts import HostsPane

    app = CockpitApp(fixed_config, connect=False)

    async def boom() -> None:
        raise RuntimeError("the sampler fell over")

    async def fine() -> None:
        return None

    async with app.run_test(size=(140, 40)) as pilot:
        pane = app.query_one(HostsPane)
        pane.run_worker(boom(), name="probe_hosts", exit_on_error=False)
        for _ in range(20):
            await pilot.pause(0.05)
            if pane.worker_error is not None:
                break
        assert app.is_running
        line = str(pane.query_one("#pane-error").render())
        assert "probe hosts failed: RuntimeError: the sampler fell over" in line and "remedy:" in line
        assert "r37-cockpit hosts" in line
        notes = [(n.title, n.message) for n in app._notifications]
        assert any(t == "Hosts: probe hosts failed" and "the sampler fell over" in m for t, m in notes), notes
        pane.run_worker(fine(), name="again", exit_on_error=False)
        await pilot.pause(0.2)
        assert pane.worker_error is None and not pane.query_one("#pane-error").has_class("shown")
