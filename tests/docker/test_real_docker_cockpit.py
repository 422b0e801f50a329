"""The cockpit over SSH (a demo cluster) against a real Docker daemon on one host, and the same scenario
against the `docker` stand-in: launch, the ledger, replace and stop must come out the same.

Rank 3 is launched first, so it is the rank under test: its `docker` is the real CLI on the test daemon
when its host root holds `real-docker`, else the stand-in (`bin/docker` routes, see `route_docker`)."""

from __future__ import annotations

import shlex
from pathlib import Path

import pytest
import realdocker
from simcluster import SimCluster

from cockpit import constants as C
from cockpit.cli.status_cmd import status_text
from cockpit.config import ClusterConfig
from cockpit.envfile import env_for_rank
from cockpit.hosts import Fleet, Result, command
from cockpit.recipe import containers as dk
from cockpit.recipe import launch as L
from cockpit.recipe.ledger import Ledger
from cockpit.recipe.replace import execute_replace, plan_replace
from cockpit.recipe.status import cluster_status
from cockpit.recipe.stop import execute_stop, plan_stop

RANK = 3
BACKENDS = ["real", "stand-in"]


@pytest.fixture(autouse=True)
def _state_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A launch ledger and archive of the test's own; and the directory fresh_demo_cluster expects."""
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    (tmp_path / "cluster").mkdir(exist_ok=True)


def route_docker(cluster: SimCluster, real: realdocker.RealDocker, backend: str) -> None:
    """bin/docker: the real CLI on the test daemon for a host whose root holds `real-docker`, else the
    stand-in (moved to bin/docker-sim)."""
    ids = real.run("ps", "-aq").stdout.split()          # the test daemon is shared by a worker's tests
    if ids:
        real.run("rm", "-f", *ids)
    bin_dir = cluster.dir / "bin"
    (bin_dir / "docker").rename(bin_dir / "docker-sim")
    (bin_dir / "docker").write_text(
        "#!/bin/sh\n"
        'if [ -e "$R37_SIM_ROOT/real-docker" ]; then\n'
        f"  DOCKER_HOST={shlex.quote(real.host)} DOCKER_CONFIG={shlex.quote(str(real.dir / 'cli-config'))} "
        f'exec {shlex.quote(real.cli)} "$@"\n'
        "fi\n"
        f'exec {shlex.quote(str(bin_dir / "docker-sim"))} "$@"\n')
    (bin_dir / "docker").chmod(0o755)
    if backend == "real":
        (cluster.root(RANK) / "real-docker").touch()
        assert real.run("tag", realdocker.IMAGE, cluster.config.runtime.image_tag).returncode == 0


async def _ok(fleet: Fleet, rank: int, argv: list[str], cwd: str | None = None, input: str | None = None,
              timeout: float = 120) -> Result:
    res = await fleet[rank].run(command(argv, cwd=cwd), input=input, timeout=timeout)
    assert res.ok, (argv, res.stdout, res.stderr)
    return res


async def prepare_rank(fleet: Fleet, cfg: ClusterConfig, backend: str, node_sh: str | None = None) -> None:
    """Rank 3's recipe directory (the recipe's launcher, or `node_sh`), its cluster.env and, on the
    stand-in, the runtime image."""
    rdir = cfg.recipe_dir(RANK)
    await _ok(fleet, RANK, ["mkdir", "-p", rdir])
    await _ok(fleet, RANK, ["hf", "download", C.RECIPE_REPO, "--include", *C.RECIPE_INCLUDE,
                            "--local-dir", "."], cwd=rdir)
    await _ok(fleet, RANK, ["tee", "cluster.env"], cwd=rdir, input=env_for_rank(cfg, RANK))
    if node_sh is not None:
        await _ok(fleet, RANK, ["tee", "launch/node-test.sh"], cwd=rdir, input=node_sh)
        await _ok(fleet, RANK, ["mv", "launch/node-test.sh", "launch/node.sh"], cwd=rdir)
    if backend == "stand-in":
        await _ok(fleet, RANK, ["hf", "download", C.RECIPE_REPO, C.RUNTIME_ARCHIVE, "--local-dir", "."],
                  cwd=rdir)
        await _ok(fleet, RANK, ["docker", "load", "-i", C.RUNTIME_ARCHIVE], cwd=rdir)


@pytest.mark.parametrize("backend", BACKENDS)
async def test_failed_start_is_ours_created_and_replaceable(backend: str, real_docker, fresh_demo_cluster,
                                                            tmp_path: Path) -> None:
    """The recipe's launcher: `docker run -d --gpus all --device /dev/infiniband …` where neither exists
    (real: no NVIDIA runtime, no RDMA device here; stand-in: the no-nvidia-runtime fault). Docker creates
    the container, cannot start it, prints its ID and exits 125/127: the launch fails, the ledger records
    that ID (this cockpit made it), and `launch --replace-stopped`'s plan archives and removes it."""
    cluster = fresh_demo_cluster
    cfg = cluster.config
    name = cfg.cluster.container_name
    route_docker(cluster, real_docker, backend)
    if backend == "stand-in":
        cluster.fault(RANK, "no-nvidia-runtime")
    ledger = Ledger(cfg)
    async with Fleet(cfg) as fleet:
        assert await fleet.wait_connected(20)
        await prepare_rank(fleet, cfg, backend)
        launcher = L.Launcher(fleet, cfg, ledger=ledger, poll_interval=0.3)
        try:
            assert not await launcher.launch()
            tl = launcher.timeline[RANK]
        finally:
            await launcher.close()
        state = await L.inspect_container(fleet, RANK, name)
        assert state is not None and state.status == "created" and state.start_failed, state
        assert ledger.records()[RANK].container_id == state.id
        assert tl.owner == "cockpit" and tl.failure is not None and tl.failure.source == "launcher"
        assert f"docker created {name} ({state.short_id}) but could not start it" in tl.failure.cause
        assert "the container is created" in tl.failure.cause
        assert "--replace-stopped" in tl.failure.remedy
        assert [r for r in ledger.records()] == [RANK]          # later ranks were not launched

        # a later one-off look (`status`): the rank is failed, its container `created`, started by us
        report = await cluster_status(fleet, cfg, ledger)
        [rank3] = [r for r in report.ranks if r.rank == RANK]
        assert rank3.container is not None and rank3.container.status == "created"
        assert rank3.owner == "cockpit" and rank3.condition == "failed", rank3
        assert rank3.failure is not None and rank3.failure.label == "container created, never started"
        assert report.verdict.state == "down" and report.verdict.first_failed == RANK
        row = next(line for line in status_text(report, cfg).splitlines() if line.lstrip().startswith("3 "))
        assert " created " in row and " cockpit " in row and " FAILED " in row, row

        plan = await plan_replace(fleet, cfg, ledger)
        assert [(i.rank, i.action) for i in plan] == [(0, "none"), (1, "none"), (2, "none"),
                                                      (RANK, "replace")]
        assert "created but never started" in plan[RANK].reason
        outcomes = await execute_replace(fleet, cfg, plan, ledger, archive_root=tmp_path / "archive")
        assert [(o.rank, o.ok) for o in outcomes] == [(RANK, True)], outcomes
        assert outcomes[0].archive_path and Path(outcomes[0].archive_path).exists()
        ps = await _ok(fleet, RANK, dk.ps_argv(name))
        assert dk.ps_named(ps.stdout, name) is None


NODE_PID1 = """#!/usr/bin/env bash
# test launcher: the engine's stand-in is PID 1 without a SIGTERM handler (busybox or coreutils sleep)
set -euo pipefail
source "$2"
exec docker run -d --name "$CONTAINER_NAME" --network none "$IMAGE" sleep 1000
"""


@pytest.mark.parametrize("backend", BACKENDS)
async def test_stop_of_a_pid1_without_handler_is_a_stop_not_a_crash(backend: str, real_docker,
                                                                     fresh_demo_cluster) -> None:
    """`r37-cockpit stop` on a container whose PID 1 ignores SIGTERM: docker waits its timeout, then
    SIGKILL, exit 137. The cockpit says it stopped it (not OOM, not a crash) and `status` shows it stopped."""
    cluster = fresh_demo_cluster
    cfg = cluster.config
    route_docker(cluster, real_docker, backend)
    ledger = Ledger(cfg)
    async with Fleet(cfg) as fleet:
        assert await fleet.wait_connected(20)
        await prepare_rank(fleet, cfg, backend, NODE_PID1)
        launcher = L.Launcher(fleet, cfg, ledger=ledger, poll_interval=0.3)
        try:
            await launcher.launch()        # rank 3 runs; rank 2 has no launcher here, so the launch stops
        finally:
            await launcher.close()
        cid = ledger.records()[RANK].container_id
        plan = await plan_stop(fleet, cfg, ledger)
        assert [(i.rank, i.action) for i in plan if i.action == "stop"] == [(RANK, "stop")]
        outcomes = await execute_stop(fleet, plan, ledger)
        [out] = [o for o in outcomes if o.rank == RANK]
        assert out.ok and out.message.startswith(f"stopped {cid[:12]} (killed after "), out
        assert "the engine did not exit on SIGTERM" in out.message
        assert "exit 137" in out.message and "not a crash" in out.message
        state = await L.inspect_container(fleet, RANK, cid)
        assert state is not None and state.exit_code == 137 and not state.oom_killed
        report = await cluster_status(fleet, cfg, ledger)
        [rank3] = [r for r in report.ranks if r.rank == RANK]
        assert rank3.condition == "stopped" and rank3.failure is None and rank3.owner == "cockpit", rank3
        assert rank3.detail.startswith("killed after ") and "did not exit on SIGTERM" in rank3.detail


NODE_NO_ID = """#!/usr/bin/env bash
# test launcher: docker run's start fails and its stdout (the ID) is lost, as when the CLI exits before its
# goroutine printed it
set -uo pipefail
source "$2"
docker run -d --name "$CONTAINER_NAME" --network none --gpus all "$IMAGE" sleep 1000 >/dev/null
"""


@pytest.mark.parametrize("backend", BACKENDS)
async def test_failed_start_without_the_printed_id_is_still_ours(backend: str, real_docker,
                                                                 fresh_demo_cluster) -> None:
    """No ID on stdout, docker's error on stderr: the container of the name that this launch created (by
    the ledger's pending launch) is recorded; a container that was there before never is."""
    cluster = fresh_demo_cluster
    cfg = cluster.config
    name = cfg.cluster.container_name
    route_docker(cluster, real_docker, backend)
    if backend == "stand-in":
        cluster.fault(RANK, "no-nvidia-runtime")
    ledger = Ledger(cfg)
    async with Fleet(cfg) as fleet:
        assert await fleet.wait_connected(20)
        await prepare_rank(fleet, cfg, backend, NODE_NO_ID)
        launcher = L.Launcher(fleet, cfg, ledger=ledger, poll_interval=0.3)
        try:
            assert not await launcher.launch()
            tl = launcher.timeline[RANK]
        finally:
            await launcher.close()
        state = await L.inspect_container(fleet, RANK, name)
        assert state is not None and state.start_failed
        assert ledger.records()[RANK].container_id == state.id
        assert tl.failure is not None and "but could not start it" in tl.failure.cause
        assert not ledger.pending()

        # launched again over it: docker refuses the name (no container created), the old one stays ours
        # and nothing new is adopted
        again = L.Launcher(fleet, cfg, ledger=ledger, poll_interval=0.3)
        try:
            assert not await again.launch()
            tl = again.timeline[RANK]
        finally:
            await again.close()
        assert ledger.records()[RANK].container_id == state.id and not ledger.pending()
        assert tl.failure is not None and "but could not start it" not in tl.failure.cause
        assert "is already in use" in tl.failure.cause
