"""The real Docker daemon fixture (see realdocker.py): one private daemon per test worker, stopped at the
end of the session."""

from __future__ import annotations

import os
from collections.abc import Iterator

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
