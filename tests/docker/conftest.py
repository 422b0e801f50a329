"""The real Docker daemon fixture (see realdocker.py): one private daemon per test worker, stopped at the
end of the session."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import realdocker


@pytest.fixture(scope="session")
def real_docker() -> Iterator[realdocker.RealDocker]:
    why = realdocker.unavailable()
    if why:
        if os.environ.get("R37_REQUIRE_DOCKER") == "1":
            pytest.fail(f"R37_REQUIRE_DOCKER=1 but {why}")
        pytest.skip(why)
    try:
        dk = realdocker.start()
    except RuntimeError as exc:
        if os.environ.get("R37_REQUIRE_DOCKER") == "1":
            pytest.fail(str(exc))
        pytest.skip(str(exc))
    try:
        yield dk
    finally:
        realdocker.stop(dk)


# The docker stand-in on a simulated host (the same helper the stand-in's own tests use)
sys.path.insert(0, str(Path(__file__).parent.parent / "sim"))
from test_tools_formats import ToolHost, make_host  # noqa: E402


@pytest.fixture
def standin(tmp_path: Path) -> ToolHost:
    """A simulated host whose `docker` is the stand-in, the R37 runtime image loaded."""
    from cockpit import constants as C
    from cockpit.sim.hub import build_hub
    hub_dir = tmp_path / "hub"
    build_hub(hub_dir)
    h = make_host(tmp_path, hub_dir)
    h.sh(f"hf download {C.RECIPE_REPO} {C.RUNTIME_ARCHIVE} --local-dir r37", check=True)
    h.sh(f"docker load -i r37/{C.RUNTIME_ARCHIVE}", check=True)
    return h
