"""Snapshots of the diagnosis views at 160×48 and 80×24: the fabric test's plan (the exact commands) and
its result with a slow link named, and the support bundle's confirmation."""

from __future__ import annotations

from pathlib import Path

import pytest

from cockpit.config import ClusterConfig
from cockpit.recipe.fabric import BwRow, FabricReport, LatRow, PairResult, choose_pairs, judge
from cockpit.tui.app import CockpitApp
from cockpit.tui.dialogs.fabric import FabricScreen
from cockpit.tui.panes.commands import CommandsPane

SIZES = {"80x24": (80, 24), "160x48": (160, 48)}


def slow_rank_2(cfg: ClusterConfig) -> FabricReport:
    pairs = []
    for s, c in choose_pairs(cfg.ranks, "all"):
        gbps = 49.3 if 2 in (s, c) else 196.8 - s * 0.2
        pairs.append(PairResult(s, c, BwRow(1 << 20, 5000, gbps * 1.002, gbps, gbps / 8 / 1.048576 / 1000),
                                LatRow(2, 1000, {"t_avg[usec]": 4.71 if 2 in (s, c) else 1.64}), 200.0,
                                "pass"))
    judged, rank, summary, remedy = judge(pairs, 0.8)
    rates: dict[int, float | None] = {r: 200.0 for r in cfg.ranks}
    return FabricReport(tuple(judged), rates, 1 << 20, 0.0, 12.5, rank, summary, remedy,
                        cluster=cfg.cluster.name)


@pytest.mark.parametrize("size", sorted(SIZES))
def test_fabric_plan(snap_compare, fixed_config: ClusterConfig, size: str) -> None:
    app = CockpitApp(fixed_config, connect=False)

    async def before(pilot) -> None:  # type: ignore[no-untyped-def]
        app.theme = "cockpit-dark"
        await pilot.press("2")
        await pilot.press("f")
        await pilot.pause()
        assert isinstance(app.screen, FabricScreen) and app.screen.state == "plan"

    assert snap_compare(app, terminal_size=SIZES[size], run_before=before)


@pytest.mark.parametrize("size", sorted(SIZES))
def test_fabric_result_names_the_slow_link(snap_compare, fixed_config: ClusterConfig, size: str) -> None:
    app = CockpitApp(fixed_config, connect=False)

    async def before(pilot) -> None:  # type: ignore[no-untyped-def]
        app.theme = "cockpit-dark"
        await pilot.press("2")
        await pilot.press("f")
        await pilot.pause()
        screen = app.screen
        assert isinstance(screen, FabricScreen)
        screen.show_report(slow_rank_2(fixed_config))
        await pilot.pause()

    assert snap_compare(app, terminal_size=SIZES[size], run_before=before)


@pytest.mark.parametrize("size", sorted(SIZES))
def test_report_confirm(snap_compare, fixed_config: ClusterConfig, size: str, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.setattr("cockpit.locations.state_dir", lambda: Path("/home/op/.local/state/r37-cockpit"))
    monkeypatch.setattr(CommandsPane, "report_clock", staticmethod(lambda: 1796342400.0))
    app = CockpitApp(fixed_config, connect=False)

    async def before(pilot) -> None:  # type: ignore[no-untyped-def]
        app.theme = "cockpit-dark"
        await pilot.press("9")
        await pilot.press("b")
        await pilot.pause()

    assert snap_compare(app, terminal_size=SIZES[size], run_before=before)


@pytest.mark.parametrize("size", sorted(SIZES))
def test_fabric_refused_while_the_engine_serves(snap_compare, fixed_config: ClusterConfig, size: str) -> None:
    app = CockpitApp(fixed_config, connect=False)

    async def before(pilot) -> None:  # type: ignore[no-untyped-def]
        app.theme = "cockpit-dark"
        await pilot.press("2")
        await pilot.press("f")
        await pilot.pause()
        screen = app.screen
        assert isinstance(screen, FabricScreen)
        screen.show_refused([0, 1, 2, 3])
        await pilot.pause()
        assert screen.check_action("run_anyway", ()) and not screen.check_action("run", ())

    assert snap_compare(app, terminal_size=SIZES[size], run_before=before)
