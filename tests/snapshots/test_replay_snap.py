"""Snapshots of a replay (`r37-cockpit replay`): the header with the replay clock, the recorded verdict
and alert, and the Stats pane as the recording stood then (rank 2's SM clock latched at 820 MHz), at
160x48 and 80x24. The recording is made by the real recorder (tests/replayscene.py)."""

from __future__ import annotations

import pytest
from replayscene import ALERT_AT, HUNG_AT, T0, record_launch, record_scene

from cockpit.recipe.recording import path_for
from cockpit.recipe.replay import Replay, ReplayClock
from cockpit.tui.replay_app import ReplayApp


@pytest.mark.parametrize("size", [(160, 48), (80, 24)])
def test_replay_header_and_stats(snap_compare, fixed_config, size: tuple[int, int]) -> None:  # type: ignore[no-untyped-def]
    path = record_scene(fixed_config, path_for(fixed_config))
    replay = Replay(path, list(fixed_config.ranks), 1.0, fixed_config.cluster.name)
    app = ReplayApp(fixed_config, None, replay, ReplayClock(replay.start, replay.end, T0 + ALERT_AT + 5,
                                                            speed=2.0, paused=True))

    async def before(pilot) -> None:  # type: ignore[no-untyped-def]
        app.action_show_pane("stats")
        await pilot.pause()
        app.replay_tick(force=True)
        await pilot.pause()

    assert snap_compare(app, terminal_size=size, run_before=before)


@pytest.mark.parametrize("at", [24, HUNG_AT + 4])
def test_replay_launch_timeline_and_header(snap_compare, fixed_config, at: int) -> None:  # type: ignore[no-untyped-def]
    """The Launch pane and the header on a recorded launch (tests/replayscene.py `record_launch`): at T0+24
    the ranks booting (launching, API not ready); at T0+94 every rank ready, the engine HUNG (API ready) and
    the "which rank is stuck" block naming rank 2."""
    path = path_for(fixed_config)
    record_launch(fixed_config, path)
    replay = Replay(path, list(fixed_config.ranks), 1.0, fixed_config.cluster.name)
    app = ReplayApp(fixed_config, None, replay, ReplayClock(replay.start, replay.end, T0 + at, paused=True))

    async def before(pilot) -> None:  # type: ignore[no-untyped-def]
        app.action_show_pane("launch")
        await pilot.pause()
        app.replay_tick(force=True)
        await pilot.pause()

    assert snap_compare(app, terminal_size=(160, 48), run_before=before)
