"""The real vLLM server the tests in this folder share: how it is started, read and stopped (the
fixtures are in conftest.py)."""

from __future__ import annotations

import contextlib
import os
import resource
import signal
import socket
import subprocess
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

HERE = Path(__file__).parent
SERVED = "deepseek-v4.1-flash"
BOOT_DEADLINE_S = 900.0      # generous: ~2 min on an idle 2-core machine, much more when it is loaded
# no tool-call flags: 0.32 then refuses any tool_choice but none with a 400 (the remedy tests read it); the
# tool-call deltas are read from a capture of a server with them (tests/api/test_api_real_vllm_samples.py)
SERVE_FLAGS = ("--dtype", "float32", "--max-model-len", "2048", "--max-num-seqs", "8",
               "--reasoning-parser", "deepseek_v3")
SERVE_ENV = {"VLLM_CPU_KVCACHE_SPACE": "1", "VLLM_CPU_OMP_THREADS_BIND": "nobind",
             "VLLM_LOG_STATS_INTERVAL": "2"}


def vllm_python() -> Path | None:
    if os.environ.get("R37_NO_VLLM") == "1":
        return None
    py = os.environ.get("R37_VLLM_PYTHON")
    return Path(py) if py and Path(py).is_file() else None


def tiny_model(py: Path) -> Path:
    """The tiny model's folder, built on first use (cached by the builder's hash): the same builder and
    cache `sim up --engine vllm` uses (cockpit/sim/realvllm.py)."""
    from cockpit.sim.realvllm import tiny_model as build
    return build(py)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _get(url: str, timeout: float = 5.0) -> tuple[int, bytes]:
    try:
        with urllib.request.urlopen(url, timeout=timeout) as r:
            return r.status, r.read()
    except urllib.error.HTTPError as e:
        return e.code, e.read()


@dataclass
class VllmServer:
    """One `vllm serve` process: its URL, its log file (stdout and stderr), when it started."""

    proc: subprocess.Popen[bytes] | None      # None: a server this run did not start (R37_VLLM_URL)
    port: int
    log_path: Path
    model: Path
    boot_s: float = 0.0
    timings: dict[str, float] = field(default_factory=dict)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def log_text(self) -> str:
        return self.log_path.read_bytes().decode("utf-8", "replace")

    def log_lines(self) -> list[str]:
        return self.log_text().splitlines()

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def wait_log(self, text: str, deadline_s: float = 120.0, after: int = 0) -> bool:
        end = time.monotonic() + deadline_s
        while time.monotonic() < end:
            if text in self.log_text()[after:]:
                return True
            time.sleep(0.2)
        return False

    def stop(self, timeout: float = 60.0) -> int | None:
        """SIGTERM, then wait (SIGKILL only if it is still there after `timeout`); the exit code."""
        if self.proc is None:
            return None
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                return self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(30)
                return None
        return self.proc.returncode


LOW_NOFILE = 20000


def _low_nofile() -> None:
    """The open-files limit a default Docker host gives (below vLLM's wish of 65535, which it cannot
    raise): vLLM then logs its "Found ulimit … Too many open files" WARNING, which the tests read."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    low = min(LOW_NOFILE, hard) if hard != resource.RLIM_INFINITY else LOW_NOFILE
    resource.setrlimit(resource.RLIMIT_NOFILE, (min(soft, low), low))


def start_server(py: Path, model: Path, log_path: Path, extra: tuple[str, ...] = ()) -> VllmServer:
    port = free_port()
    vllm = py.parent / "vllm"
    env = {**os.environ, **SERVE_ENV}
    env.pop("PYTHONPATH", None)
    log = log_path.open("wb")
    t0 = time.monotonic()
    proc = subprocess.Popen(
        [str(vllm), "serve", str(model), "--host", "127.0.0.1", "--port", str(port),
         "--served-model-name", SERVED, *SERVE_FLAGS, *extra],
        stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env, cwd=log_path.parent,
        start_new_session=True, preexec_fn=_low_nofile)
    log.close()
    server = VllmServer(proc, port, log_path, model)
    deadline = t0 + BOOT_DEADLINE_S
    while True:
        if proc.poll() is not None:
            tail = "\n".join(server.log_lines()[-40:])
            raise RuntimeError(f"vllm serve exited with {proc.returncode} before /health answered:\n{tail}")
        with contextlib.suppress(OSError):
            if _get(server.url + "/health", 2.0)[0] == 200:
                break
        if time.monotonic() > deadline:
            server.stop(10)
            tail = "\n".join(server.log_lines()[-40:])
            raise RuntimeError(f"vllm serve: no /health within {BOOT_DEADLINE_S:.0f} s:\n{tail}")
        time.sleep(0.5)
    server.boot_s = time.monotonic() - t0
    return server


