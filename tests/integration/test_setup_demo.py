"""Setup jobs against a real demo cluster over SSH: from empty hosts to a passing preflight, a failure on one
host (wrong image ID) that leaves the others running and resumes after the fault is healed, and the
refusals (Engram destination not empty, a different cluster.env) in the library and the headless command."""

from __future__ import annotations

import json
import re
import subprocess
import sys

from simcluster import SimCluster

from cockpit.config import ClusterConfig
from cockpit.envfile import env_for_rank
from cockpit.hosts import Fleet
from cockpit.recipe.preflight import preflight_results
from cockpit.recipe.setup import SetupRun, expand_jobs, plan_setup
from cockpit.recipe.setup_model import (
    JobLog,
    RankState,
    SetupEvent,
    SetupFinished,
    SetupPlan,
    StepProgress,
)


async def run_plan(fleet: Fleet, plan: SetupPlan) -> tuple[SetupFinished, list[SetupEvent]]:
    events = [ev async for ev in SetupRun(fleet, plan).events()]
    final = events[-1]
    assert isinstance(final, SetupFinished)
    return final, events


def states(final: SetupFinished) -> dict[tuple[str, int], RankState]:
    return {(o.job, o.rank): o.state for o in final.outcomes}


def cli(sim: SimCluster, *args: str, stdin: str = "") -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "cockpit", "--config", str(sim.config_path), "setup", *args],
                          input=stdin, capture_output=True, text=True, timeout=120)


async def test_empty_hosts_to_passing_preflight_with_a_failed_rank_resumed(
        fresh_demo_cluster: SimCluster) -> None:
    sim = fresh_demo_cluster
    cfg: ClusterConfig = sim.config
    sim.fault(2, "wrong-image-id")
    async with Fleet(cfg) as fleet:
        plan = await plan_setup(fleet, cfg, expand_jobs("all"))
        lines = [line for _, line in plan.commands()]
        for r in cfg.ranks:
            rev = ["--revision", cfg.model.revision]
            assert any(line.startswith(f"hf download {cfg.model.repo} {' '.join(rev)} --local-dir "
                                       f"{cfg.model_path(r)}") for line in lines)
        assert not any("prepare-engram.py 0 " in line for line in lines)   # workers only
        final, events = await run_plan(fleet, plan)
        got = states(final)
        # rank 2 refuses the image and skips its later jobs; every other rank completes everything
        assert got[("runtime", 2)] is RankState.FAILED
        why = next(o.message for o in final.outcomes if (o.job, o.rank) == ("runtime", 2))
        assert "image ID mismatch: its ID is sha256:" in why and "not the verified R37 image" in why
        assert got[("engram", 2)] is RankState.SKIPPED and got[("env", 2)] is RankState.SKIPPED
        for (job, rank), state in got.items():
            if rank != 2 and not (job == "engram" and rank == 0):
                assert state is RankState.DONE, (job, rank, state)
        # shown as "done: 3 steps, last: …" (the state names it once, never "done: done (…)")
        assert all(re.fullmatch(r"\d+ steps?, last: .+", o.message) for o in final.outcomes
                   if o.state is RankState.DONE), [o.message for o in final.outcomes]
        assert got[("engram", 0)] is RankState.SKIPPED
        assert any(isinstance(e, StepProgress) and e.progress.files_total for e in events)
        assert any(isinstance(e, JobLog) and "prepare-engram: done" in e.text for e in events)
        du = [e for e in events if isinstance(e, JobLog) and e.rank == 1 and e.job == "engram"]
        assert any(e.text.split()[-1] == cfg.engram_path(1) for e in du)   # du -h output in the log
        assert not final.ok

        sim.fault(2, "wrong-image-id", on=False)
        again = await plan_setup(fleet, cfg, expand_jobs("all"))
        runtime = next(jp for jp in again.jobs if jp.job == "runtime")
        assert {r for r, rp in runtime.ranks.items() if rp.steps} == {2}   # loaded images are not reloaded
        assert "expected" in runtime.ranks[2].note
        engram = next(jp for jp in again.jobs if jp.job == "engram")
        assert {r for r, rp in engram.ranks.items() if rp.steps} == {2}
        final2, _ = await run_plan(fleet, again)
        assert final2.ok, [o for o in final2.outcomes if not o.ok]

        pf = await preflight_results(fleet, cfg)
        assert [r for r in pf.results if r.verdict != "pass"] == []
        marker = await fleet[1].run(["cat", "--", f"{cfg.model_path(1)}/.r37-revision"])
        assert json.loads(marker.stdout) == {"repo": cfg.model.repo, "revision": cfg.model.revision}
        env = await fleet[3].run(["cat", "--", f"{cfg.recipe_dir(3)}/cluster.env"])
        assert env.stdout == env_for_rank(cfg, 3)

        third = await plan_setup(fleet, cfg, ["runtime", "engram", "env"])
        assert not third.runs_anything                     # everything complete: nothing to do


async def test_refusals_engram_not_empty_and_env_differs(fresh_demo_cluster: SimCluster) -> None:
    sim = fresh_demo_cluster
    cfg = sim.config
    async with Fleet(cfg) as fleet:
        assert await fleet.wait_connected(15)
        eng = cfg.engram_path(1)
        await fleet[1].run(["mkdir", "-p", eng])
        await fleet[1].run(["touch", f"{eng}/model-00047-of-00048.safetensors.partial"])
        rdir = cfg.recipe_dir(3)
        await fleet[3].run(["mkdir", "-p", rdir])
        res = await fleet[3].run(["tee", f"{rdir}/cluster.env"], input="IB_GID_INDEX='5'\n")
        assert res.ok

        plan = await plan_setup(fleet, cfg, ["engram", "env"])
        engram, env = plan.jobs
        assert "is not empty" in engram.ranks[1].refused and "never overwritten" in engram.ranks[1].refused
        assert engram.ranks[2].steps and engram.ranks[3].steps
        assert "--overwrite-env" in env.ranks[3].refused
        assert "-IB_GID_INDEX='5'" in env.ranks[3].note and "+IB_GID_INDEX=3" in env.ranks[3].note
        assert [s.label for s in env.ranks[0].steps] == ["mkdir", "write"]
        final, _ = await run_plan(fleet, SetupPlan((engram,), plan.targets))
        got = states(final)
        assert got[("engram", 1)] is RankState.REFUSED
        # no recipe on these hosts yet: the helper is missing, and the cause says so
        why = {o.rank: o.message for o in final.outcomes}
        assert got[("engram", 2)] is RankState.FAILED and "prepare-engram" in why[2]
        final, _ = await run_plan(fleet, SetupPlan((env,), plan.targets))
        got = states(final)
        assert got[("env", 3)] is RankState.REFUSED and got[("env", 0)] is RankState.DONE
        still = await fleet[3].run(["cat", "--", f"{rdir}/cluster.env"])
        assert still.stdout == "IB_GID_INDEX='5'\n"           # never replaced without the explicit flag
        left = await fleet[1].run(["ls", "-A", "--", eng])
        assert left.stdout.split() == ["model-00047-of-00048.safetensors.partial"]

    no = cli(sim, "env", "--rank", "3", "--yes")
    assert no.returncode == 3                 # refused by a guard: the exit-code table's "refused"
    assert "rank 3" in no.stdout and "differs from cluster.toml" in no.stdout
    assert "+IB_GID_INDEX=3" in no.stdout
    # the refusal quotes the command that replaces it, with the --config this command was given
    assert f"`r37-cockpit --config {sim.config_path} setup env --rank 3 --overwrite-env`" \
        in no.stdout, no.stdout
    declined = cli(sim, "env", "--rank", "3", "--overwrite-env", stdin="n\n")
    assert declined.returncode == 3 and "nothing was run" in declined.stdout
    silent = cli(sim, "env", "--rank", "3", "--overwrite-env")      # no answer on stdin: not confirmed
    assert silent.returncode == 3 and "add --yes" in silent.stdout
    bad = cli(sim, "env", "--rank", "7", "--yes")
    assert bad.returncode == 2 and "no host has rank 7" in bad.stderr
    yes = cli(sim, "env", "--rank", "3", "--overwrite-env", "--json", stdin="y\n")
    assert yes.returncode == 0, yes.stdout + yes.stderr
    doc = json.loads(yes.stdout)
    assert doc["ok"] and [o["state"] for o in doc["outcomes"]] == ["done"]
    async with Fleet(cfg) as fleet:
        assert await fleet.wait_connected(15)
        now = await fleet[3].run(["cat", "--", f"{cfg.recipe_dir(3)}/cluster.env"])
        assert now.stdout == env_for_rank(cfg, 3)
        noop = await plan_setup(fleet, cfg, ["env"], ranks=[3])
        assert "identical" in noop.jobs[0].ranks[3].done
