"""Relaunch from the cockpit on the simulated cluster: after a stop, the stopped containers this cockpit
started are archived (full `docker logs -t`) and removed by ID, and a new launch reaches READY; a running
container, or one the ledger does not list, is refused. Two full launches in all (each costs ~20 s)."""

from __future__ import annotations

from pathlib import Path

import pytest
from test_launch_demo import cli, prepare_hosts

from cockpit.config import ClusterConfig
from cockpit.hosts import Fleet, Result, command
from cockpit.locations import state_dir
from cockpit.recipe import containers as dk
from cockpit.recipe import launch as L
from cockpit.recipe.ledger import Ledger, cluster_key
from cockpit.recipe.replace import execute_replace, plan_replace, refused
from cockpit.recipe.timeline import settled


@pytest.fixture(autouse=True)
def _state_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A launch ledger and archive of the test's own; and the directory fresh_demo_cluster expects."""
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    (tmp_path / "cluster").mkdir(exist_ok=True)


async def _launch_ready(fleet: Fleet, cfg: ClusterConfig, ledger: Ledger) -> dict[int, str]:
    """Launch every rank through the cockpit and wait for READY; the container IDs it recorded."""
    launcher = L.Launcher(fleet, cfg, ledger=ledger, poll_interval=0.3)
    try:
        assert await launcher.launch()
        assert await launcher.run_until(settled, timeout=120)
        assert launcher.timeline.verdict.state == "ready", launcher.timeline.verdict
    finally:
        await launcher.close()
    return {rank: rec.container_id for rank, rec in ledger.records().items()}


async def _ps_all(fleet: Fleet, name: str) -> dict[int, str]:
    results = await fleet.run_all(dk.ps_argv(name), timeout=20)
    out = {}
    for rank, res in results.items():
        assert isinstance(res, Result) and res.ok, res
        out[rank] = res.stdout
    return out


def removals(fleet: Fleet) -> list[str]:
    """Every `docker rm` the fleet ran (the command log notes a command when it starts and when it ends)."""
    return [rec.command for rec in fleet.command_log
            if rec.command.startswith("docker rm") and rec.duration is not None]


async def test_replace_stopped_archives_removes_and_relaunches(fresh_demo_cluster) -> None:
    cfg = fresh_demo_cluster.config
    name = cfg.cluster.container_name
    ledger = Ledger(cfg)
    async with Fleet(cfg) as fleet:
        assert await fleet.wait_connected(20)
        await prepare_hosts(fleet, cfg)
        first = await _launch_ready(fleet, cfg, ledger)
        plan = await plan_replace(fleet, cfg, ledger)
        assert [i.action for i in plan] == ["refuse"] * 4
        assert plan[2].reason == (f"rank 2: {name} ({first[2][:12]}) is running: stop it first "
                                  "(`r37-cockpit stop`)")
        assert await execute_replace(fleet, cfg, plan, ledger) == []

    stop = cli(fresh_demo_cluster, "stop", "--yes", "--json")
    assert stop.returncode == 0, stop.stdout + stop.stderr

    async with Fleet(cfg) as fleet:
        assert await fleet.wait_connected(20)
        plan = await plan_replace(fleet, cfg, ledger)
        assert [(i.rank, i.action) for i in plan] == [(r, "replace") for r in range(4)], plan
        for item in plan:
            assert item.container_id == first[item.rank]
            assert item.commands == [f"docker logs -t {item.container_id}", f"docker rm {item.container_id}"]
        assert refused(plan) == []
        # what `docker logs -t` prints for each, to compare the archives with
        full = await fleet.run_all(lambda h: command(["docker", "logs", "-t", first[h.rank]],
                                                     merge_stderr=True))
        expected = {}
        for rank, res in full.items():
            assert isinstance(res, Result) and res.ok, res
            expected[rank] = res.stdout
            assert res.stdout.count("\n") > 50  # a whole boot and a shutdown

        outcomes = await execute_replace(fleet, cfg, plan, ledger)
        assert [o.rank for o in outcomes] == [0, 1, 2, 3]
        assert all(o.ok for o in outcomes), [o.message for o in outcomes]
        archive = state_dir() / "archive" / cluster_key(cfg)
        (run_dir,) = archive.iterdir()
        assert sorted(p.name for p in run_dir.iterdir()) == [f"rank-{r}.log" for r in range(4)]
        for out in outcomes:
            path = Path(out.archive_path or "")
            assert path == run_dir / f"rank-{out.rank}.log"
            text = path.read_bytes().decode()
            assert text == expected[out.rank]
            assert out.archived_lines == text.count("\n") == expected[out.rank].count("\n")
            assert out.archived_bytes == path.stat().st_size
        assert all(dk.ps_named(text, name) is None for text in (await _ps_all(fleet, name)).values())
        assert sorted(removals(fleet)) == sorted(f"docker rm {cid}" for cid in first.values())

        second = await _launch_ready(fleet, cfg, ledger)
        assert set(second.values()).isdisjoint(first.values())

        # launched by hand as far as the cockpit knows: an empty ledger, and stopped without the cockpit
        ledger.path.write_text("{}\n")
        results = await fleet.run_all(dk.stop_argv(name), timeout=60)
        assert all(isinstance(r, Result) and r.ok for r in results.values()), results
        plan = await plan_replace(fleet, cfg, ledger)
        assert [i.action for i in plan] == ["refuse"] * 4
        assert plan[1].reason == (f"rank 1: {name} ({second[1][:12]}) was not started by this cockpit: "
                                  "inspect and remove it yourself on that host")
        assert await execute_replace(fleet, cfg, plan, ledger) == []
        ps = await _ps_all(fleet, name)
        assert all((entry := dk.ps_named(text, name)) is not None and entry.state == "exited"
                   for text in ps.values())
        assert len(removals(fleet)) == 4
