"""llama.cpp's real `llama-server` (scripts/llama.sh builds it from PyPI's llama-cpp-python sdist) serving a
tiny random-weight GGUF written at test time (tinygguf.py): the `--api-url` contract tests in this folder
read it with the cockpit's own CLI and readers.

- `R37_LLAMA_SERVER` and `R37_LLAMA_PYTHON` (exported by scripts/test) name the binary and the venv with
  `gguf`; without them (or with R37_NO_LLAMA=1) every test here is skipped with the reason.
- Two servers per run, both on 127.0.0.1 only: one without `--metrics` (its /metrics answers 501), one with.
- Every test here carries `xdist_group("real_llama")`, so a run with `--dist loadgroup` keeps them in one
  worker and the servers are started once.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from llamaserver import HERE, LlamaServer, llama_paths, start_server, tiny_gguf

TEST_TIMEOUT_S = 900   # bench runs long on a loaded machine


@pytest.hookimpl(tryfirst=True)    # before xdist's own hook reads the xdist_group marks
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    skip = None if llama_paths() else pytest.mark.skip(
        reason="llama-server not built: ./scripts/test builds it (scripts/llama.sh) and exports "
               "R37_LLAMA_SERVER and R37_LLAMA_PYTHON (R37_NO_LLAMA=1 skips it)")
    for item in items:
        if HERE not in Path(str(item.fspath)).parents:
            continue
        item.add_marker(pytest.mark.xdist_group("real_llama"))
        item.add_marker(pytest.mark.real_llama)
        item.add_marker(pytest.mark.timeout(TEST_TIMEOUT_S))
        if skip is not None:
            item.add_marker(skip)


@pytest.fixture(scope="session")
def llama_bin() -> tuple[Path, Path]:
    paths = llama_paths()
    if paths is None:
        pytest.skip("llama-server not built (R37_LLAMA_SERVER unset or R37_NO_LLAMA=1)")
    return paths


@pytest.fixture(scope="session")
def tiny_model(llama_bin: tuple[Path, Path], tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tiny_gguf(llama_bin[1], tmp_path_factory.mktemp("tiny-gguf") / "tiny.gguf")


def _serve(llama_bin: tuple[Path, Path], model: Path, tmp: Path, metrics: bool) -> Iterator[LlamaServer]:
    server = start_server(llama_bin[0], model, tmp / "llama-server.log", metrics=metrics)
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="session")
def llama_plain(llama_bin: tuple[Path, Path], tiny_model: Path,
                tmp_path_factory: pytest.TempPathFactory) -> Iterator[LlamaServer]:
    """llama-server as started by default: no `--metrics` (its /metrics answers HTTP 501)."""
    yield from _serve(llama_bin, tiny_model, tmp_path_factory.mktemp("llama-plain"), False)


@pytest.fixture(scope="session")
def llama_metrics(llama_bin: tuple[Path, Path], tiny_model: Path,
                  tmp_path_factory: pytest.TempPathFactory) -> Iterator[LlamaServer]:
    """llama-server with `--metrics` (llama.cpp's `llamacpp:*` families)."""
    yield from _serve(llama_bin, tiny_model, tmp_path_factory.mktemp("llama-metrics"), True)
