"""Launch and stop against the lab (real OpenSSH sshd) while a real link goes down: a rank whose link
drops during `docker run` is unknown, then recorded when it returns; a worker unreachable during a stop is
reported NOT stopped (exit 1) and stopped by the next stop once its link is back."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from cockpit.hosts import Fleet, Result, command
from cockpit.recipe import launch as L
from cockpit.recipe.ledger import Ledger
from cockpit.recipe.replace import execute_replace, plan_replace
from cockpit.recipe.stop import execute_stop, plan_stop

pytestmark = pytest.mark.lab


@pytest.fixture
def lab(lab_cluster, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[object]:  # type: ignore[no-untyped-def]
    """The shared lab, prepared for a launch, with a ledger of the test's own; left with no container."""
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    import asyncio
    asyncio.run(_prepare(lab_cluster))
    yield lab_cluster
    for rank in range(4):
        lab_cluster.fault(rank, "host-down", on=False)
        lab_cluster.fault(rank, "lost-during-run", on=False)
    asyncio.run(_clear(lab_cluster))


async def _prepare(cluster) -> None:  # type: ignore[no-untyped-def]
    from simcluster import prepare_hosts
    async with Fleet(cluster.config) as fleet:
        assert await fleet.wait_connected(30)
        done = await fleet.run_all(command(["test", "-s", "cluster.env"], cwd=cluster.config.recipe_dir(0)))
        if not all(isinstance(r, Result) and r.ok for r in done.values()):
            await prepare_hosts(fleet, cluster.config)


async def _clear(cluster) -> None:  # type: ignore[no-untyped-def]
    """Stop what this test's cockpit started, then archive and remove it, so the next test starts clean."""
    cfg = cluster.config
    async with Fleet(cfg) as fleet:
        assert await fleet.wait_connected(60)
        ledger = Ledger(cfg)
        await execute_stop(fleet, await plan_stop(fleet, cfg, ledger), ledger, force=True)
        await execute_replace(fleet, cfg, await plan_replace(fleet, cfg, ledger), ledger)


def cli(cluster, *args: str, timeout: float = 240) -> subprocess.CompletedProcess[str]:  # type: ignore[no-untyped-def]
    return subprocess.run([sys.executable, "-m", "cockpit", "--config", str(cluster.config_path), *args],
                          capture_output=True, text=True, timeout=timeout, env=dict(os.environ))


async def test_link_down_during_docker_run_is_unknown_then_recorded(lab) -> None:  # type: ignore[no-untyped-def]
    cfg = lab.config
    lab.fault(2, "lost-during-run")             # docker run starts the container, then the link goes down
    async with Fleet(cfg) as fleet:
        assert await fleet.wait_connected(30)
        launcher = L.Launcher(fleet, cfg, poll_interval=0.5)
        try:
            assert not await launcher.launch()
            assert launcher.timeline[2].condition == "unknown"
            assert launcher.timeline.compute_verdict().state == "unknown"
            assert set(launcher.booting) == {3}
            lab.fault(2, "host-down", on=False)
            assert await launcher.run_until(lambda t: t[2].owner == "cockpit" and t[2].container is not None,
                                            timeout=90)
            assert Ledger(cfg).owns(2, launcher.timeline[2].container.id)  # type: ignore[union-attr]
        finally:
            await launcher.close()


def test_link_down_during_stop_is_not_stopped_then_stopped(lab) -> None:  # type: ignore[no-untyped-def]
    res = cli(lab, "launch", "--yes")
    assert res.returncode == 0, res.stdout[-2000:] + res.stderr
    lab.fault(3, "host-down")
    try:
        deadline = time.monotonic() + 15        # the lab's watcher takes the links down within 0.3 s
        while lab.answers(3, wait=1.0):
            assert time.monotonic() < deadline, "rank 3's links still up 15 s after host-down"
        stop = cli(lab, "stop", "--yes", "--json")
        assert stop.returncode == 1, stop.stdout + stop.stderr
        data = json.loads(stop.stdout)
        by_rank = {o["rank"]: o for o in data["stopped"]}
        plan = {i["rank"]: i for i in data["plan"]}
        # the head may have died by itself when its worker's link went (then it is already exited)
        assert by_rank.get(0, {}).get("ok") or "already exited" in plan[0]["reason"], plan[0]
        assert by_rank[1]["ok"] and by_rank[2]["ok"]
        assert not by_rank[3]["ok"] and "NOT stopped" in by_rank[3]["message"]
    finally:
        lab.fault(3, "host-down", on=False)
    t0 = time.monotonic()
    while True:
        again = cli(lab, "stop", "--yes", "--json")
        if again.returncode == 0 or time.monotonic() - t0 > 90:
            break
        time.sleep(2)
    assert again.returncode == 0, again.stdout + again.stderr
    assert [o["rank"] for o in json.loads(again.stdout)["stopped"]] == [3]
    status = json.loads(cli(lab, "status", "--json").stdout)
    assert [r["condition"] for r in status["ranks"]][1:] == ["stopped"] * 3, status["ranks"]
