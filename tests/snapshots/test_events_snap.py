"""Snapshots of the incident timeline (`E`): a night's recording with a launch, a rank failing first, the
verdict, an alert and a stop, at 160x48 and 80x24; and the same rows filtered to one rank (`r`)."""

from __future__ import annotations

import time

import pytest

from cockpit.recipe.recording import path_for
from cockpit.telemetry.recorder import Recorder, Retention
from cockpit.tui.app import CockpitApp
from cockpit.tui.dialogs import EventsScreen

T0 = time.mktime((2026, 3, 14, 22, 58, 0, 0, 0, -1))
WHO = "ops@admin-box"

EVENTS = [
    (0, "recorder", None, f"recording begins (tui, {WHO})", {}),
    (5, "launch", 3, f"rank 3: launched container 317f0aa9efc6 (by {WHO})", {"who": WHO}),
    (6, "launch", 2, f"rank 2: launched container f1dcf354055c (by {WHO})", {"who": WHO}),
    (7, "launch", 1, f"rank 1: launched container 98f1be6a2cd9 (by {WHO})", {"who": WHO}),
    (8, "launch", 0, f"rank 0: launched container de3d0815b93c (by {WHO})", {"who": WHO}),
    (95, "verdict", None, "cluster ready: cluster READY: API answers /health and lists the model",
     {"state": "ready"}),
    (3700, "alert-raised", 2, "FAIL clock-latched rank 2: SM clock latched: under load at 820 MHz, below "
                              "half of its 3003 MHz maximum", {"kind": "clock-latched"}),
    (7260, "failure", 2, "rank 2: NCCL error: NCCL WARN NET/IB : Got completion with error 12, opcode 0",
     {"label": "NCCL error"}),
    (7260.5, "condition", 2, "rank 2: ready → failed (NCCL WARN NET/IB : Got completion with error 12)",
     {"to": "failed"}),
    (7261, "condition", 0, "rank 0: ready → followed", {"to": "followed"}),
    (7264, "verdict", None, "cluster down: rank 2 failed first: NCCL error", {"state": "down"}),
    (7300, "host-lost", 1, "rank 1: host lost: connection lost (no keepalive answer)", {}),
    (7330, "host-back", 1, "rank 1: host back", {}),
    (7400, "stop", 0, f"rank 0: stopped de3d0815b93c (by {WHO})", {"ok": True}),
    (7401, "stop", 2, f"rank 2: stopped f1dcf354055c (by {WHO})", {"ok": True}),
    (7402, "alert-cleared", 2, "cleared clock-latched rank 2 (raised 23:59:40)", {}),
]


def record(config) -> None:  # type: ignore[no-untyped-def]
    rec = Recorder(path_for(config), Retention(days=3650)).start()
    for dt, kind, rank, summary, data in EVENTS:
        rec.put_event(T0 + dt, kind, summary, rank=rank, data=data)
    rec.close()


@pytest.mark.parametrize("size", [(160, 48), (80, 24)])
def test_incident_timeline(snap_compare, fixed_config, size: tuple[int, int]) -> None:
    record(fixed_config)
    app = CockpitApp(fixed_config, connect=False)

    async def before(pilot) -> None:  # type: ignore[no-untyped-def]
        await pilot.press("E")
        await pilot.pause()
        screen = app.screen
        assert isinstance(screen, EventsScreen) and len(screen.events) == len(EVENTS)
        await pilot.pause()

    assert snap_compare(app, terminal_size=size, run_before=before)


def test_incident_timeline_of_one_rank(snap_compare, fixed_config) -> None:
    record(fixed_config)
    app = CockpitApp(fixed_config, connect=False)

    async def before(pilot) -> None:  # type: ignore[no-untyped-def]
        await pilot.press("E")
        await pilot.pause()
        await pilot.press("r", "r", "r")          # every rank → rank 0 → rank 1 → rank 2
        await pilot.pause()
        screen = app.screen
        assert isinstance(screen, EventsScreen) and screen.rank == 2
        assert {e.rank for e in screen.events} == {2, None}

    assert snap_compare(app, terminal_size=(160, 48), run_before=before)
