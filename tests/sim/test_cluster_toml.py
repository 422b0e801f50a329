"""The cluster.toml that `sim up` writes is a valid config, tuned for the simulated engine."""

from __future__ import annotations

from pathlib import Path

from cockpit.config import load_config
from cockpit.sim import layout
from cockpit.sim.cluster import DEMO_HANG_AFTER_S, HostPlan, cluster_toml


def test_sim_cluster_toml_loads_with_the_demo_hang_threshold(tmp_path: Path) -> None:
    ips = [f"127.0.9.{10 + r}" for r in range(4)]
    plans = [HostPlan(r, "127.0.0.1", 2200 + r, "op", tmp_path / f"rank-{r}",
                      layout.HostSpec(rank=r, nranks=4, hostname=f"spark-{r}", mode="demo", fabric_ip=ips[r],
                                      peers=ips, api_bind=ips[r], srv_dir=f"/tmp/sim/rank-{r}/srv"))
             for r in range(4)]
    path = tmp_path / "cluster.toml"
    path.write_text(cluster_toml(tmp_path, plans, object(), per_host_paths=True, speed=45.0))
    cfg = load_config(path)
    assert cfg.engine.hang_after_s == DEMO_HANG_AFTER_S == 15.0
    assert [h.fabric_ip for h in cfg.hosts] == ips
