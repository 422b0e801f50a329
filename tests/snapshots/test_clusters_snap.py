"""Snapshots of several clusters: the header naming the active one with its place, and the picker (`C`)
with the active cluster marked and a broken file's reason."""

from __future__ import annotations

from pathlib import Path

import pytest
from test_hosts_snap import connected
from tuihelpers import report_status

from cockpit.config import ConfigError
from cockpit.config.clusters import ClusterRef
from cockpit.tui.app import CockpitApp

MAIN = Path("/etc/r37-cockpit/cluster.toml")


def app_with_clusters(fixed_config) -> CockpitApp:  # type: ignore[no-untyped-def]
    renamed = fixed_config.cluster.model_copy(update={"name": "pair"})
    pair = fixed_config.model_copy(update={"cluster": renamed})
    broken = ConfigError(MAIN.parent / "cluster.d" / "old.toml",
                         [("hosts[1].fabric_ip", "not an IP address: '10.0.0.x'")])
    clusters = [ClusterRef(fixed_config.cluster.name, MAIN, fixed_config),
                ClusterRef("old", MAIN.parent / "cluster.d" / "old.toml", error=broken),
                ClusterRef("pair", MAIN.parent / "cluster.d" / "pair.toml", pair)]
    return CockpitApp(fixed_config, MAIN, connect=False, clusters=clusters)


@pytest.mark.parametrize("size", [(80, 24), (130, 30)])
def test_cluster_picker(snap_compare, fixed_config, size: tuple[int, int]) -> None:
    app = app_with_clusters(fixed_config)

    async def before(pilot) -> None:  # type: ignore[no-untyped-def]
        for r in range(4):                    # hosts connected long ago: no age that moves on behind
            report_status(app, connected(r))
        await pilot.press("C")
        await pilot.pause()

    assert snap_compare(app, terminal_size=size, run_before=before)
