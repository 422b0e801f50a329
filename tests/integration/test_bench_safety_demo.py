"""The recipe's safety rules hold for the benchmarks in `perf/` too (issue 22, item 9): a benchmark
refuses hosts `sim up` did not make and a cluster with an engine container, and removes only the containers
whose IDs it created — never one by name, never with `rm -f`."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest
from test_launch_demo import cli, prepare_hosts

from cockpit.hosts import Fleet
from cockpit.recipe import containers as dk
from cockpit.recipe.launch import inspect_container

ROOT = Path(__file__).parents[2]
sys.path.insert(0, str(ROOT / "perf"))

import flood  # noqa: E402


@pytest.fixture(autouse=True)
def _state_dir(tmp_path, monkeypatch: pytest.MonkeyPatch) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))


def test_a_benchmark_refuses_hosts_the_sim_did_not_make(tmp_path: Path) -> None:
    (tmp_path / "cluster.toml").write_text((ROOT / "cluster.toml.example").read_text())
    with pytest.raises(SystemExit, match="not a simulated cluster"):
        flood.require_sim(tmp_path)


async def test_flood_refuses_a_serving_cluster_and_removes_nothing(fresh_demo_cluster) -> None:
    cfg = fresh_demo_cluster.config
    async with Fleet(cfg) as fleet:
        assert await fleet.wait_connected(20)
        await prepare_hosts(fleet, cfg)
    res = cli(fresh_demo_cluster, "launch", "--yes", "--json")
    assert res.returncode == 0, res.stdout[-2000:]
    flood.require_sim(fresh_demo_cluster.dir)                 # a simulated cluster: allowed ...
    created: dict[int, str] = {}
    with pytest.raises(SystemExit, match="exists on ranks"):  # ... but not while the engine is there
        await flood.flood_containers(cfg, True, 10, 5, created)
    assert created == {}
    await flood.flood_containers(cfg, False, 10, 5, created)   # the cleanup: nothing of its own to remove
    async with Fleet(cfg) as fleet:
        assert await fleet.wait_connected(20)
        for rank in cfg.ranks:
            state = await inspect_container(fleet, rank, cfg.cluster.container_name)
            assert state is not None and state.running, rank


def test_no_program_removes_a_container_by_name_or_by_force() -> None:
    """`docker rm` appears only through `containers.rm_argv` (a full 64-hex ID, no -f)."""
    pattern = re.compile(r"""["']docker["']\s*,\s*["']rm["']""")
    offenders = []
    for path in [*ROOT.joinpath("cockpit").rglob("*.py"), *ROOT.joinpath("bench").rglob("*.py"),
                 *ROOT.joinpath("scripts").rglob("*.py")]:
        if "sim" in path.relative_to(ROOT).parts:
            continue                                   # the stand-in docker itself
        text = path.read_text()
        for m in pattern.finditer(text):
            line = text[:m.start()].count("\n") + 1
            offenders.append(f"{path.relative_to(ROOT)}:{line}")
    assert offenders == ["cockpit/recipe/containers.py:" + str(_rm_argv_line())], offenders
    with pytest.raises(ValueError):
        dk.rm_argv("ds41_r37")


def _rm_argv_line() -> int:
    text = (ROOT / "cockpit" / "recipe" / "containers.py").read_text()
    m = re.search(r"""["']docker["']\s*,\s*["']rm["']""", text)
    assert m is not None
    return text[:m.start()].count("\n") + 1
