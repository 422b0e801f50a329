"""Preflight against a real demo cluster over SSH: setup-less hosts fail with setup remedies, provisioned
hosts pass every check, filters and the headless command behave, and nothing on a host changes."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from simcluster import TEST_SPEED, SimCluster

from cockpit import constants as C
from cockpit.config import ClusterConfig
from cockpit.hosts import Fleet
from cockpit.recipe.checks import CheckResult, PreflightFinished, PreflightStarted, Verdict
from cockpit.recipe.preflight import CHECKS, preflight_results, run_preflight

SETUP_CHECKS = {"recipe", "checkpoint", "image", "engram"}


async def provision(fleet: Fleet, cfg: ClusterConfig) -> None:
    """Bring every host to the state setup leaves, with the recipe's own commands (recipe steps 2-5)."""

    async def one(rank: int) -> None:
        host, rdir, model = fleet[rank], cfg.recipe_dir(rank), cfg.model_path(rank)
        rev = ["--revision", cfg.model.revision] if cfg.model.revision else []
        steps = [
            ["hf", "download", cfg.runtime.recipe_repo, "--include", *C.RECIPE_INCLUDE, "--local-dir", rdir],
            ["hf", "download", cfg.model.repo, *rev, "--local-dir", model],
            ["hf", "download", cfg.runtime.recipe_repo, cfg.runtime.archive, "--local-dir", rdir],
            ["docker", "load", "-i", f"{rdir}/{cfg.runtime.archive}"],
        ]
        if rank != 0:
            steps.append(["python3", f"{rdir}/tools/prepare-engram.py", str(rank), model,
                          cfg.engram_path(rank)])
        for argv in steps:
            res = await host.run(argv, timeout=120)
            assert res.exit_status == 0, (rank, argv, res.stdout[-500:], res.stderr[-500:])

    assert await fleet.wait_connected(15)
    await asyncio.gather(*(one(r) for r in cfg.ranks))


def start_cluster(path: Path) -> SimCluster:
    from cockpit.sim import cluster
    path.mkdir(parents=True, exist_ok=True)
    return SimCluster(path, cluster.demo_up(path, speed=TEST_SPEED), "demo")


def provisioned_cluster(tmp_path_factory: pytest.TempPathFactory, name: str) -> Iterator[SimCluster]:
    """A demo cluster of the module's own, provisioned like `setup` would (host state changes for good)."""
    from cockpit.sim import cluster
    sim = start_cluster(tmp_path_factory.mktemp(name))
    try:
        cfg = sim.config

        async def go() -> None:
            async with Fleet(cfg) as fleet:
                await provision(fleet, cfg)

        asyncio.run(go())
        yield sim
    finally:
        cluster.down(sim.dir)


@pytest.fixture(scope="module")
def provisioned(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SimCluster]:
    yield from provisioned_cluster(tmp_path_factory, "pf-ok")


@pytest.fixture
def bare(tmp_path: Path) -> Iterator[SimCluster]:
    from cockpit.sim import cluster
    sim = start_cluster(tmp_path / "bare")
    try:
        yield sim
    finally:
        cluster.down(sim.dir)


async def run(cfg: ClusterConfig, **kwargs: object) -> PreflightFinished:
    async with Fleet(cfg) as fleet:
        return await preflight_results(fleet, cfg, **kwargs)


def verdicts(final: PreflightFinished) -> dict[tuple[str, int], Verdict]:
    return {(r.check, r.rank): r.verdict for r in final.results}


async def test_setup_less_hosts_fail_exactly_the_setup_checks(bare: SimCluster) -> None:
    final = await run(bare.config)
    failed = {k for k, v in verdicts(final).items() if v is Verdict.FAIL}
    expected = {(c, r) for c in SETUP_CHECKS for r in range(4) if (c, r) != ("engram", 0)}
    assert failed == expected
    assert not final.ok
    for r in final.results:
        if r.verdict is Verdict.FAIL:
            job = "runtime" if r.check == "image" else r.check
            assert f"r37-cockpit setup {job} --rank {r.rank}" in r.remedy
        else:
            assert r.verdict is Verdict.PASS, r


async def test_healthy_cluster_passes_every_check(provisioned: SimCluster) -> None:
    cfg = provisioned.config
    final = await run(cfg)
    bad = [r for r in final.results if r.verdict is not Verdict.PASS]
    assert bad == []
    expected = {(c.id, r) for c in CHECKS for r in cfg.ranks if c.applies(cfg, r)}
    assert set(verdicts(final)) == expected
    ckpt = {r.rank: r.value for r in final.results if r.check == "checkpoint"}
    assert all(f"{C.CHECKPOINT_SHARDS} shards" in v for v in ckpt.values())
    assert len({v.split("revision ")[1] for v in ckpt.values()}) == 1      # same revision everywhere


async def test_results_stream_per_host_then_comparisons(provisioned: SimCluster) -> None:
    cfg = provisioned.config
    events = []
    async with Fleet(cfg) as fleet:
        async for ev in run_preflight(fleet, cfg, only=["arch", "driver", "reach"]):
            events.append(ev)
    assert isinstance(events[0], PreflightStarted) and isinstance(events[-1], PreflightFinished)
    results = [e for e in events if isinstance(e, CheckResult)]
    arch = [e for e in results if e.check == "arch"]
    assert sorted(e.rank for e in arch) == [0, 1, 2, 3] and all(e.final for e in arch)
    drivers = [e for e in results if e.check == "driver"]
    assert [e.final for e in drivers].count(False) == 4 and [e.final for e in drivers].count(True) == 4
    first_final_driver = next(i for i, e in enumerate(results) if e.check == "driver" and e.final)
    assert all(results.index(e) < first_final_driver for e in arch)     # hosts streamed before comparing
    assert all(e.final for e in results if e.check == "reach")          # cross-host only: reported once


async def test_only_and_rank_filters(provisioned: SimCluster) -> None:
    final = await run(provisioned.config, only=["gid", "ports"], ranks=[2])
    assert verdicts(final) == {("gid", 2): Verdict.PASS}                # ports applies to rank 0 only
    gid = final.results[0]
    assert gid.commands and gid.commands[0].startswith("head -v -n 1 -- /sys/class/infiniband/")
    assert "RoCE v2" in gid.raw


def test_headless_preflight_json_and_exit_code(provisioned: SimCluster) -> None:
    cmd = [sys.executable, "-m", "cockpit", "--config", str(provisioned.config_path), "preflight"]
    res = subprocess.run([*cmd, "--json"], capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stderr
    doc = json.loads(res.stdout)
    assert doc["ok"] is True and {r["verdict"] for r in doc["results"]} == {"pass"}
    text = subprocess.run([*cmd, "--only", "arch,ports"], capture_output=True, text=True, timeout=120)
    assert text.returncode == 0
    assert "arch" in text.stdout and "0-3" in text.stdout and "aarch64" in text.stdout
    bad = subprocess.run([*cmd, "--only", "nope"], capture_output=True, text=True, timeout=60)
    assert bad.returncode == 2 and "unknown check id: nope" in bad.stderr and "Traceback" not in bad.stderr


async def test_preflight_changes_nothing_on_the_hosts(provisioned: SimCluster) -> None:
    def snapshot() -> dict[str, tuple[int, int]]:
        out = {}
        for p in sorted(provisioned.dir.joinpath("hosts").rglob("*")):
            if p.is_file() and "/run/" not in str(p) and "/sys/" not in str(p):
                st = p.stat()
                out[str(p)] = (st.st_size, st.st_mtime_ns)
        return out

    before = snapshot()
    final = await run(provisioned.config)
    assert final.ok
    assert snapshot() == before


async def test_pane_streams_groups_publishes_and_reruns(provisioned: SimCluster) -> None:
    from cockpit.tui.app import CockpitApp
    from cockpit.tui.context import PreflightSummary
    from cockpit.tui.dialogs import Detail
    from cockpit.tui.panes.preflight import PreflightPane

    app = CockpitApp(provisioned.config, provisioned.config_path)
    published: list[PreflightSummary] = []
    record = app.ctx.set_preflight

    def spy(results, *, running: bool) -> None:  # type: ignore[no-untyped-def]
        record(results, running=running)
        assert app.ctx.preflight is not None
        published.append(app.ctx.preflight)

    app.ctx.set_preflight = spy  # type: ignore[method-assign]
    async with app.run_test(size=(130, 40)) as pilot:
        await pilot.press("2")
        assert await app.fleet.wait_connected(15)
        await pilot.press("a")
        for _ in range(300):
            await pilot.pause(0.05)
            if published and published[-1].results and not published[-1].running:
                break
        summary = published[-1]
        assert summary.ok and summary.failed == () and published[0].running
        pane = app.query_one(PreflightPane)
        assert [r.check for r in pane.rows if r.ranks == (0, 1, 2, 3)][:3] == ["ssh", "arch", "gpu"]
        row = next(i for i, r in enumerate(pane.rows) if r.check == "gid")
        await pilot.press(*["down"] * row, "enter")
        await pilot.pause()
        assert isinstance(app.screen, Detail) and pane._selected().check == "gid"
        await pilot.press("escape")
        # break rank 1's GID and re-run only the selected check: only that row changes
        provisioned.fault(1, "wrong-gid")
        try:
            await pilot.press("c")
            for _ in range(300):
                await pilot.pause(0.05)
                if not published[-1].running and published[-1].failed:
                    break
        finally:
            provisioned.fault(1, "wrong-gid", on=False)
        assert published[-1].failed == (("gid", 1),)
        assert len(published[-1].results) == len(summary.results)
