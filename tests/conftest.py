"""Shared fixtures: the fixed snapshot config, and simulated clusters (demo without root, lab as root)."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from simcluster import TEST_SPEED, SimCluster, lab_available

from cockpit.config import ClusterConfig, load_config

FIXTURES = Path(__file__).parent / "fixtures"

# What makes a test slow: a simulated cluster, a real daemon or server. Those are left out of the quick tier
# (`./scripts/test --quick`, `-m "not cluster"`); CI runs everything.
CLUSTER_FIXTURES = {"demo_cluster", "fresh_demo_cluster", "lab_cluster", "real_docker", "real_vllm",
                    "llama_plain", "llama_metrics"}
CLUSTER_DIRS = {"integration", "lab", "docker", "real_vllm", "real_llama"}


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    here = Path(__file__).parent
    for item in items:
        try:
            top = item.path.relative_to(here).parts[0]
        except ValueError:
            top = ""
        if top in CLUSTER_DIRS or CLUSTER_FIXTURES & set(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.cluster)


@pytest.fixture(scope="session", autouse=True)
def private_state_dir(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """Tests never read or write the developer's own state (launch ledger, remembered theme) or config
    (their own theme files)."""
    state = tmp_path_factory.mktemp("xdg-state")
    dirs = {"XDG_STATE_HOME": state, "XDG_CONFIG_HOME": tmp_path_factory.mktemp("xdg-config")}
    old = {name: os.environ.get(name) for name in dirs}
    os.environ.update({name: str(path) for name, path in dirs.items()})
    yield state
    for name, value in old.items():
        if value is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = value


@pytest.fixture
def fixed_config() -> ClusterConfig:
    return load_config(FIXTURES / "cluster.toml")


def _demo(tmp: Path, speed: float) -> Iterator[SimCluster]:
    from cockpit.sim import cluster
    toml = cluster.demo_up(tmp, speed=speed)
    try:
        yield SimCluster(tmp, toml, "demo")
    finally:
        cluster.down(tmp)


@pytest.fixture(scope="session")
def demo_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SimCluster]:
    """One demo cluster for the session (tests must heal the faults they set)."""
    yield from _demo(tmp_path_factory.mktemp("demo"), TEST_SPEED)


@pytest.fixture
def fresh_demo_cluster(tmp_path: Path) -> Iterator[SimCluster]:
    """A demo cluster of the test's own, for tests that change host state for good."""
    yield from _demo(tmp_path / "cluster", TEST_SPEED)


@pytest.fixture(scope="session")
def lab_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SimCluster]:
    reason = lab_available()
    if reason:
        pytest.skip(reason)
    from cockpit.sim import cluster
    from cockpit.sim.lab import lab_up
    tmp = tmp_path_factory.mktemp("lab")
    toml = lab_up(tmp, speed=TEST_SPEED)
    try:
        yield SimCluster(tmp, toml, "lab")
    finally:
        cluster.down(tmp)
