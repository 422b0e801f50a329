"""Read-only mode in the TUI: every host-changing action of `cockpit.recipe.readonly` is off its key and
out of the palette (and nothing else is), and the header shows the badge; `[ui] read_only` alone does it."""

from __future__ import annotations

import pytest
from textual.actions import parse as parse_action

from cockpit.config import ClusterConfig
from cockpit.recipe.readonly import HOST_CHANGES, action_change
from cockpit.tui.app import PANES, CockpitApp
from cockpit.tui.header import ClusterHeader, health_line

SIZE = (160, 40)
ACTIONS = [a for change in HOST_CHANGES for a in change.actions]
NUMBER = {pid: str(n) for n, (pid, _cls) in enumerate(PANES, start=1)}


def key_of(app: CockpitApp, pane_id: str, action: str) -> str:
    return next(b.key.split(",")[0] for b in type(app.pane(pane_id)).BINDINGS
                if parse_action(b.action)[1] == action)


def read_only_config(config: ClusterConfig) -> ClusterConfig:
    return config.model_copy(update={"ui": config.ui.model_copy(update={"read_only": True})})


def test_the_list_names_setup_launch_relaunch_and_stop() -> None:
    assert set(ACTIONS) >= {"setup.start", "setup.resume", "launch.launch", "launch.relaunch", "launch.stop"}
    assert action_change("launch", "dry_run") is None and action_change("launch", "status") is None


async def test_panes_hide_exactly_what_the_list_names(fixed_config: ClusterConfig) -> None:
    """Every binding of every pane: read-only hides it (beyond what a normal cockpit hides for its own
    reasons) if and only if the one list says it changes a host; a normal cockpit offers each of those."""
    allowed: dict[bool, dict[tuple[str, str], bool]] = {}
    for read_only in (False, True):
        app = CockpitApp(fixed_config, connect=False, read_only=read_only)
        async with app.run_test(size=SIZE) as pilot:
            await pilot.pause()
            allowed[read_only] = {}
            for pid, cls in PANES:
                pane = app.pane(pid)
                for binding in cls.BINDINGS:
                    _ns, name, params = parse_action(binding.action)
                    ok = pane.check_action(name, params) is not False
                    allowed[read_only][pid, name] = ok
                    assert app.ctx.allows(pid, name) is (not read_only or action_change(pid, name) is None)
    for (pid, name), normal in allowed[False].items():
        hidden = normal and not allowed[True][pid, name]
        assert hidden is (action_change(pid, name) is not None), (pid, name)
    assert {f"{pid}.{name}" for (pid, name), ok in allowed[False].items() if ok} >= set(ACTIONS)


GREYED_WHEN_IDLE = {("setup", "cancel_all"), ("setup", "cancel_rank")}


@pytest.mark.parametrize("pane_action", ACTIONS)
async def test_the_key_does_nothing_and_the_palette_has_no_entry(fixed_config: ClusterConfig,
                                                                 pane_action: str,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    pid, action = pane_action.split(".")
    cls = dict(PANES)[pid]
    ran: list[str] = []
    monkeypatch.setattr(cls, f"action_{action}", lambda self: ran.append(action))
    for read_only in (False, True):
        ran.clear()
        app = CockpitApp(fixed_config, connect=False, read_only=read_only)
        async with app.run_test(size=SIZE) as pilot:
            await pilot.press(NUMBER[pid])
            await pilot.pause()
            if (pid, action) in GREYED_WHEN_IDLE:
                app.query_one(cls).running = True       # a job to cancel: the key is not greyed out
            await pilot.press(key_of(app, pid, action))
            await pilot.pause()
            titles = {c.title for c in app.get_system_commands(app.screen)}
            entry = next(f"{cls.TITLE}: {b.description}" for b in cls.BINDINGS
                         if parse_action(b.action)[1] == action)
            if read_only:
                assert ran == [], "the key ran the action in read-only mode"
                assert entry not in titles
            else:
                assert ran == [action], "the test's key does not reach the action"   # the test can fail
                assert entry in titles


async def test_the_header_shows_the_badge_full_and_compact(fixed_config: ClusterConfig) -> None:
    for width, badge in ((160, "READ-ONLY"), (80, " RO ")):
        app = CockpitApp(fixed_config, connect=False, read_only=True)
        async with app.run_test(size=(width, 30)) as pilot:
            await pilot.pause()
            line = app.query_one(ClusterHeader).render()
            assert badge in line.plain, line.plain
            start = line.plain.index(badge)
            assert {str(s.style) for s in line.spans if s.start <= start < s.end} >= {"warn", "reverse"}
    plain = CockpitApp(fixed_config, connect=False)
    async with plain.run_test(size=SIZE) as pilot:
        await pilot.pause()
        assert "READ-ONLY" not in plain.query_one(ClusterHeader).render().plain
    assert health_line("c", [], read_only=True).plain.startswith("r37-cockpit  │  cluster c  READ-ONLY ")


async def test_the_config_alone_makes_the_tui_read_only(fixed_config: ClusterConfig) -> None:
    app = CockpitApp(read_only_config(fixed_config), connect=False)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        assert app.ctx.read_only
        assert "READ-ONLY" in app.query_one(ClusterHeader).render().plain
        titles = {c.title for c in app.get_system_commands(app.screen)}
        assert "Launch: Dry run" in titles and "Launch: Stop" not in titles and "Setup: Start" not in titles
