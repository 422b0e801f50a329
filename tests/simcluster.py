"""A simulated cluster as the tests see it (shared by fixtures and tests; import it as `simcluster`)."""

from __future__ import annotations

import asyncio
import os
import shutil
import socket
from dataclasses import dataclass
from pathlib import Path

from cockpit import constants as C
from cockpit.config import ClusterConfig, load_config
from cockpit.envfile import env_for_rank
from cockpit.hosts import Fleet, Result, command

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

    def answers(self, rank: int, wait: float = 2.0) -> bool:
        """Whether a new connection to `rank`'s SSH address gets an SSH banner within `wait` seconds (a
        demo host that is down holds the connection silently; a lab host's links are down)."""
        host = self.config.hosts[rank]
        try:
            with socket.create_connection((host.ssh, host.port or 22), timeout=wait) as s:
                s.settimeout(wait)
                return s.recv(64).startswith(b"SSH-")
        except OSError:     # refused, unreachable, or no banner in time
            return False


async def _ok(fleet: Fleet, cmd_for, ranks=None, timeout: float = 120) -> None:  # type: ignore[no-untyped-def]
    results = await fleet.run_all(cmd_for, ranks=ranks, timeout=timeout)
    for rank, res in results.items():
        assert isinstance(res, Result) and res.ok, f"rank {rank}: {res}"


async def prepare_hosts(fleet: Fleet, cfg: ClusterConfig) -> None:
    """The recipe's steps 2–5 on every host: recipe, runtime image, checkpoint, Engram rows, cluster.env."""
    def rdir(h) -> str:  # type: ignore[no-untyped-def]
        return cfg.recipe_dir(h.rank)
    await _ok(fleet, lambda h: command(["mkdir", "-p", rdir(h)]))
    await _ok(fleet, lambda h: command(["hf", "download", C.RECIPE_REPO, "--include", *C.RECIPE_INCLUDE,
                                        "--local-dir", "."], cwd=rdir(h)))
    await _ok(fleet, lambda h: command(["hf", "download", C.RECIPE_REPO, C.RUNTIME_ARCHIVE,
                                        "--local-dir", "."], cwd=rdir(h)))
    await _ok(fleet, lambda h: command(["docker", "load", "-i", C.RUNTIME_ARCHIVE], cwd=rdir(h)))
    await _ok(fleet, lambda h: command(["hf", "download", cfg.model.repo, "--local-dir",
                                        cfg.model_path(h.rank)]))
    workers = [r for r in cfg.ranks if r != 0]
    await _ok(fleet, lambda h: command(["python3", "tools/prepare-engram.py", str(h.rank),
                                        cfg.model_path(h.rank), cfg.engram_path(h.rank)], cwd=rdir(h)),
              ranks=workers)
    for rank in cfg.ranks:
        res = await fleet[rank].run(command(["tee", "cluster.env"], cwd=cfg.recipe_dir(rank)),
                                    input=env_for_rank(cfg, rank))
        assert res.ok, res.stderr


def lab_available() -> str | None:
    if os.geteuid() != 0:
        return "the lab needs root"
    if not shutil.which("ip") or not Path("/usr/sbin/sshd").exists():
        return "the lab needs iproute2 and openssh-server"
    return None


async def busy_request(client, model: str, max_tokens: int):  # type: ignore[no-untyped-def]
    """A long answer started in the background, returned once /metrics shows it running (the API busy)."""

    from cockpit.api.chat import ChatRequest
    from cockpit.api.liveness import read_sample
    from cockpit.bench import prompts as P

    # the sim answers "an essay" in 480-800 tokens whatever max_tokens says: ask for more words than
    # max_tokens, so the answer runs until max_tokens cuts it (at a fast --speed 800 tokens are 0.4 s)
    text = P.unique_text(f"Write a {max_tokens}-word essay about rain.", "busy", 1)
    request = ChatRequest([{"role": "user", "content": text}], model=model, thinking=False,
                          temperature=0.0, max_tokens=max_tokens)
    task = asyncio.create_task(client.chat_streamed(request))
    for _ in range(100):
        if (await read_sample(client)).running:
            return task
        await asyncio.sleep(0.05)
    raise AssertionError("the request never showed as running")
