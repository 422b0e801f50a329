"""Boot of the simulated engine with host roots: phases, rendezvous of four ranks, host files, faults."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from cockpit.sim import layout
from cockpit.sim.provision import provision_host

REPO = Path(__file__).resolve().parents[2]
SPEED = 2000.0
HCA = "rocep1s0f0"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@dataclass
class Rank:
    rank: int
    root: Path
    proc: subprocess.Popen[bytes]
    log: Path

    def text(self) -> str:
        return self.log.read_text(errors="replace")

    def counter(self, name: str) -> int:
        return int((layout.infiniband_dir(self.root) / HCA / "ports" / "1" / "counters" / name).read_text())


class Cluster:
    """Four (or one) engine processes on 127.x fabric addresses, each with its own provisioned root."""

    def __init__(self, base: Path, n: int) -> None:
        self.base = base
        self.n = n
        third = 10 + (os.getpid() % 200)
        self.ips = [f"127.0.{third}.{11 + i}" for i in range(n)]
        self.master_port = free_port()
        self.api_port = free_port()
        self.ranks: dict[int, Rank] = {}

    def root(self, r: int) -> Path:
        return self.base / f"host{r}"

    def provision(self, faults: dict[int, list[str]] | None = None) -> None:
        for r in range(self.n):
            spec = layout.HostSpec(
                rank=r,
                nranks=self.n,
                hostname=f"spark-{r}",
                mode="demo",
                fabric_ip=self.ips[r],
                peers=self.ips,
                api_bind=self.ips[r],
                speed=SPEED,
            )
            provision_host(self.root(r), spec)
            for name in (faults or {}).get(r, []):
                (layout.faults_dir(self.root(r)) / name).write_text("")

    def start(self, r: int, **extra_env: str) -> Rank:
        root = self.root(r)
        env = {
            **os.environ,
            **extra_env,
            "PYTHONPATH": str(REPO),
            layout.ROOT_ENV: str(root),
            "R37_SIM_CONTAINER_DIR": str(root / "container"),
            "NCCL_IB_HCA": HCA,
            "NCCL_IB_GID_INDEX": "3",
            "NCCL_SOCKET_IFNAME": "enp1s0f0np0",
            "R37_USE_LOCAL_ENGRAM_EDGES": "1",
        }
        argv = [
            sys.executable,
            "-m",
            "cockpit.sim.engine",
            "vllm",
            "serve",
            "/srv/models/DeepSeek-V4.1-Flash",
            "--served-model-name",
            "deepseek-v4.1-flash",
            "--tensor-parallel-size",
            str(self.n),
            "--distributed-executor-backend",
            "mp",
            "--nnodes",
            str(self.n),
            "--node-rank",
            str(r),
            "--master-addr",
            self.ips[0],
            "--master-port",
            str(self.master_port),
            "--host",
            "0.0.0.0",
            "--port",
            str(self.api_port),
            "--max-model-len",
            "600000",
            "--max-num-seqs",
            "8",
            "--gpu-memory-utilization",
            "0.81",
            "--speculative-config",
            '{"method": "mtp", "num_speculative_tokens": 3}',
            "--trust-remote-code",
        ]
        if r:
            argv.append("--headless")
        log = root / "engine.log"
        proc = subprocess.Popen(argv, env=env, stdout=log.open("wb"), stderr=subprocess.STDOUT)
        self.ranks[r] = Rank(r, root, proc, log)
        return self.ranks[r]

    def start_all(self) -> None:
        for r in reversed(range(self.n)):
            self.start(r)

    @property
    def url(self) -> str:
        return f"http://{self.ips[0]}:{self.api_port}"

    def stop(self) -> None:
        for rk in self.ranks.values():
            if rk.proc.poll() is None:
                rk.proc.kill()
                rk.proc.wait(5)


def wait_until(cond: Callable[[], bool], what: str, timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if cond():
            return
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")


def healthy(url: str) -> bool:
    try:
        return httpx.get(url + "/health", timeout=1).status_code == 200
    except httpx.HTTPError:
        return False


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[Callable[[int], Cluster]]:
    made: list[Cluster] = []

    def make(n: int) -> Cluster:
        c = Cluster(tmp_path / f"c{len(made)}", n)
        made.append(c)
        return c

    yield make
    for c in made:
        c.stop()


def test_four_ranks_boot_serve_and_shut_down(cluster: Callable[[int], Cluster]) -> None:
    c = cluster(4)
    c.provision()
    c.start_all()
    wait_until(lambda: healthy(c.url), "rank 0 /health")
    head, worker = c.ranks[0], c.ranks[2]
    wait_until(lambda: "Graph capturing finished in" in worker.text(), "worker ready line")
    log = head.text()
    order = [
        "vLLM API server version",
        "non-default args:",
        "DP group leader: node_rank=0",
        "world_size=4",
        "NCCL INFO NCCL_IB_HCA set by environment to rocep1s0f0.",
        "NCCL INFO NCCL_IB_GID_INDEX set by environment to 3.",
        "NCCL INFO NET/IB : Using [0]rocep1s0f0:1",
        "Init COMPLETE",
        "Loading safetensors checkpoint shards: 100% Completed | 48/48",
        "Loading weights took",
        "Model loading took",
        "Available KV cache memory",
        "GPU KV cache size:",
        ", Maximum concurrency for 600,000 tokens per request",
        "Graph capturing finished in",
        "Starting vLLM server on http://0.0.0.0:",
        "INFO:     Application startup complete.",
    ]
    positions = [log.index(s) for s in order]
    assert positions == sorted(positions)
    assert "'speculative_config': {'method': 'mtp', 'num_speculative_tokens': 3}" in log
    assert "'distributed_executor_backend': 'mp'" in log
    assert "Engram DISK mode" not in log
    wlog = worker.text()
    assert "Engram DISK mode: layer 3 rows [436906, 873813)" in wlog
    assert "Uvicorn" not in wlog and "world_size=4 rank=2" in wlog
    # readings: memory at gmu x 128 GB on every rank, GPU idle, then traffic while generating
    for rk in c.ranks.values():
        assert json.loads((rk.root / "run" / "mem.json").read_text())["used_bytes"] == int(0.81 * 128 * 10**9)
    gpu = json.loads((head.root / "run" / "gpu.json").read_text())
    assert gpu["apps"] and gpu["apps"][0]["used_mib"] > 90_000
    before = {r: rk.counter("port_xmit_data") for r, rk in c.ranks.items()}
    r = httpx.post(
        c.url + "/v1/chat/completions",
        timeout=30,
        json={
            "messages": [{"role": "user", "content": "Count from 1 to 30."}],
            "max_tokens": 80,
            "temperature": 0,
            "chat_template_kwargs": {"thinking": False},
        },
    )
    assert r.json()["choices"][0]["message"]["content"].startswith("1, 2, 3")
    tokens = r.json()["usage"]["total_tokens"]
    wait_until(
        lambda: all(rk.counter("port_xmit_data") > before[n] for n, rk in c.ranks.items()),
        "RDMA counters on all ranks",
    )
    from cockpit.sim.engine.hostio import BYTES_PER_TOKEN

    wait_until(
        lambda: (head.counter("port_xmit_data") - before[0]) * 4 == tokens * BYTES_PER_TOKEN,
        "head counter = tokens x bytes per token",
    )
    # the head stops gracefully; workers log the store failure and keep running
    head.proc.send_signal(signal.SIGTERM)
    assert head.proc.wait(5) == 0
    assert "Application shutdown complete." in head.text()
    assert not (head.root / "run" / "mem.json").exists()
    wait_until(
        lambda: "TCPStore recvValue failed" in worker.text() or "recvValue failed" in worker.text(),
        "worker store failure",
    )
    assert "torch.distributed.DistStoreError" in worker.text()
    time.sleep(0.3)
    assert all(c.ranks[r].proc.poll() is None for r in (1, 2, 3))
    for r in (1, 2, 3):
        c.ranks[r].proc.send_signal(signal.SIGTERM)
        assert c.ranks[r].proc.wait(5) == 0


def test_worker_death_after_ready_stops_the_head(cluster: Callable[[int], Cluster]) -> None:
    c = cluster(2)
    c.provision()
    c.start_all()
    wait_until(lambda: healthy(c.url), "rank 0 /health")
    c.ranks[1].proc.kill()
    assert c.ranks[0].proc.wait(10) == 1
    log = c.ranks[0].text()
    assert "Worker proc VllmWorker-1 (node_rank=1) died unexpectedly" in log
    assert "Traceback (most recent call last):" in log and "EngineDeadError" in log


def test_nccl_timeout_fault(cluster: Callable[[int], Cluster]) -> None:
    c = cluster(3)
    c.provision({1: ["nccl-timeout"]})
    c.start_all()
    assert c.ranks[1].proc.wait(15) == 1
    assert c.ranks[0].proc.wait(15) == 1
    wlog = c.ranks[1].text()
    assert (
        "NCCL WARN Call to ibv_modify_qp failed with 110 Connection timed out, on dev rocep1s0f0:1, "
        "curr state INIT, next state RTR, local GID index 3"
    ) in wlog
    assert "unhandled system error" in wlog and "Traceback" in wlog
    assert "RuntimeError: Engine core initialization failed. See root cause above." in c.ranks[0].text()
    assert c.ranks[2].proc.poll() is None  # headless workers never exit on their own


def test_worker_without_head_keeps_looping(cluster: Callable[[int], Cluster]) -> None:
    c = cluster(2)
    c.provision()
    w = c.start(1, R37_SIM_RENDEZVOUS_TIMEOUT="0.5")
    wait_until(lambda: "DistStoreError" in w.text(), "store timeout on the worker")
    assert "TCPStore recvValue failed" in w.text() and w.proc.poll() is None
    c.start(0)  # a late head: the waiting worker still joins
    wait_until(lambda: healthy(c.url), "rank 0 /health")
    assert "world_size=2 rank=1" in w.text()


def test_oom_at_load_and_crash_after_ready(cluster: Callable[[int], Cluster]) -> None:
    oom, crash = cluster(1), cluster(1)
    oom.provision({0: ["oom-at-load"]})
    crash.provision({0: ["crash-after-ready"]})
    o, k = oom.start(0), crash.start(0)  # both boot at once
    assert o.proc.wait(15) == -signal.SIGKILL
    assert "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate" in o.text()
    assert (o.root / "container" / "oom_killed").exists()
    assert "Loading weights took" not in o.text()
    assert k.proc.wait(15) == 1
    log = k.text()
    assert log.index("Application startup complete.") < log.index("Traceback (most recent call last):")


def test_hang_fault(cluster: Callable[[int], Cluster]) -> None:
    c = cluster(1)
    c.provision()
    rk = c.start(0)
    wait_until(lambda: healthy(c.url), "/health")
    (layout.faults_dir(rk.root) / "hang").write_text("")

    def gen_total() -> tuple[float, float]:
        text = httpx.get(c.url + "/metrics").text
        vals = {
            ln.split("{")[0]: float(ln.rsplit(" ", 1)[1])
            for ln in text.splitlines()
            if ln.startswith(("vllm:generation_tokens_total", "vllm:num_requests_running"))
        }
        return vals["vllm:generation_tokens_total"], vals["vllm:num_requests_running"]

    before, _ = gen_total()
    lines: list[str] = []
    with (
        httpx.Client(timeout=httpx.Timeout(5, read=0.6)) as client,
        pytest.raises(httpx.ReadTimeout),
        client.stream(
            "POST",
            c.url + "/v1/chat/completions",
            json={
                "messages": [{"role": "user", "content": "Tell me about clouds."}],
                "stream": True,
                "chat_template_kwargs": {"thinking": False},
            },
        ) as r,
    ):
        for line in r.iter_lines():
            if line:
                lines.append(line)
                after, running = gen_total()
                assert running == 1 and after == before
    assert len(lines) == 1 and json.loads(lines[0][6:])["choices"][0]["delta"] == {
        "role": "assistant",
        "content": "",
    }
    after, _ = gen_total()
    assert after == before
    rk.proc.send_signal(signal.SIGTERM)
    assert rk.proc.wait(5) == 0
