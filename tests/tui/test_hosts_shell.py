"""The Hosts pane's shell keys: `s` on the selected host, `e` in its container. The test driver cannot
suspend (as web mode cannot): a notification says so and nothing is logged. Through the runner seam the
real OpenSSH client opens a session on a demo host; it is logged with its status. Read-only hides both."""

from __future__ import annotations

import io
import shlex
import subprocess
from collections.abc import Sequence
from pathlib import Path

import pytest
from simcluster import SimCluster
from textual.app import App
from textual.widgets import DataTable

from cockpit.config import ClusterConfig
from cockpit.tui.app import CockpitApp
from cockpit.tui.panes.hosts import HostsPane, wait_for_enter

SIZE = (130, 30)


async def on_row(app: CockpitApp, pilot, row: int) -> HostsPane:  # type: ignore[no-untyped-def]
    await pilot.pause()
    app.query_one("#hosts-table", DataTable).move_cursor(row=row)
    await pilot.pause()
    return app.query_one(HostsPane)


async def test_the_test_driver_cannot_suspend_and_says_so(demo_cluster: SimCluster) -> None:
    app = CockpitApp(demo_cluster.config, demo_cluster.config_path, connect=False)
    async with app.run_test(size=SIZE) as pilot:
        pane = await on_row(app, pilot, 2)
        assert (pane.key_for("shell"), pane.key_for("container_shell")) == ("s", "e")
        await pilot.press("e")
        await pilot.pause()
        notes = [n.message for n in app._notifications]
        assert any("cannot hand its terminal to a shell" in m and "`r37-cockpit --config" in m
                   and "ssh 2 --container`" in m for m in notes), notes
        assert not [r for r in app.fleet.command_log if r.note.startswith("interactive")]
        assert pane.is_mounted and app.screen is not None       # the cockpit is still there


async def test_a_session_through_the_runner_is_logged_with_its_status(demo_cluster: SimCluster) -> None:
    """The real `ssh` with the pane's argv; stdin at EOF ends the login shell at once (exit 0)."""
    ran: list[list[str]] = []

    def runner(app: App[object], argv: Sequence[str]) -> int:
        ran.append(list(argv))
        return subprocess.run(argv, stdin=subprocess.DEVNULL, capture_output=True, timeout=60).returncode

    app = CockpitApp(demo_cluster.config, demo_cluster.config_path, connect=False)
    async with app.run_test(size=SIZE) as pilot:
        pane = await on_row(app, pilot, 1)
        pane.run_session = runner
        await pilot.press("s")
        await pilot.pause()
        assert len(ran) == 1 and ran[0][0] == "ssh" and ran[0][-1] == demo_cluster.config.host(1).ssh
        (rec,) = [r for r in app.fleet.command_log if r.note == "interactive shell"]
        assert (rec.rank, rec.exit_status, rec.origin) == (1, 0, "pane:Hosts")
        assert shlex.split(rec.command) == ran[0] and rec.duration is not None and rec.duration >= 0
        assert any("the shell on rank 1 ended with exit status 0" in n.message for n in app._notifications)
        pane.run_session = lambda app, argv: ran.append(list(argv)) or 7
        await pilot.press("e")
        await pilot.pause()
        assert ran[-1][-1].startswith("docker exec -it ds41_r37 sh -c")
        (rec,) = [r for r in app.fleet.command_log if r.note == "interactive container shell"]
        assert rec.exit_status == 7
        assert any(n.severity == "warning" and "exit status 7" in n.message for n in app._notifications)


async def test_read_only_hides_both_keys(demo_cluster: SimCluster) -> None:
    ran: list[Sequence[str]] = []
    app = CockpitApp(demo_cluster.config, demo_cluster.config_path, connect=False, read_only=True)
    async with app.run_test(size=SIZE) as pilot:
        pane = await on_row(app, pilot, 0)
        pane.run_session = lambda app, argv: ran.append(argv) or 0
        assert (pane.key_for("shell"), pane.key_for("container_shell")) == ("", "")
        await pilot.press("s", "e")
        await pilot.pause()
        titles = {c.title for c in app.get_system_commands(app.screen)}
        assert ran == [] and "Hosts: Shell" not in titles and "Hosts: Container shell" not in titles
    plain = CockpitApp(demo_cluster.config, demo_cluster.config_path, connect=False)
    async with plain.run_test(size=SIZE) as pilot:
        await pilot.pause()
        assert {"Hosts: Shell", "Hosts: Container shell"} <= {c.title for c in
                                                              plain.get_system_commands(plain.screen)}


async def test_a_host_the_cockpit_would_not_connect_to_gets_no_shell(
        fixed_config: ClusterConfig, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOME", str(tmp_path))             # no ~/.ssh/known_hosts at all
    ran: list[Sequence[str]] = []
    app = CockpitApp(fixed_config, connect=False)
    async with app.run_test(size=SIZE) as pilot:
        pane = await on_row(app, pilot, 3)
        pane.run_session = lambda app, argv: ran.append(argv) or 0
        await pilot.press("s")
        await pilot.pause()
        assert ran == []
        assert any("rank 3: no known_hosts file" in n.message and n.severity == "error"
                   for n in app._notifications)


def test_a_failed_session_waits_for_enter_before_the_cockpit_redraws() -> None:
    out = io.StringIO()
    stdin = io.StringIO("\nlater input\n")
    wait_for_enter(255, stdin, out)
    assert "exit status 255: press Enter to return to the cockpit" in out.getvalue()
    assert stdin.read() == "later input\n"          # one line read, no more
    wait_for_enter(1, io.StringIO(""), out)           # EOF returns too
    wait_for_enter(1, None, None)                     # no terminal streams: nothing to wait on
