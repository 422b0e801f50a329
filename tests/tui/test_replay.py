"""`r37-cockpit replay`: the TUI on a recording made by the real recorder (tests/replayscene.py). At a
replay time the header shows the verdict and alerts recorded by then and the Stats pane the figures
recorded by then; moving the clock changes both; the fleet is never started (no SSH connection); panes
with nothing recorded say so; the clock pauses, moves, goes to a typed time and changes speed."""

from __future__ import annotations

import io
from collections.abc import Callable
from pathlib import Path

from replayscene import (
    ALERT_AT,
    CLEARED_AT,
    DOWN_AT,
    END,
    HUNG_AT,
    READY_AT,
    STOPPED_AT,
    T0,
    record_launch,
    record_scene,
)
from rich.console import Console
from textual.widgets import Static

from cockpit.config import ClusterConfig
from cockpit.recipe.recording import path_for
from cockpit.recipe.replay import NOT_RECORDED, Replay, ReplayClock, alerts_at, stamp
from cockpit.tui.dialogs import EventsScreen
from cockpit.tui.dialogs.prompt import PathPrompt
from cockpit.tui.header import ClusterHeader
from cockpit.tui.panes.launch import LaunchPane
from cockpit.tui.panes.stats import StatsPane
from cockpit.tui.replay_app import LAUNCH_NOT_RECORDED, ReplayApp
from cockpit.tui.widgets.stuck_view import StuckView
from cockpit.tui.widgets.timeline import TimelineView

SIZE = (160, 48)


def replay_app(config: ClusterConfig, at: float, scene: Callable[..., object] = record_scene) -> ReplayApp:
    path = path_for(config)
    scene(config, path)
    replay = Replay(path, list(config.ranks), 1.0, config.cluster.name)
    return ReplayApp(config, None, replay, ReplayClock(replay.start, replay.end, at, paused=True))


def no_connection(app: ReplayApp) -> bool:
    """No host of the fleet was ever started (a started host runs its SSH supervisor task)."""
    return all(host._task is None for host in app.fleet.hosts.values())


def header(app: ReplayApp) -> str:
    return app.query_one(ClusterHeader).render().plain


def stats_text(app: ReplayApp) -> str:
    """What the Stats pane's rank table, alerts and engine figures show, as plain text."""
    pane = app.query_one(StatsPane)
    console = Console(width=400, record=True, file=io.StringIO())
    for selector in ("#stats-ranks", "#stats-alerts", "#stats-engine"):
        console.print(pane.query_one(selector, Static).content)
    return console.export_text()


def test_the_replay_rebuilds_the_recorded_models(fixed_config: ClusterConfig, tmp_path: Path) -> None:
    path = record_scene(fixed_config, tmp_path / "r.sqlite3")
    replay = Replay(path, list(fixed_config.ranks), 1.0)
    assert (replay.start, replay.end) == (T0, T0 + END)
    before = replay.state_at(T0 + READY_AT - 1)
    assert before.verdict.state == "unknown" and before.stats.alerts == ()
    ready = replay.state_at(T0 + READY_AT + 20)
    assert ready.verdict.state == "ready" and ready.stats.alerts == ()
    assert ready.stats.ranks[2].gpu is not None and ready.stats.ranks[2].gpu.sm == 2405
    assert len(ready.stats.history[2].times) == READY_AT + 21       # every point recorded by then
    alerted = replay.state_at(T0 + ALERT_AT + 5)
    assert [(a.kind, a.rank, a.since) for a in alerted.stats.alerts] == [("clock-latched", 2, T0 + ALERT_AT)]
    assert alerted.stats.ranks[2].gpu is not None and alerted.stats.ranks[2].gpu.sm == 820
    assert alerted.stats.engine is not None and alerted.stats.engine.generation_tokens_per_s == 50.6
    down = replay.state_at(T0 + DOWN_AT)
    assert (down.verdict.state, down.verdict.first_failed) == ("down", 2) and down.stats.alerts
    assert replay.state_at(T0 + CLEARED_AT).stats.alerts == ()
    # a new recording session raises again what is still active: alerts do not leak across sessions
    assert alerts_at([e for e in alerted.events] + [e for e in replay.events if e.kind == "recorder"
                                                    and e.summary.startswith("recording begins")]) == ()


def test_the_clock_pauses_moves_stops_at_the_end_and_changes_speed() -> None:
    wall = [100.0]
    clock = ReplayClock(T0, T0 + END, T0 + 10, wall=lambda: wall[0])
    wall[0] += 5
    assert clock.now() == T0 + 15
    assert clock.toggle() is True
    wall[0] += 50
    assert clock.now() == T0 + 15 and clock.label().endswith("×1 ⏸")
    assert clock.move(-60) == T0 and clock.move(600) == T0 + END
    assert clock.faster() == 2.0 and clock.faster(-2) == 0.5
    clock.toggle()                                   # paused at the end: runs again from the start
    assert clock.now() == T0 and not clock.paused
    wall[0] += 1000
    assert clock.now() == T0 + END and clock.paused   # reaching the end pauses
    assert clock.label(compact=True) == f"REPLAY {stamp(T0 + END)[11:]} ×0.5 ⏸"


async def test_replay_at_shows_the_recorded_verdict_and_alert(fixed_config: ClusterConfig) -> None:
    app = replay_app(fixed_config, T0 + ALERT_AT - 15)
    async with app.run_test(size=SIZE) as pilot:
        app.action_show_pane("stats")
        await pilot.pause()
        assert app.ctx.read_only and no_connection(app)
        line = header(app)
        assert f"REPLAY {stamp(T0 + ALERT_AT - 15)} ×1 ⏸" in line and "READY" in line
        assert "alert" not in line and "connected" not in line
        assert "2405" in stats_text(app) and "820" not in stats_text(app)
        for _ in range(2):                           # → +20 s: the alert is raised, rank 2 latched
            await pilot.press("right")
        await pilot.pause()
        assert app.clock.at == T0 + ALERT_AT + 5
        line = header(app)
        assert "READY" in line and "⚠ 1 alert" in line
        assert "820" in stats_text(app) and "clock-latched" in stats_text(app)
        await pilot.press("shift+right")             # +1 min (past the end: the end): down, cleared
        await pilot.pause()
        assert app.clock.at == T0 + END
        line = header(app)
        assert "cluster DOWN: rank 2 failed" in line and "alert" not in line
        await pilot.press("shift+left", "left")      # back again
        await pilot.pause()
        assert app.clock.at == T0 + END - 70 and "DOWN" not in header(app) and "READY" in header(app)
        assert no_connection(app)                    # no SSH connection was ever opened


async def test_keys_pause_speed_go_to_and_events_up_to_then(fixed_config: ClusterConfig) -> None:
    app = replay_app(fixed_config, T0)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        await pilot.press("plus", "plus")
        assert app.clock.speed == 5.0 and "×5 ⏸" in header(app)
        await pilot.press("minus")
        assert app.clock.speed == 2.0
        await pilot.press("space")
        assert not app.clock.paused
        await pilot.press("space")
        assert app.clock.paused and "⏸" in header(app)
        await pilot.press("g")
        await pilot.pause()
        assert isinstance(app.screen, PathPrompt)
        prompt = app.screen.query_one("#prompt-path")
        prompt.value = stamp(T0 + 9999)              # type: ignore[attr-defined]
        await pilot.press("enter")                   # outside the recording: said, the clock stays
        await pilot.pause()
        assert app.clock.at < T0 + 10
        await pilot.press("g")
        await pilot.pause()
        field = app.screen.query_one("#prompt-path")
        field.value = ""                              # type: ignore[attr-defined]
        # typed: space, minus and ← are the field's in the dialog, not the replay clock's
        keys = {" ": "space", "-": "minus", ":": "colon"}
        await pilot.press(*[keys.get(c, c) for c in stamp(T0 + DOWN_AT)])
        assert field.value == stamp(T0 + DOWN_AT) and app.clock.paused and app.clock.speed == 2.0  # type: ignore[attr-defined]
        await pilot.press("left")
        assert app.clock.at < T0 + 10
        await pilot.press("enter")
        await pilot.pause()
        assert app.clock.at == T0 + DOWN_AT and "cluster DOWN" in header(app)
        await pilot.press("E")
        await pilot.pause()
        screen = app.screen
        assert isinstance(screen, EventsScreen)
        await pilot.pause()
        assert screen.events and max(e.t for e in screen.events) <= T0 + DOWN_AT
        assert not any(e.kind == "alert-cleared" for e in screen.events)


def launch_text(app: ReplayApp) -> str:
    """What the Launch pane shows (verdict, timeline, stuck block, failure, note), as plain text."""
    pane = app.query_one(LaunchPane)
    console = Console(width=400, record=True, file=io.StringIO())
    for widget in (pane.query_one("#launch-verdict", Static), pane.query_one(TimelineView),
                   pane.query_one(StuckView), pane.query_one("#launch-commands", Static)):
        console.print(widget.render() if isinstance(widget, StuckView) else widget.content)
    return console.export_text()


async def test_unrecorded_panes_say_so(fixed_config: ClusterConfig) -> None:
    app = replay_app(fixed_config, T0 + DOWN_AT)
    async with app.run_test(size=SIZE) as pilot:
        for pid in ("logs", "chat", "bench", "setup", "hosts", "preflight", "commands"):
            app.action_show_pane(pid)
            await pilot.pause()
            assert NOT_RECORDED in str(app.pane(pid).query_one("#not-recorded").render())
        app.action_show_pane("launch")
        await pilot.pause()
        shown = launch_text(app)           # nothing of the launch recorded: every rank unknown, not pending
        assert "cluster: rank 2 failed first: NCCL error" in shown
        assert shown.count("UNKNOWN: not in the recording before this time") == 4 and "pending" not in shown


async def test_the_launch_pane_and_header_redraw_the_recorded_launch(fixed_config: ClusterConfig) -> None:
    """The Launch pane draws the per-rank timeline as the live model stood at the replay time, and the
    header its verdict and API line; moving the clock redraws both; no host is read."""
    app = replay_app(fixed_config, T0 + 24, record_launch)
    async with app.run_test(size=SIZE) as pilot:
        app.action_show_pane("launch")
        await pilot.pause()
        shown = launch_text(app)
        assert shown.startswith("cluster: launching: 4/4 ranks started")
        assert LAUNCH_NOT_RECORDED.split(".")[0] in shown
        rows: dict[str, str] = {}
        for line in shown.splitlines():          # the bars' rows (the phase table's come after)
            if line[:1].isdigit():
                rows.setdefault(line.split()[0], line)
        assert "loading weights" in rows["3"] and "distributed init" in rows["0"]
        assert "launching  │  API not ready" in header(app)
        for key in ("d", "r", "k", "l", "s"):          # no dry run, look again, stacks, launch or stop
            assert app.screen.active_bindings.get(key) is None or not app.screen.active_bindings[key].enabled
        await pilot.press("shift+right")                # T0+84: READY, the engine serving
        await pilot.pause()
        assert "READY ✔  │  API ready · serving" in header(app)
        assert launch_text(app).count("✔") >= 4 and "which rank is stuck" not in launch_text(app)
        assert launch_text(app).startswith("cluster READY: ")     # not "cluster: cluster READY: …"
        await pilot.press("left", "right", "right")     # T0+94: hung
        await pilot.pause()
        assert app.clock.at == T0 + HUNG_AT + 4
        assert "engine HUNG  │  API ready" in header(app)
        shown = launch_text(app)
        assert "which rank is stuck: rank 2 idle" in shown
        await pilot.press("right", "right")             # T0+114: stopped
        await pilot.pause()
        assert app.clock.at >= T0 + STOPPED_AT
        assert "stopped" in header(app) and "API" not in header(app)
        assert launch_text(app).count("stopped") >= 4 and no_connection(app)


async def test_the_command_line_at_opens_the_replay_there(fixed_config: ClusterConfig) -> None:
    """`replay --cluster NAME --at T --paused` (its arguments as the command line parses them): the header
    shows T, the verdict and the alert recorded by then."""
    from cockpit.cli import _choose_config, build_parser
    from cockpit.cli.replay_cmd import open_replay

    record_scene(fixed_config, path_for(fixed_config))
    fixture = Path(__file__).resolve().parents[1] / "fixtures" / "cluster.toml"
    args = build_parser(["replay"]).parse_args(["--config", str(fixture), "replay", "--cluster", "r37-test",
                                                "--at", stamp(T0 + ALERT_AT + 5), "--paused", "--speed", "5"])
    _choose_config(args)
    config_path, config, replay, clock = open_replay(args)
    app = ReplayApp(config, config_path, replay, clock)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        line = header(app)
        assert f"REPLAY {stamp(T0 + ALERT_AT + 5)} ×5 ⏸" in line
        assert "READY" in line and "⚠ 1 alert" in line and no_connection(app)
