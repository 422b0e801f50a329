"""The diagnosis views on a real fleet: the fabric dialog (Preflight pane, key f) runs perftest over SSH and
shows the verdict; the Commands pane's support bundle (key b, confirmed with y) writes a redacted archive."""

from __future__ import annotations

import tarfile
import time

from simcluster import SimCluster

from cockpit.hosts import HostState
from cockpit.locations import state_dir
from cockpit.tui.app import CockpitApp
from cockpit.tui.dialogs.fabric import FabricScreen
from cockpit.tui.panes.hosts import HostsPane


async def _until(pilot, pred, timeout: float) -> None:  # type: ignore[no-untyped-def]
    t0 = time.monotonic()
    while not pred():
        await pilot.pause(0.1)
        assert time.monotonic() - t0 < timeout, "timed out"


async def test_fabric_dialog_runs_and_names_the_degraded_rank(demo_cluster: SimCluster) -> None:
    app = CockpitApp(demo_cluster.config, demo_cluster.config_path)
    demo_cluster.fault(3, "fabric-degraded")
    try:
        async with app.run_test(size=(160, 48)) as pilot:
            hosts = app.query_one(HostsPane)
            await _until(pilot, lambda: all(s.state is HostState.CONNECTED for s in hosts.statuses), 20)
            await pilot.press("2", "f")
            await pilot.pause()
            screen = app.screen
            assert isinstance(screen, FabricScreen) and screen.state == "plan"
            await pilot.press("p")                  # ring: 4 pairs
            await pilot.press("enter")
            await _until(pilot, lambda: screen.state == "done", 120)
            assert screen.report is not None and not screen.report.passed
            assert screen.report.slow_rank == 3 and len(screen.report.pairs) == 4
            assert "rank 3's link" in str(screen.query_one("#fabric-text").render())
            await pilot.press("escape")
    finally:
        demo_cluster.fault(3, "fabric-degraded", on=False)


async def test_support_bundle_key_writes_a_redacted_archive(demo_cluster: SimCluster) -> None:
    reports = state_dir() / "reports"
    before = set(reports.glob("*.tar.gz")) if reports.exists() else set()
    app = CockpitApp(demo_cluster.config, demo_cluster.config_path)
    async with app.run_test(size=(160, 48)) as pilot:
        hosts = app.query_one(HostsPane)
        await _until(pilot, lambda: all(s.state is HostState.CONNECTED for s in hosts.statuses), 20)
        await pilot.press("9", "b")
        await pilot.pause()
        await pilot.press("y")
        await _until(pilot, lambda: reports.exists() and set(reports.glob("*.tar.gz")) - before, 120)
    (new,) = set(reports.glob("*.tar.gz")) - before
    with tarfile.open(new) as tar:
        text = "\n".join(tar.extractfile(m).read().decode() for m in tar.getmembers()  # type: ignore[union-attr]
                         if m.isfile())
        names = " ".join(tar.getnames())
    assert "versions.json" in names and "ranks/3/docker-inspect.json" in names
    for h in demo_cluster.config.hosts:
        assert h.fabric_ip not in text
