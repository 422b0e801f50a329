"""A simulated cluster as the tests see it (shared by fixtures and tests; import it as `simcluster`)."""

from __future__ import annotations

import asyncio
import os
import shutil
import socket
import time
from dataclasses import dataclass
from pathlib import Path

from cockpit import constants as C
from cockpit.config import ClusterConfig, load_config
from cockpit.envfile import env_for_rank
from cockpit.hosts import Fleet, Result, command

TEST_SPEED = 400.0  # boot a simulated engine in a few seconds
BANNER_WAIT = 2.0   # a live demo host sends its SSH banner at once; a silent one never


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

    def _ssh_port(self, rank: int) -> int:
        port = self.config.hosts[rank].port
        assert port is not None, "demo hosts listen on ports of their own"
        return port

    def wait_silent(self, rank: int, timeout: float = 10.0) -> None:
        """Block until a new connection to `rank`'s SSH port gets no banner: its `host-down` fault has
        taken hold (the demo host reads its fault switch every 0.3 s, later on a loaded machine). For
        tests that are not coroutines; `silenced` is the same wait for those that are."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with socket.create_connection(("127.0.0.1", self._ssh_port(rank)), timeout=2) as s:
                s.settimeout(BANNER_WAIT)
                try:
                    if not s.recv(64):
                        return
                except TimeoutError:
                    return
            time.sleep(0.1)
        raise AssertionError(f"rank {rank} still answers with a banner {timeout} s after host-down")

    async def silenced(self, rank: int, timeout: float = 10.0) -> None:
        """`wait_silent` without blocking the event loop."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while loop.time() < deadline:
            reader, writer = await asyncio.wait_for(
                asyncio.open_connection("127.0.0.1", self._ssh_port(rank)), 2)
            try:
                if not await asyncio.wait_for(reader.read(64), BANNER_WAIT):
                    return
            except TimeoutError:
                return
            finally:
                writer.close()
            await asyncio.sleep(0.1)
        raise AssertionError(f"rank {rank} still answers with a banner {timeout} s after host-down")


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
    import asyncio

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
