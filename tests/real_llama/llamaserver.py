"""llama.cpp's real `llama-server` (built by scripts/llama.sh) serving the tiny GGUF of tinygguf.py: how it
is found, started (loopback only), waited for and stopped. The fixtures are in conftest.py."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path

HERE = Path(__file__).parent
SERVED = "tiny-llama"
CTX = 4096           # per slot (--kv-unified is not asked for: -c is split between the slots)
SLOTS = 2
BOOT_DEADLINE_S = 300.0      # a tiny model boots in a second or two on an idle machine; this one is shared
# one thread, two slots: the machine has 2 cores and is shared; no web UI; loopback only (--host)
SERVE_FLAGS = ("--alias", SERVED, "-c", str(CTX * SLOTS), "-np", str(SLOTS), "-t", "1", "-tb", "1",
               "--no-webui", "--seed", "1")


def llama_paths() -> tuple[Path, Path] | None:
    """(llama-server, the venv python with gguf) from scripts/llama.sh's exports; None to skip."""
    if os.environ.get("R37_NO_LLAMA") == "1":
        return None
    server, py = os.environ.get("R37_LLAMA_SERVER"), os.environ.get("R37_LLAMA_PYTHON")
    if not server or not py or not Path(server).is_file() or not Path(py).is_file():
        return None
    return Path(server), Path(py)


def tiny_gguf(py: Path, out: Path) -> Path:
    """Write the tiny model (well under a second) with the llama venv's python."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    subprocess.run([str(py), str(HERE / "tinygguf.py"), str(out)], check=True, timeout=300, env=env,
                   stdout=subprocess.DEVNULL)
    return out


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _status(url: str, timeout: float = 5.0) -> int:
    try:
        with urllib.request.urlopen(url, timeout=timeout) as r:
            return int(r.status)
    except urllib.error.HTTPError as e:
        return e.code


@dataclass
class LlamaServer:
    """One `llama-server` process: its URL and its log (stdout and stderr)."""

    proc: subprocess.Popen[bytes]
    port: int
    log_path: Path
    metrics: bool

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def log_text(self) -> str:
        return self.log_path.read_bytes().decode("utf-8", "replace")

    def stop(self, timeout: float = 30.0) -> None:
        if self.proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(30)


def start_server(binary: Path, model: Path, log_path: Path, *, metrics: bool) -> LlamaServer:
    port = free_port()
    log = log_path.open("wb")
    args = [str(binary), "-m", str(model), "--host", "127.0.0.1", "--port", str(port), *SERVE_FLAGS]
    if metrics:
        args.append("--metrics")
    proc = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                            cwd=log_path.parent, start_new_session=True)
    log.close()
    server = LlamaServer(proc, port, log_path, metrics)
    deadline = time.monotonic() + BOOT_DEADLINE_S
    while True:
        if proc.poll() is not None:
            tail = "\n".join(server.log_text().splitlines()[-40:])
            raise RuntimeError(f"llama-server exited with {proc.returncode} before /health answered:\n{tail}")
        with contextlib.suppress(OSError):
            if _status(server.url + "/health", 2.0) == 200:   # 503 while the model loads
                return server
        if time.monotonic() > deadline:
            server.stop(10)
            tail = "\n".join(server.log_text().splitlines()[-40:])
            raise RuntimeError(f"llama-server: no /health within {BOOT_DEADLINE_S:.0f} s:\n{tail}")
        time.sleep(0.3)
