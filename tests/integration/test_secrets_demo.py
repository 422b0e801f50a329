"""Planted secrets never land in a file: an HF token and an API key are planted (the cockpit's environment,
a cluster.env offered to `config import-env`, the userinfo of `chat --api-url`), a whole demo flow runs with
isolated HOME and XDG directories (setup, launch, logs saved to a file, chat saved to a file, config
export-env, stop, the replace path that archives logs), then every file under those directories and under
the cluster directory (the hosts' files, what the cockpit wrote there) is searched: no planted string may
appear, nor in anything the commands printed.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from simcluster import SimCluster

HF_TOKEN = "hf_PLANTEDr37secretTOKEN0123456789abcd"
API_KEY = "sk-PLANTEDr37secretKEY0123456789abcdef"
PLANTED = (HF_TOKEN, API_KEY, "PLANTEDr37secret")


@pytest.fixture
def isolated(tmp_path: Path) -> dict[str, str]:
    """The environment of every command: its own HOME and XDG dirs, the planted secrets set."""
    dirs = {name: tmp_path / name.lower() for name in ("HOME", "XDG_STATE_HOME", "XDG_CONFIG_HOME",
                                                        "XDG_DATA_HOME", "XDG_CACHE_HOME")}
    for d in dirs.values():
        d.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith("XDG_")}
    env.update({k: str(v) for k, v in dirs.items()})
    env.update(HF_TOKEN=HF_TOKEN, HUGGING_FACE_HUB_TOKEN=HF_TOKEN, OPENAI_API_KEY=API_KEY,
               R37_API_KEY=API_KEY)
    return env


@pytest.fixture
def cluster(fresh_demo_cluster: SimCluster, isolated: dict[str, str]) -> Iterator[SimCluster]:
    yield fresh_demo_cluster


class Flow:
    def __init__(self, sim: SimCluster, env: dict[str, str]):
        self.sim, self.env = sim, env
        self.outputs: list[tuple[str, str]] = []

    def cli(self, *args: str, ok: tuple[int, ...] = (0,), timeout: float = 300,
            config: bool = True) -> subprocess.CompletedProcess[str]:
        argv = [sys.executable, "-m", "cockpit", *(["--config", str(self.sim.config_path)] if config else []),
                *args]
        res = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, env=self.env,
                             cwd=self.env["HOME"], stdin=subprocess.DEVNULL)
        self.outputs.append((" ".join(args), res.stdout + res.stderr))
        assert res.returncode in ok, (args, res.returncode, res.stdout[-3000:], res.stderr[-3000:])
        return res


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _tunnel(sim: SimCluster, api_port: int) -> tuple[subprocess.Popen[bytes], int]:
    """A plain OpenSSH forward to rank 0's API, for `chat --api-url` (the gateway path)."""
    port = _free_port()
    proc = subprocess.Popen(["ssh", "-F", str(sim.dir / "ssh_config"), "-N", "-o", "ExitOnForwardFailure=yes",
                             "-L", f"127.0.0.1:{port}:127.0.0.1:{api_port}", "spark-0"],
                            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return proc, port
        except OSError:
            time.sleep(0.2)
    proc.kill()
    raise AssertionError("the ssh -L tunnel did not come up")


def _files_with_secrets(roots: list[Path]) -> list[str]:
    found = []
    for root in roots:
        for path in root.rglob("*"):
            if path.is_symlink() or not path.is_file():
                continue
            try:
                data = path.read_bytes()
            except OSError:
                continue
            for secret in PLANTED:
                if secret.encode() in data:
                    found.append(f"{path}: {secret}")
    return found


def test_planted_secrets_never_reach_a_file(cluster: SimCluster, isolated: dict[str, str]) -> None:
    flow = Flow(cluster, isolated)
    home = Path(isolated["HOME"])
    cfg = cluster.config

    # a cluster.env that carries a token: import refuses the unknown variable without echoing its value
    env_file = home / "planted.env"
    env_file.write_text(f"HF_TOKEN={HF_TOKEN}\n")
    flow.cli("config", "import-env", str(env_file), "--out", str(home / "imported.toml"), ok=(0, 1, 2),
             config=False)
    env_file.unlink()   # the planted input itself is ours, not something the cockpit wrote

    flow.cli("setup", "all", "--yes", timeout=600)
    flow.cli("launch", "--yes", timeout=600)
    logs = flow.cli("logs", timeout=120)
    (home / "logs.txt").write_text(logs.stdout)
    tunnel, port = _tunnel(cluster, cfg.cluster.api_port)
    try:   # the gateway path (no credentials in the URL: see the test below for those)
        chat = flow.cli("chat", "Say hello.", "--api-url", f"http://127.0.0.1:{port}", "--max-tokens", "32",
                        "--no-thinking", "--json", config=False, timeout=120)
        (home / "chat-gateway.json").write_text(chat.stdout)
        assert json.loads(chat.stdout)["text"]
    finally:
        tunnel.kill()
        tunnel.wait()
    chat = flow.cli("chat", "Say hello.", "--max-tokens", "32", "--json", timeout=120)
    (home / "chat.json").write_text(chat.stdout)
    flow.cli("config", "export-env", "--rank", "1", "--out", str(home / "exported.env"))
    flow.cli("status", "--json", ok=(0, 1, 3))
    flow.cli("stop", "--yes", timeout=300)
    flow.cli("launch", "--yes", "--replace-stopped", timeout=600)   # archives the stopped ones' logs
    flow.cli("stop", "--yes", timeout=300)

    state = Path(isolated["XDG_STATE_HOME"])
    assert any(state.rglob("*")), "the cockpit wrote no state (ledger, archive): the flow did nothing"
    roots = [Path(isolated[k]) for k in ("HOME", "XDG_STATE_HOME", "XDG_CONFIG_HOME", "XDG_DATA_HOME",
                                         "XDG_CACHE_HOME")] + [cluster.dir]
    assert _files_with_secrets(roots) == []
    printed = [(args, s) for args, out in flow.outputs for s in PLANTED if s in out]
    assert printed == []


def test_api_url_credentials_are_never_echoed(isolated: dict[str, str]) -> None:
    """The key in --api-url's userinfo authenticates the request; nothing the command prints repeats it."""
    url = f"http://r37:{API_KEY}@127.0.0.1:{_free_port()}"     # nothing listens: the not-ready path
    for extra in ([], ["--json"]):
        argv = [sys.executable, "-m", "cockpit", "chat", "Say hello.", "--api-url", url, *extra]
        res = subprocess.run(argv, capture_output=True, text=True, timeout=60, env=isolated,
                             cwd=isolated["HOME"])
        assert res.returncode == 1, res.stdout + res.stderr
        assert API_KEY not in res.stdout + res.stderr, (extra, res.stdout + res.stderr)
    assert _files_with_secrets([Path(isolated[k]) for k in ("HOME", "XDG_STATE_HOME")]) == []
