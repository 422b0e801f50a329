"""Every pane in a state that matters, in the dark and the light theme, at 80×24 and at 160×48; and one
pane in the high-contrast theme. Each pane's snapshot module provides `scene(app, pilot)`, which puts the
pane into that state (fed the core's typed events, as the workers would) and shows it."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

import pytest
from test_bench_snap import scene as bench_scene
from test_chat_snap import scene as chat_scene
from test_commands_snap import scene as commands_scene
from test_hosts_snap import scene as hosts_scene
from test_launch_snap import scene as launch_scene
from test_logs_snap import scene as logs_scene
from test_preflight_snap import scene as preflight_scene
from test_setup_snap import scene as setup_scene
from test_stats_snap import scene as stats_scene

from cockpit.tui.app import CockpitApp

SIZES = {"80x24": (80, 24), "160x48": (160, 48)}
THEMES = ("cockpit-dark", "cockpit-light")
Scene = Callable[[CockpitApp, object], Awaitable[None]]
SCENES: dict[str, Scene] = {"hosts": hosts_scene, "preflight": preflight_scene, "setup": setup_scene,
                            "launch": launch_scene, "logs": logs_scene, "stats": stats_scene,
                            "chat": chat_scene, "bench": bench_scene, "commands": commands_scene}


def _run(app: CockpitApp, scene: Scene, theme: str) -> Callable[[object], Awaitable[None]]:
    async def before(pilot) -> None:  # type: ignore[no-untyped-def]
        app.theme = theme
        await scene(app, pilot)
        await pilot.pause()

    return before


@pytest.mark.parametrize("size", sorted(SIZES))
@pytest.mark.parametrize("theme", THEMES)
@pytest.mark.parametrize("pane", sorted(SCENES))
def test_pane(snap_compare, fixed_config, pane: str, theme: str, size: str) -> None:
    app = CockpitApp(fixed_config, connect=False)
    assert snap_compare(app, terminal_size=SIZES[size], run_before=_run(app, SCENES[pane], theme))


def test_high_contrast_hosts(snap_compare, fixed_config) -> None:
    app = CockpitApp(fixed_config, connect=False)
    before = _run(app, hosts_scene, "cockpit-contrast")
    assert snap_compare(app, terminal_size=SIZES["160x48"], run_before=before)
