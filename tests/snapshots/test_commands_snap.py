"""Snapshots of the Commands pane: a session's records (ok, failed, timeout, lost, stream; origins from
commands, panes and the watcher), filtered by rank, filtered by text, and empty."""

from __future__ import annotations

import time

from cockpit.hosts import CommandRecord
from cockpit.tui.app import CockpitApp
from cockpit.tui.panes.commands import CommandsPane

SIZE = (140, 30)
T0 = 1_767_225_600.0    # 2026-01-01 00:00:00 UTC

RECORDS = (
    CommandRecord(0, "docker inspect ds41_r37", T0 + 1, 0.04, 0, "", "watcher"),
    CommandRecord(1, "while :; do docker inspect ds41_r37; sleep 1; done", T0 + 2, None, None, "stream",
                  "watcher"),
    CommandRecord(2, "uname -m", T0 + 3, 0.12, 0, "", "pane:Preflight"),
    CommandRecord(3, "nvidia-smi --query-gpu=name,driver_version --format=csv,noheader", T0 + 3, 0.31, 0, "",
                  "pane:Preflight"),
    CommandRecord(1, "df -P /srv", T0 + 4, 0.08, 1, "", "pane:Preflight"),
    CommandRecord(2, "sha256sum /srv/models/model-00001-of-00048.safetensors", T0 + 5, 60.0, None,
                  "timeout", "pane:Setup"),
    CommandRecord(3, "docker logs -t -f ds41_r37 2>&1", T0 + 6, None, None, "stream", "pane:Logs"),
    CommandRecord(0, "cat /proc/meminfo", T0 + 7, 2.5, None, "lost", "stats sampler"),
    CommandRecord(0, "printf '\x1b]52;c;aGk=\x07 done'", T0 + 8, 0.02, 0, "", ""),
)


async def show(app: CockpitApp, pilot, records=RECORDS) -> CommandsPane:  # type: ignore[no-untyped-def]
    app.action_show_pane("commands")
    await pilot.pause()
    pane = app.query_one(CommandsPane)
    pane.clock = time.gmtime    # the time column in one zone whatever the machine's
    for rec in records:
        pane.add(rec)
    await pilot.pause()
    return pane


async def scene(app: CockpitApp, pilot) -> None:  # type: ignore[no-untyped-def]
    """The matrix's commands state: a session's records, the newest selected."""
    await show(app, pilot)


def test_records(snap_compare, fixed_config) -> None:
    app = CockpitApp(fixed_config, connect=False)
    assert snap_compare(app, terminal_size=SIZE, run_before=lambda pilot: scene(app, pilot))


def test_filtered_by_rank(snap_compare, fixed_config) -> None:
    app = CockpitApp(fixed_config, connect=False)

    async def before(pilot) -> None:  # type: ignore[no-untyped-def]
        await show(app, pilot)
        await pilot.press("r", "r", "r", "r")     # all → 0 → 1 → 2 → 3
        await pilot.pause()

    assert snap_compare(app, terminal_size=SIZE, run_before=before)


def test_filtered_by_text(snap_compare, fixed_config) -> None:
    app = CockpitApp(fixed_config, connect=False)

    async def before(pilot) -> None:  # type: ignore[no-untyped-def]
        await show(app, pilot)
        await pilot.press("slash", *"preflight", "enter")
        await pilot.pause()

    assert snap_compare(app, terminal_size=SIZE, run_before=before)


def test_empty(snap_compare, fixed_config) -> None:
    app = CockpitApp(fixed_config, connect=False)
    assert snap_compare(app, terminal_size=SIZE, run_before=lambda pilot: show(app, pilot, ()))
