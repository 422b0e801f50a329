"""The real vLLM (PyPI's CPU build, in its own environment made by scripts/vllm-venv.sh) serving a tiny
local model, once per test run: the contract tests in this folder read it with the cockpit's own code.

- `R37_VLLM_PYTHON` (exported by scripts/test) names that environment's python; without it (or with
  R37_NO_VLLM=1) every test here is skipped with the reason.
- The model is built once per machine into a cache folder keyed by the hash of tinymodel.py (a file lock
  keeps two pytest workers from building it at once).
- Every test here carries `xdist_group("real_vllm")`: with scripts/test's `--dist loadgroup` they all run
  in one worker, so one server serves them all. Tests marked `ends_server` (SIGTERM) run last in it.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from vllmserver import HERE, VllmServer, start_server, tiny_model, vllm_python

TEST_TIMEOUT_S = 1800   # the first test waits for the boot; bench and smoke run long on a loaded machine


@pytest.hookimpl(tryfirst=True)    # before xdist's own hook reads the xdist_group marks
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    here = [i for i in items if HERE in Path(str(i.fspath)).parents]
    skip = None if vllm_python() else pytest.mark.skip(
        reason="real vLLM not installed: ./scripts/test installs it and exports R37_VLLM_PYTHON "
               "(R37_NO_VLLM=1 skips it)")
    for item in here:
        item.add_marker(pytest.mark.xdist_group("real_vllm"))
        item.add_marker(pytest.mark.real_vllm)
        item.add_marker(pytest.mark.timeout(TEST_TIMEOUT_S))
        if skip is not None:
            item.add_marker(skip)
    # the tests that stop the shared server run after every other test of this folder
    last = [i for i in here if i.get_closest_marker("ends_server")]
    if last:
        rest = [i for i in items if i not in last]
        items[:] = rest + last


@pytest.fixture(scope="session")
def vllm_py() -> Path:
    py = vllm_python()
    if py is None:
        pytest.skip("real vLLM not installed (R37_VLLM_PYTHON unset or R37_NO_VLLM=1)")
    return py


@pytest.fixture(scope="session")
def tiny_model_dir(vllm_py: Path) -> Path:
    return tiny_model(vllm_py)


@pytest.fixture(scope="session")
def real_vllm(vllm_py: Path, tiny_model_dir: Path,
              tmp_path_factory: pytest.TempPathFactory) -> Iterator[VllmServer]:
    """The shared server (one per run: the tests here share a worker, see the module doc).

    For work on these tests: R37_VLLM_URL=http://127.0.0.1:PORT and R37_VLLM_LOG=FILE use a server already
    running (started with conftest's SERVE_FLAGS, SERVE_ENV and a low open-files limit); the tests that
    stop the server are then skipped."""
    if os.environ.get("R37_VLLM_URL") and os.environ.get("R37_VLLM_LOG"):
        port = int(os.environ["R37_VLLM_URL"].rsplit(":", 1)[1].rstrip("/"))
        yield VllmServer(None, port, Path(os.environ["R37_VLLM_LOG"]), tiny_model_dir)
        return
    log_path = tmp_path_factory.mktemp("real-vllm") / "vllm-serve.log"
    server = start_server(vllm_py, tiny_model_dir, log_path)
    try:
        yield server
    finally:
        # the process group: EngineCore and its workers go with the API server
        if server.alive() and server.proc is not None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(server.proc.pid, signal.SIGTERM)
            try:
                server.proc.wait(60)
            except subprocess.TimeoutExpired:
                os.killpg(server.proc.pid, signal.SIGKILL)
                server.proc.wait(30)
