"""A simulated cluster as the tests see it (shared by fixtures and tests; import it as `simcluster`)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from cockpit.config import ClusterConfig, load_config

TEST_SPEED = 400.0  # boot a simulated engine in a few seconds


@dataclass
class SimCluster:
    dir: Path
    config_path: Path
    kind: str

    @property
    def config(self) -> ClusterConfig:
        return load_config(self.config_path)

    def root(self, rank: int) -> Path:
        from cockpit.sim.cluster import host_root
        return host_root(self.dir, rank)

    def fault(self, rank: int, name: str, on: bool = True) -> None:
        from cockpit.sim.faults import set_fault
        set_fault(self.root(rank), name, on)
