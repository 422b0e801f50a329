"""The TUI on several clusters: `C` lists them, choosing one closes this cluster's connections and opens
the other's on the same pane, the header names it; the palette offers the others; a broken file is
named with its reason and nothing is closed."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from cockpit.config.clusters import load_clusters
from cockpit.hosts import HostState
from cockpit.tui.app import CockpitApp
from cockpit.tui.dialogs.clusters import ClusterPicker
from cockpit.tui.header import ClusterHeader
from cockpit.tui.panes.hosts import HostsPane


@pytest.fixture
def place(demo_cluster, tmp_path: Path) -> Path:  # type: ignore[no-untyped-def]
    text = demo_cluster.config_path.read_text()
    head, *hosts = text.split("[[hosts]]")
    (tmp_path / "cluster.toml").write_text(text)
    (tmp_path / "cluster.d").mkdir()
    (tmp_path / "cluster.d" / "pair.toml").write_text(
        "[[hosts]]".join([head.replace('name = "sim-demo"', 'name = "pair"', 1), *hosts[:2]]))
    return tmp_path


async def until(pilot, pred, timeout: float = 30) -> None:  # type: ignore[no-untyped-def]
    t0 = time.monotonic()
    while not pred():
        assert time.monotonic() - t0 < timeout, "timed out"
        await pilot.pause(0.1)


def header(app: CockpitApp) -> str:
    return app.query_one(ClusterHeader).render().plain


async def test_switching_clusters_reconnects_and_keeps_the_pane(place: Path) -> None:
    clusters = load_clusters([place / "cluster.toml"])
    main = clusters[0]
    app = CockpitApp(main.loaded(), main.path, clusters=clusters, read_only=True)
    async with app.run_test(size=(130, 32)) as pilot:
        await until(pilot, lambda: all(h.status.connected for h in app.fleet.hosts.values()))
        assert "sim-demo · 1/2" in header(app)
        old_fleet = app.fleet
        app.action_show_pane("logs")
        await pilot.press("C")
        await until(pilot, lambda: isinstance(app.screen, ClusterPicker))
        await pilot.press("down", "enter")
        await until(pilot, lambda: app.config.cluster.name == "pair" and "pair · 2/2" in header(app))
        await until(pilot, lambda: all(h.status.connected for h in app.fleet.hosts.values()))
        assert sorted(app.fleet.hosts) == [0, 1]
        assert all(h.status.state is HostState.CLOSED for h in old_fleet.hosts.values())  # old: closed
        assert app.query_one("TabbedContent").active == "logs"                  # same pane as before
        assert len(app.query_one(HostsPane).statuses) == 2
        assert app.ctx.read_only                                                # --read-only holds
        titles = [c.title for c in app.get_system_commands(app.screen)]
        assert "Cluster: sim-demo" in titles and "Cluster: pair" not in titles


async def test_a_broken_cluster_file_is_named_and_nothing_is_closed(place: Path) -> None:
    (place / "cluster.d" / "zz-broken.toml").write_text("[cluster]\nname = 3\n")
    clusters = load_clusters([place / "cluster.toml"])
    app = CockpitApp(clusters[0].loaded(), clusters[0].path, clusters=clusters, connect=False)
    async with app.run_test(size=(130, 32)) as pilot:
        fleet = app.fleet
        app._cluster_chosen(clusters[-1])
        await pilot.pause()
        assert app.fleet is fleet and app.config.cluster.name == "sim-demo"
        notes = [n.message for n in app._notifications]
        assert any("cluster.name" in n and "zz-broken.toml" in n for n in notes)


async def test_one_cluster_only_says_how_to_add_more(demo_cluster) -> None:  # type: ignore[no-untyped-def]
    app = CockpitApp(demo_cluster.config, demo_cluster.config_path, connect=False,
                     clusters=load_clusters([demo_cluster.config_path]))
    async with app.run_test(size=(130, 32)) as pilot:
        assert "· 1/" not in header(app)
        await pilot.press("C")
        await pilot.pause()
        assert not isinstance(app.screen, ClusterPicker)
        assert any("cluster.d/" in n.message for n in app._notifications)
