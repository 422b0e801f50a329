"""Preflight on a cluster this cockpit launched: its own running engine is not a finding (the checks it
changes pass as in use), while the same containers without the launch ledger's record are reported as
containers the cockpit did not start. One fresh demo cluster (a launch changes hosts for good)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from test_launch_demo import cli, prepare_hosts

from cockpit.hosts import Fleet
from cockpit.recipe.ledger import Ledger

ENGINE_CHECKS = ("clocks", "memory", "container", "ports")


@pytest.fixture(autouse=True)
def _state_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A launch ledger of the test's own; and the directory fresh_demo_cluster expects to exist."""
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    (tmp_path / "cluster").mkdir(exist_ok=True)


def by_check(doc: dict) -> dict[tuple[str, int], dict]:
    return {(r["check"], r["rank"]): r for r in doc["results"]}


async def test_preflight_after_launch_knows_its_own_engine(fresh_demo_cluster) -> None:
    sim = fresh_demo_cluster
    cfg = sim.config
    name = cfg.cluster.container_name
    async with Fleet(cfg) as fleet:
        assert await fleet.wait_connected(20)
        await prepare_hosts(fleet, cfg)
    launch = cli(sim, "launch", "--yes", "--json")
    assert launch.returncode == 0, launch.stdout[-3000:] + launch.stderr
    ledger = Ledger(cfg)
    ids = {rank: rec.container_id for rank, rec in ledger.records().items()}
    assert sorted(ids) == cfg.ranks and all(len(cid) == 64 for cid in ids.values())

    res = cli(sim, "preflight", "--json")
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr
    doc = json.loads(res.stdout)
    assert doc["ok"]
    got = by_check(doc)
    for check in ENGINE_CHECKS:
        ranks = [0] if check == "ports" else cfg.ranks
        for rank in ranks:
            r = got[(check, rank)]
            assert r["verdict"] == "pass", r
            assert r["value"] == f"in use by the running {name} ({ids[rank][:12]})", r
            assert "docker container inspect" in " ".join(r["commands"]), r
    assert not [r for r in doc["results"] if r["verdict"] != "pass"]

    text = cli(sim, "preflight")
    assert text.returncode == 0, text.stdout + text.stderr
    rows = {line.split()[1]: line for line in text.stdout.splitlines()[1:] if line.strip()
            and line.split()[0].isdigit()}
    for check in ENGINE_CHECKS:   # one row each: the ranks' short IDs differ, the finding does not
        assert f"in use by the running {name} (" in rows[check], text.stdout
    assert "0 failed" in text.stdout

    # the same running containers, but the ledger no longer records them: started by hand, as far as
    # this cockpit knows — reported as before, and named as not started by the cockpit
    ledger.path.write_text("{}\n")
    bare = cli(sim, "preflight", "--json")
    assert bare.returncode == 1, bare.stdout[-3000:] + bare.stderr
    got = by_check(json.loads(bare.stdout))
    for rank in cfg.ranks:
        c = got[("container", rank)]
        assert c["verdict"] == "fail" and c["value"].startswith(f"{name} exists: running"), c
        assert c["value"].endswith("not started by this cockpit") and "never removes" in c["remedy"], c
        assert got[("memory", rank)]["verdict"] == "fail"
        assert "in use by" not in got[("memory", rank)]["value"]
    ports = got[("ports", 0)]
    assert ports["verdict"] == "fail" and ports["value"].startswith("in use: "), ports
    human = cli(sim, "preflight", "--only", "container")
    assert human.returncode == 1 and "not started by this cockpit" in human.stdout, human.stdout
