"""Each sim fault preflight can see fails exactly the right check(s) on exactly the faulty rank, with a
remedy, and leaves every other check on every other rank passing."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from simcluster import SimCluster
from test_preflight_demo import provisioned_cluster, run

from cockpit.hosts import Fleet
from cockpit.recipe.checks import Verdict
from cockpit.sim.faults import set_fault

# fault -> (rank to break, checks that must fail there, words the remedy must contain)
FAULTS: dict[str, tuple[int, set[str], str]] = {
    "no-gpu": (1, {"gpu"}, "driver"),
    "docker-down": (2, {"docker"}, "systemctl start docker"),
    "no-nvidia-runtime": (3, {"nvidia-runtime"}, "nvidia-ctk runtime configure"),
    # two tools' views of the same port (rdma link state, ibv_devinfo port state)
    "rdma-port-down": (2, {"rdma-link", "ibv-port"}, "never changes networking"),
    "wrong-gid": (1, {"gid"}, "gid_index = 5"),
    "low-disk": (3, {"disk"}, "free space"),
    "low-memory": (0, {"memory"}, "free memory"),
    "slow-clocks": (2, {"clocks"}, "reboot"),
    "missing-shard": (1, {"checkpoint"}, "r37-cockpit setup checkpoint --rank 1"),
    "wrong-image-id": (3, {"image"}, "r37-cockpit setup runtime --rank 3"),
    "host-down": (2, {"ssh"}, "ssh"),
}
# the demo's disk is 512 MiB with budgets scaled to MiB: leave 1 MiB instead of the default 30 GB
PARAMS = {"low-disk": {"avail_bytes": 1 << 20}}


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SimCluster]:
    yield from provisioned_cluster(tmp_path_factory, "pf-faults")


async def _reload_image(sim: SimCluster, rank: int) -> None:
    """`docker load` again: the wrong-image-id fault acts when an archive is loaded."""
    cfg = sim.config
    async with Fleet(cfg) as fleet:
        assert await fleet.wait_connected(10)
        res = await fleet[rank].run(["docker", "load", "-i", f"{cfg.recipe_dir(rank)}/{cfg.runtime.archive}"])
        assert res.exit_status == 0, res.stderr


@pytest.mark.parametrize("fault", list(FAULTS))
async def test_fault_fails_the_right_check_on_the_right_rank(cluster: SimCluster, fault: str) -> None:
    rank, expected, remedy_words = FAULTS[fault]
    set_fault(cluster.root(rank), fault, True, PARAMS.get(fault))
    try:
        if fault == "wrong-image-id":
            await _reload_image(cluster, rank)
        final = await run(cluster.config, connect_timeout=4 if fault == "host-down" else None)
    finally:
        set_fault(cluster.root(rank), fault, False)
        if fault == "wrong-image-id":
            await _reload_image(cluster, rank)
    failed = {(r.check, r.rank) for r in final.results if r.verdict is Verdict.FAIL}
    assert failed == {(c, rank) for c in expected}
    assert not final.ok
    for r in final.results:
        if r.verdict is Verdict.FAIL:
            assert remedy_words in r.remedy, r
        elif r.rank != rank:
            assert r.verdict is Verdict.PASS, r
        else:   # the faulty rank's other checks pass, or cannot tell when what they read is broken
            assert r.verdict in (Verdict.PASS, Verdict.UNKNOWN), r
    if fault == "host-down":   # nothing read on the silent host; its fabric IP is judged from its peers
        assert {r.verdict for r in final.results
                if r.rank == rank and r.check not in ("ssh", "reach")} == {Verdict.UNKNOWN}
