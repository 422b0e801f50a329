"""The garbage collector is off while the cockpit starts (`cockpit.startup`): back on before a headless
command's handler runs, and once the TUI's first frame is drawn, with the start-up's objects frozen; a
process that never called `begin` keeps its collector as it was."""

from __future__ import annotations

import gc
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from cockpit import startup


@pytest.fixture
def collector_restored() -> Iterator[None]:
    was = gc.isenabled()
    try:
        yield
    finally:
        startup.end()
        (gc.enable if was else gc.disable)()


def test_end_turns_on_only_what_begin_turned_off(collector_restored: None) -> None:
    gc.enable()
    startup.begin()
    assert not gc.isenabled() and startup.paused()
    startup.end()
    assert gc.isenabled() and not startup.paused()
    gc.disable()                     # off by someone else: begin/end leave it off
    startup.begin()
    startup.end()
    assert not gc.isenabled()
    gc.enable()
    startup.end()                    # no begin: nothing changes
    assert gc.isenabled()


def test_end_with_freeze_collects_then_freezes(collector_restored: None) -> None:
    startup.begin()
    cycle: list[object] = []
    cycle.append(cycle)              # garbage made while the collector is off
    del cycle
    frozen_before = gc.get_freeze_count()
    startup.end(freeze=True)
    try:
        assert gc.isenabled()
        assert gc.get_freeze_count() > frozen_before
    finally:
        gc.unfreeze()


PROBE = """
import gc, sys
from cockpit.__main__ import run
import cockpit.cli.config_cmd as cmd
seen = []
real = cmd.cmd_check
def spy(args):
    seen.append(gc.isenabled())
    return real(args)
cmd.cmd_check = spy
sys.argv = ["r37-cockpit", "config", "check", sys.argv[1]]
code = run()
print("PROBE", seen, gc.isenabled(), code)
"""


def test_a_headless_command_runs_with_the_collector_on(tmp_path: Path) -> None:
    toml = tmp_path / "cluster.toml"
    toml.write_text((Path(__file__).resolve().parents[2] / "cluster.toml.example").read_text())
    res = subprocess.run([sys.executable, "-c", PROBE, str(toml)],
                         capture_output=True, text=True, timeout=60)
    assert res.returncode == 0, res.stderr
    probe = res.stdout[res.stdout.rindex("PROBE"):].split()
    assert probe == ["PROBE", "[True]", "True", "0"]


async def test_the_tui_turns_it_on_after_its_first_frame(fixed_config, collector_restored: None) -> None:
    from cockpit.tui.app import CockpitApp

    gc.enable()
    startup.begin()
    frozen_before = gc.get_freeze_count()
    app = CockpitApp(fixed_config, connect=False)
    try:
        async with app.run_test(size=(120, 40)) as pilot:
            await pilot.pause(0.2)
            assert gc.isenabled() and not startup.paused()
            assert gc.get_freeze_count() > frozen_before
    finally:
        gc.unfreeze()
