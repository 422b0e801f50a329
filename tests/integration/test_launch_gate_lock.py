"""The TUI computes the launch gate again under the cluster lock, as the CLI does (issue 25, item 3): a
container started by hand between the operator's confirmation and the lock refuses the launch, and the
cockpit starts nothing."""

from __future__ import annotations

import time

from simcluster import prepare_hosts

from cockpit.hosts import Fleet
from cockpit.recipe import launch as L
from cockpit.recipe.ledger import Ledger


def test_only_the_preflight_blocker_is_overridable() -> None:
    gate = L.Gate([L.Blocker(None, "preflight has failures", "fix", overridable=True),
                   L.Blocker(None, "no fabric test of this cluster is on record", "run `fabric`")], [], ["x"])
    assert [b.reason for b in gate.hard] == ["no fabric test of this cluster is on record"]
    assert not gate.open and gate.same_replace([])


async def test_a_container_started_after_the_confirmation_refuses_the_tuis_launch(fresh_demo_cluster) -> None:
    from cockpit.tui.app import CockpitApp
    from cockpit.tui.dialogs import ConfirmCommands
    from cockpit.tui.panes.launch import LaunchPane

    cfg = fresh_demo_cluster.config
    async with Fleet(cfg) as fleet:
        assert await fleet.wait_connected(20)
        await prepare_hosts(fleet, cfg)
        app = CockpitApp(cfg, fresh_demo_cluster.config_path)

        async def until(pilot, pred, timeout: float) -> None:  # type: ignore[no-untyped-def]
            t0 = time.monotonic()
            while not pred():
                await pilot.pause(0.2)
                assert time.monotonic() - t0 < timeout, "timed out"

        async with app.run_test(size=(130, 44)) as pilot:
            await until(pilot, lambda: all(s.connected for s in app.fleet.statuses), 30)
            app.action_show_pane("launch")
            await pilot.pause(0.3)
            pane = app.query_one(LaunchPane)
            await until(pilot, lambda: pane.timeline.verdict.state == "idle" and app.ctx.watcher.looked(), 30)
            await pilot.press("d")
            await until(pilot, lambda: len(pane.dry) == 4, 60)
            await pilot.press("l")
            await until(pilot, lambda: isinstance(app.screen, ConfirmCommands), 90)
            screen = app.screen
            assert isinstance(screen, ConfirmCommands)
            # someone launches rank 3 by hand while the dialog is open
            res = await fleet[3].run(L.launch_command(cfg, 3), timeout=60)
            assert res.ok, res.stderr
            await pilot.press(*(["o"] if screen.override_label is not None else []), "enter")
            notice = pane.query_one("#launch-notice")
            await until(pilot, lambda: "changed since the confirmation" in str(notice.render()), 60)
            assert "rank 3" in str(notice.render()) and not pane.launching
        assert Ledger(cfg).records() == {}                          # the cockpit recorded no launch
        ps = await fleet[2].run(["docker", "ps", "-a", "--format", "{{.Names}}"], timeout=30)
        assert cfg.cluster.container_name not in ps.stdout        # nothing was started by the cockpit
