"""The fleet and the TUI against the lab: real OpenSSH sshd, a host lost by a real link going down."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import time

import pytest

from cockpit.hosts import Fleet, HostState
from cockpit.tui.app import CockpitApp
from cockpit.tui.panes.hosts import HostsPane

pytestmark = pytest.mark.lab


def test_hosts_json_shows_four_connected(lab_cluster) -> None:
    res = subprocess.run([sys.executable, "-m", "cockpit", "--config", str(lab_cluster.config_path), "hosts",
                          "--json"], capture_output=True, text=True, timeout=60)
    assert res.returncode == 0, res.stdout + res.stderr
    data = json.loads(res.stdout)
    assert data["connected"] == 4
    assert [h["hostname"] for h in data["hosts"]] == [f"spark-{r}" for r in range(4)]


async def test_link_down_is_lost_within_10s_and_comes_back(lab_cluster) -> None:
    async with Fleet(lab_cluster.config) as fleet:
        assert await fleet.wait_connected(20)
        lab_cluster.fault(2, "host-down")
        try:
            t0 = time.monotonic()
            while fleet[2].status.state is HostState.CONNECTED:
                await asyncio.sleep(0.1)
                assert time.monotonic() - t0 < 12, "link down not noticed"
            lost_after = time.monotonic() - t0
            assert all(fleet[r].status.connected for r in (0, 1, 3))
            assert (await fleet[1].run(["hostname"])).stdout.strip() == "spark-1"
        finally:
            lab_cluster.fault(2, "host-down", on=False)
        assert await fleet[2].wait_connected(40)
        assert lost_after <= 10.5


async def test_tui_marks_lab_host_lost_and_back(lab_cluster) -> None:
    app = CockpitApp(lab_cluster.config, lab_cluster.config_path)
    async with app.run_test(size=(130, 30)) as pilot:
        pane = app.query_one(HostsPane)

        async def until(pred, timeout: float) -> float:  # type: ignore[no-untyped-def]
            t0 = time.monotonic()
            while not pred():
                await pilot.pause(0.1)
                assert time.monotonic() - t0 < timeout
            return time.monotonic() - t0

        await until(lambda: all(s.state is HostState.CONNECTED for s in pane.statuses), 20)
        lab_cluster.fault(1, "host-down")
        try:
            assert await until(lambda: pane.statuses[1].state is HostState.LOST, 12) <= 10.5
        finally:
            lab_cluster.fault(1, "host-down", on=False)
        await until(lambda: pane.statuses[1].state is HostState.CONNECTED, 40)
