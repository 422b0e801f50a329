"""A ready simulated engine (`serve-ready`) in a process of its own, for tests and benchmarks."""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

SOURCE_ROOT = Path(__file__).resolve().parents[3]  # the checkout holding `cockpit/`


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def spawn_ready(port: int, *extra: str, log: Path | None = None,
                cwd: Path | None = None) -> subprocess.Popen[bytes]:
    """`python -m cockpit.sim.engine serve-ready --port PORT --bind 127.0.0.1 EXTRA…`, output to `log`."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(SOURCE_ROOT),
                                                                     os.environ.get("PYTHONPATH")]))}
    out = log.open("wb") if log else subprocess.DEVNULL
    argv = [sys.executable, "-m", "cockpit.sim.engine", "serve-ready", "--port", str(port),
            "--bind", "127.0.0.1", *extra]
    try:
        return subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, env=env, cwd=cwd)
    finally:
        if log:
            out.close()  # type: ignore[union-attr]


def start_ready(log: Path, *extra: str, timeout: float = 15.0) -> tuple[subprocess.Popen[bytes], str]:
    """Spawn an engine and wait until `/health` answers 200; returns the process and its base URL."""
    port = free_port()
    proc = spawn_ready(port, *extra, log=log)
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and proc.poll() is None:
        try:
            with urllib.request.urlopen(url + "/health", timeout=1) as resp:
                if resp.status == 200:
                    return proc, url
        except (urllib.error.URLError, OSError):
            time.sleep(0.05)
    proc.kill()
    proc.wait()
    raise RuntimeError("engine did not come up: " + log.read_text(errors="replace")[-3000:])


@contextlib.contextmanager
def ready_engine(log: Path, *extra: str, timeout: float = 15.0) -> Iterator[str]:
    """`start_ready` as a context: yields the base URL; the engine is stopped (SIGTERM, then SIGKILL
    after 10 s) when the block ends."""
    proc, url = start_ready(log, *extra, timeout=timeout)
    try:
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
