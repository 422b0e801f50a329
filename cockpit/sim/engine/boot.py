"""`vllm serve` on one rank: the boot phases in vLLM's log style, rendezvous, faults, then serving.

Nominal phase durations (seconds of a real boot, about 13.5 minutes in total) are divided by the host's
speed (`sim.json` speed, overridden by env R37_SIM_SPEED). Logged durations are the nominal ones, as a
real log would show them.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import random
import signal
import socket
import sys
import time
from dataclasses import replace
from pathlib import Path

from cockpit import constants
from cockpit.sim import layout
from cockpit.sim.engine import tracebacks
from cockpit.sim.engine.cli import (
    USAGE,
    ServeArgs,
    kv_tokens,
    parse_serve,
    ready_parser,
    run_loop,
    schedule_from_env,
    serve_ready,
)
from cockpit.sim.engine.hostio import BYTES_PER_TOKEN, TOTAL_MEMORY, HostIO
from cockpit.sim.engine.rendezvous import Head, WorkerLink
from cockpit.sim.engine.serving import EngineConfig, Serving, activity, shut_down_api
from cockpit.sim.engine.vlog import VLog, progress

GIB = 1 << 30
WEIGHTS_BYTES = int(71.3 * GIB)
NOMINAL = {
    "start": 8.0,
    "dist": 20.0,
    "engram": 45.0,
    "shard": 11.0,
    "post_load": 10.0,
    "compile": 75.0,
    "kv": 20.0,
    "graphs": 95.0,
    "api": 4.0,
    "timeout": 600.0,
    "crash": 20.0,
    "retry_log": 30.0,
}
OOM_SHARD = 31
ENGRAM_LAYERS = (3, 11, 19, 27, 35, 43)
ENGRAM_ROWS = 1_310_720


class WorkerDied(Exception):
    def __init__(self, rank: int, text: str) -> None:
        super().__init__(text)
        self.rank = rank


class HeadLost(Exception):
    pass


class Boot:
    """One rank's engine process from container start to exit."""

    def __init__(self, args: ServeArgs, spec: layout.HostSpec, root: Path | None, speed: float) -> None:
        self.args = args
        self.spec = spec
        self.root = root
        self.speed = max(speed, 1e-3)
        self.rank = args.node_rank
        self.is_head = self.rank == 0 and not args.headless
        self.multi = args.nnodes > 1
        self.world = args.tensor_parallel_size
        self.log = VLog()
        self.hca = os.environ.get("NCCL_IB_HCA", spec.ib_hca).split(",")[0].lstrip("=^")
        self.gid = os.environ.get("NCCL_IB_GID_INDEX", str(spec.gid_index))
        self.iface = os.environ.get("NCCL_SOCKET_IFNAME", spec.fabric_iface)
        self.host = HostIO(root, self.hca, seed=self.rank)
        self.rng = random.Random(1000 + self.rank)
        self.head: Head | None = None
        self.link: WorkerLink | None = None
        self.serving: Serving | None = None
        self.ready = False
        self.wproc = f"Worker_TP{self.rank}"

    # --- helpers ------------------------------------------------------------------------------
    def fault(self, name: str) -> bool:
        return self.root is not None and layout.fault_active(self.root, name)

    def info(self, where: str, msg: str, proc: str | None = None, level: str = "INFO") -> None:
        self.log.line(proc if proc is not None else self.wproc, level, where, msg)

    def nominal(self, key: str) -> float:
        return NOMINAL[key] * self.rng.uniform(0.9, 1.1)

    def rendezvous_timeout(self) -> float:
        """Real seconds the ranks wait for each other: nominal 600 s / speed, at least 10 s (a staged
        launch by hand must fit), or env R37_SIM_RENDEZVOUS_TIMEOUT."""
        env = os.environ.get("R37_SIM_RENDEZVOUS_TIMEOUT")
        return float(env) if env else max(10.0, NOMINAL["timeout"] / self.speed)

    async def pause(self, nominal_s: float) -> None:
        """Sleep nominal_s / speed, raising as soon as a peer dies."""
        end = time.monotonic() + nominal_s / self.speed
        while True:
            self._check_peers()
            left = end - time.monotonic()
            if left <= 0:
                return
            await asyncio.sleep(min(left, 0.05))

    def _check_peers(self) -> None:
        if self.head is not None and self.head.failure.done():
            rank, text = self.head.failure.result()
            raise WorkerDied(rank, text)
        if self.link is not None and self.link.lost.is_set():
            raise HeadLost()

    # --- process entry ------------------------------------------------------------------------
    async def main(self) -> int:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        # fault no-sigterm-handler: PID 1 of the container catches no SIGTERM (the kernel drops it; docker
        # stop waits its whole timeout, then SIGKILL: exit 137)
        for sig in (signal.SIGINT,) if self.fault("no-sigterm-handler") else (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, stop.set)
        life = asyncio.create_task(self.lifecycle())
        stopper = asyncio.create_task(stop.wait())
        done, _ = await asyncio.wait({life, stopper}, return_when=asyncio.FIRST_COMPLETED)
        if life in done:
            stopper.cancel()
            code = life.result()
            await self.teardown()
            return code
        life.cancel()
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await life
        await self.shut_down()
        return 0

    async def shut_down(self) -> None:
        """SIGTERM/SIGINT: vLLM's graceful shutdown lines around the teardown (exit code 0). A serving
        head stops its API server the way uvicorn logs it; a worker (or a head still booting) logs what
        its worker process prints when the parent goes. Fault traceback-on-stop adds a traceback."""
        traceback = self.fault("traceback-on-stop")
        if self.is_head and self.ready:
            await shut_down_api(self.log, self.teardown, traceback, self.serving)
            return
        self.info("multiproc_executor.py:702", "Parent process exited, terminating worker")
        if traceback:
            self.log.raw(tracebacks.stop_worker())
        await self.teardown()
        self.info("multiproc_executor.py:744", "WorkerProc shutting down.")

    async def teardown(self) -> None:
        if self.serving is not None:
            await self.serving.stop()
        if self.head is not None:
            await self.head.close()
        if self.link is not None:
            await self.link.close()
        self.host.cleanup()

    async def lifecycle(self) -> int:
        try:
            await self.phase_start()
            await self.phase_distributed()
            if not self.is_head:
                await self.phase_engram()
            await self.phase_weights()
            await self.phase_compile_and_kv()
            await self.phase_graphs()
            if self.is_head:
                return await self.serve()
            return await self.serve_headless()
        except WorkerDied as exc:
            return self.on_worker_died(exc)
        except HeadLost:
            return await self.head_lost_forever()
        except tracebacks.Fatal as exc:
            return exc.code

    # --- phases -------------------------------------------------------------------------------
    async def phase_start(self) -> None:
        a = self.args
        proc = "APIServer" if self.is_head else None
        self.info("__init__.py:216", "Automatically detected platform cuda.", proc)
        self.info("api_server.py:1977", f"vLLM API server version {tracebacks.VLLM_VERSION}", proc)
        self.info("utils.py:328", f"non-default args: {a.non_default!r}", proc)
        await self.pause(self.nominal("start") / 2)
        self.info("model.py:656", "Resolved architecture: DeepseekV4ForCausalLM", proc)
        self.info("model.py:1745", f"Using max model len {a.max_model_len}", proc)
        self.info(
            "scheduler.py:225",
            f"Chunked prefill is enabled with max_num_batched_tokens={a.max_num_batched_tokens}.",
            proc,
        )
        if a.spec_k:
            self.info(
                "speculative.py:214",
                f"Using speculative decoding with num_speculative_tokens={a.spec_k}",
                proc,
            )
        await self.pause(self.nominal("start") / 2)

    async def phase_distributed(self) -> None:
        a = self.args
        if self.multi and self.is_head:
            self.info(
                "core.py:93",
                f"DP group leader: node_rank=0, node_rank_within_dp=0, master_addr={a.master_addr}, "
                f"mp_distributed_port={a.master_port}, world_size={self.world}",
                "EngineCore_DP0",
            )
            self.head = Head(a.nnodes, self._head_event)
            try:
                await self.head.start(a.master_addr, a.master_port)
            except OSError as exc:
                self.log.raw(tracebacks.store_bind_failure(a.master_addr, a.master_port, exc))
                self.info("core.py:708", "EngineCore failed to start.", "EngineCore_DP0", "ERROR")
                self.log.raw(tracebacks.init_failed())
                raise tracebacks.Fatal(1) from exc
            await self.wait_for_workers()
        elif self.multi:
            self.link = WorkerLink(self.rank, self.spec.hostname)
            await self.join_head()
        self.info(
            "parallel_state.py:1134",
            f"world_size={self.world} rank={self.rank} local_rank=0 distributed_init_method="
            f"tcp://{a.master_addr}:{a.master_port} backend=nccl",
        )
        await self.pause(self.nominal("dist") / 2)
        ip = self.spec.fabric_ip
        tag = f"{self.spec.hostname}:{os.getpid()}:{os.getpid() + 140} [0]"
        for var in ("NCCL_SOCKET_IFNAME", "NCCL_IB_HCA", "NCCL_IB_GID_INDEX"):
            if os.environ.get(var):
                self.log.raw(f"{tag} NCCL INFO {var} set by environment to {os.environ[var]}.", err=False)
        if self.host.has_hca():
            self.log.raw(
                f"{tag} NCCL INFO NET/IB : Using [0]{self.hca}:1/RoCE [RO]; OOB {self.iface}:{ip}<0>",
                err=False,
            )
        else:
            self.log.raw(f"{tag} NCCL INFO NET/IB : No device found.", err=False)
            self.log.raw(f"{tag} NCCL INFO NET/Socket : Using [0]{self.iface}:{ip}<0>", err=False)
        if self.fault("nccl-timeout"):
            await self.fail_nccl(tag, ip)
        self.host.add_traffic(64 * 1024 * 1024)
        self.log.raw(
            f"{tag} NCCL INFO ncclCommInitRank comm 0x{0xA0D3E0 + self.rank:x} rank {self.rank} "
            f"nranks {self.world} cudaDev 0 nvmlDev 0 busId f01000 commId 0x5f3c7e91d2a4b6c8 - "
            "Init COMPLETE",
            err=False,
        )
        self.info(
            "parallel_state.py:1283",
            f"rank {self.rank} in world size {self.world} is assigned as "
            f"DP rank 0, PP rank 0, TP rank {self.rank}, EP rank {self.rank}",
        )
        await self.pause(self.nominal("dist") / 2)

    def _head_event(self, kind: str, rank: int, text: str) -> None:
        if kind == "joined":
            self.info(
                "multiproc_executor.py:131",
                f"Worker node_rank={rank} ({text}) joined the rendezvous",
                "EngineCore_DP0",
            )
        elif kind == "late":
            self.info(
                "multiproc_executor.py:139",
                f"Ignoring rendezvous request from node_rank={rank} ({text}): "
                "the process group is already initialised",
                "EngineCore_DP0",
                "WARNING",
            )

    async def wait_for_workers(self) -> None:
        assert self.head is not None
        deadline = time.monotonic() + self.rendezvous_timeout()
        while not self.head.all_joined.is_set():
            self._check_peers()
            if time.monotonic() > deadline:
                joined = len(self.head.writers) + 1
                self.log.raw(tracebacks.store_timeout(int(NOMINAL["timeout"]), joined, self.args.nnodes))
                self.info("core.py:708", "EngineCore failed to start.", "EngineCore_DP0", "ERROR")
                self.log.raw(tracebacks.init_failed())
                raise tracebacks.Fatal(1)
            await asyncio.sleep(0.05)
        await self.head.welcome(self.world)

    async def join_head(self) -> None:
        assert self.link is not None
        a = self.args
        start, backoff, next_log = time.monotonic(), 0.1, self.rendezvous_timeout()
        # what `vllm serve --headless` prints on a worker node (entrypoints/cli/serve.py run_headless)
        self.info(
            "serve.py:224",
            f"Launching vLLM (v{tracebacks.VLLM_VERSION}) headless multiproc executor, with head node "
            f"address {a.master_addr}:{a.master_port} for torch.distributed process group.",
            None,
        )
        while not await self.link.try_join(a.master_addr, a.master_port):
            if time.monotonic() - start > next_log:
                self.log.raw(
                    tracebacks.store_client_timeout(a.master_addr, a.master_port, int(NOMINAL["timeout"]))
                )
                next_log += max(1.0, NOMINAL["retry_log"] / self.speed)
            await asyncio.sleep(backoff)
            backoff = min(2.0, backoff * 1.6)

    async def fail_nccl(self, tag: str, ip: str) -> None:
        peer = self.spec.peers[(self.rank + 1) % len(self.spec.peers)] if self.spec.peers else ip
        self.log.raw(tracebacks.nccl_timeout(tag, self.hca, self.gid, ip, peer))
        if self.link is not None:
            await self.link.send({"op": "fail", "error": "NCCL error: unhandled system error"})
        if self.is_head:
            self.log.raw(tracebacks.init_failed())
        raise tracebacks.Fatal(1)

    async def phase_engram(self) -> None:
        workers = max(1, self.args.nnodes - 1)
        lo = (self.rank - 1) * ENGRAM_ROWS // workers
        hi = self.rank * ENGRAM_ROWS // workers
        local = os.environ.get("R37_USE_LOCAL_ENGRAM_EDGES", "0") == "1"
        self.info("engram.py:88", f"Engram DISK mode enabled (local worker row overlays: {local})")
        for layer in ENGRAM_LAYERS:
            await self.pause(self.nominal("engram") / len(ENGRAM_LAYERS))
            self.info("engram.py:141", f"Engram DISK mode: layer {layer} rows [{lo}, {hi})")

    async def phase_weights(self) -> None:
        self.info("gpu_model_runner.py:2338", f"Starting to load model {self.args.model_path}...")
        total, elapsed = constants.CHECKPOINT_SHARDS, 0.0
        self.log.raw(progress("Loading safetensors checkpoint shards", 0, total, 0))
        for k in range(1, total + 1):
            d = self.nominal("shard")
            await self.pause(d)
            elapsed += d
            self.host.set_memory(int(WEIGHTS_BYTES * k / total))
            if k % 4 == 1:
                self.host.set_gpu(0.12)
            if k == OOM_SHARD and self.fault("oom-at-load"):
                self.oom()
            self.log.raw(progress("Loading safetensors checkpoint shards", k, total, elapsed))
        self.info("default_loader.py:267", f"Loading weights took {elapsed:.2f} seconds")
        post = self.nominal("post_load")
        await self.pause(post)
        self.info(
            "gpu_model_runner.py:2370",
            f"Model loading took {WEIGHTS_BYTES / GIB:.4f} GiB and {elapsed + post:.6f} seconds",
        )

    def oom(self) -> None:
        self.log.raw(tracebacks.oom())
        cdir = os.environ.get("R37_SIM_CONTAINER_DIR")
        if cdir:
            Path(cdir).mkdir(parents=True, exist_ok=True)
            (Path(cdir) / "oom_killed").write_text("1\n")
        os.kill(os.getpid(), signal.SIGKILL)

    async def phase_compile_and_kv(self) -> None:
        d = self.nominal("compile")
        self.info(
            "backends.py:548",
            f"Using cache directory: /root/.cache/vllm/torch_compile_cache/9d3f1c2ab4/"
            f"rank_{self.rank}_0/backbone for vLLM's torch.compile",
        )
        await self.pause(d * 0.15)
        self.info("backends.py:559", f"Dynamo bytecode transform time: {d * 0.15:.2f} s")
        self.host.set_gpu(0.35)
        await self.pause(d * 0.85)
        self.info("backends.py:215", f"Compiling a graph for dynamic shape takes {d * 0.8:.2f} s")
        self.info("monitor.py:34", f"torch.compile takes {d:.2f} s in total")
        kv_d = self.nominal("kv")
        await self.pause(kv_d)
        gmu = self.args.gpu_memory_utilization
        kv_tok = kv_tokens(gmu)
        kv_gib = kv_tok * 20 * 1024 / GIB
        self.host.set_memory(int(gmu * TOTAL_MEMORY))
        self.info("gpu_worker.py:298", f"Available KV cache memory: {kv_gib:.2f} GiB")
        proc = "EngineCore_DP0" if self.is_head else self.wproc
        # one line, as vLLM 0.32 prints it (older versions printed the two halves on two lines)
        self.info(
            "kv_cache_utils.py:2327",
            f"GPU KV cache size: {kv_tok:,} tokens, Maximum concurrency for "
            f"{self.args.max_model_len:,} tokens per request: {kv_tok / self.args.max_model_len:.2f}x",
            proc,
        )

    async def phase_graphs(self) -> None:
        d = self.nominal("graphs")
        for label, n in (("mixed prefill-decode, PIECEWISE", 35), ("decode, FULL", 19)):
            elapsed = 0.0
            for k in range(0, n + 1, 5 if n > 20 else 4):
                step = d / 2 * (k / n) - elapsed
                await self.pause(max(0.0, step))
                elapsed += max(0.0, step)
                self.host.set_gpu(0.6)
                self.log.raw(
                    progress(f"Capturing CUDA graphs ({label})", k, n, elapsed).replace(" Completed", "")
                )
            self.log.raw(progress(f"Capturing CUDA graphs ({label})", n, n, d / 2).replace(" Completed", ""))
        self.host.add_traffic(16 * 1024 * 1024)
        self.host.set_gpu(0.0)
        self.info("gpu_model_runner.py:3480", f"Graph capturing finished in {round(d)} secs, took 1.21 GiB")

    # --- serving ------------------------------------------------------------------------------
    def _engine_config(self) -> EngineConfig:
        a = self.args
        return EngineConfig(
            model=a.served_model_name,
            model_path=a.model_path,
            max_model_len=a.max_model_len,
            max_num_seqs=a.max_num_seqs,
            kv_tokens=kv_tokens(a.gpu_memory_utilization),
            max_images=a.max_images,
        )

    async def serve(self) -> int:
        a = self.args
        if self.head is not None:
            while not self.head.all_ready.is_set():
                self._check_peers()
                await asyncio.sleep(0.05)
        self.info(
            "core.py:218",
            "init engine (profile, create kv cache, warmup model) took "
            f"{NOMINAL['compile'] + NOMINAL['kv'] + NOMINAL['graphs']:.2f} seconds",
            "EngineCore_DP0",
        )
        on_tick = self.head.tick if self.head is not None else None
        self.serving = Serving(
            replace(schedule_from_env(), max_batched_tokens=a.max_num_batched_tokens),
            self._engine_config(),
            self.log,
            self.host,
            self.fault,
            on_tick,
            nranks=self.world,
        )
        self.serving.start_background()
        await self.pause(NOMINAL["api"])
        bind = self.spec.api_bind if self.root is not None else a.host
        try:
            await self.serving.start_api(bind, a.port)
        except OSError as exc:
            self.log.raw(
                f"(APIServer pid={os.getpid()}) ERROR:    [Errno {exc.errno}] error while attempting "
                f"to bind on address ('{a.host}', {a.port}): {exc.strerror}"
            )
            return 1
        api = "APIServer"
        self.info("entry.py:136", "Supported tasks: ['generate']", api)
        self.info("entry.py:140", f"Starting vLLM server on http://{a.host}:{a.port}", api)
        self.info("launcher.py:37", "Available routes are:", api)
        for route, methods in (
            ("/health", "GET"),
            ("/v1/models", "GET"),
            ("/metrics", "GET"),
            ("/v1/chat/completions", "POST"),
        ):
            self.info("launcher.py:45", f"Route: {route}, Methods: {methods}", api)
        for text in (
            f"Started server process [{self.log.pid}]",
            "Waiting for application startup.",
            "Application startup complete.",
        ):
            self.log.uvicorn(text)
        self.ready = True
        return await self.watch_ready()

    async def watch_ready(self) -> int:
        crash_at: float | None = None
        while True:
            self._check_peers()
            if crash_at is None and self.fault("crash-after-ready"):
                crash_at = time.monotonic() + NOMINAL["crash"] / self.speed
            if crash_at is not None and time.monotonic() >= crash_at:
                self.log.raw(tracebacks.crash(self.wproc))
                return 1
            await asyncio.sleep(0.1)

    async def serve_headless(self) -> int:
        assert self.link is not None or not self.multi
        if self.link is not None:
            self.link.on_tick = self._worker_tick
            await self.link.send({"op": "ready"})
        self.ready = True   # a headless worker prints nothing when it is ready (no vLLM version does)
        return await self.watch_ready()

    def _worker_tick(self, tokens: int, busy: float, idle: int | None = None) -> None:
        self.host.add_traffic(tokens * BYTES_PER_TOKEN)
        self.host.set_gpu(0.0 if idle == self.rank else busy, slow=self.fault("slow-clocks"))
        self.host.set_activity(activity(busy, idle is not None, idle, self.rank), "worker", self.rank)

    def on_worker_died(self, exc: WorkerDied) -> int:
        if self.serving is not None:
            self.serving.api.alive = False
            self.serving.core.fail_all(
                "EngineCore encountered an issue. See stack trace (above) for the root cause."
            )
        self.info(
            "multiproc_executor.py:154",
            f"Worker proc VllmWorker-{exc.rank} (node_rank={exc.rank}) died "
            f"unexpectedly ({exc}), shutting down executor.",
            "EngineCore_DP0",
            "ERROR",
        )
        if self.ready:
            self.log.raw(tracebacks.engine_dead())
        else:
            self.info("core.py:708", "EngineCore failed to start.", "EngineCore_DP0", "ERROR")
            self.log.raw(tracebacks.init_failed())
        return 1

    async def head_lost_forever(self) -> int:
        """Headless workers never exit on their own: log the store failure and keep looping."""
        a = self.args
        self.log.raw(tracebacks.store_recv_failed(self.spec.fabric_ip, a.master_addr, a.master_port))
        self.host.set_gpu(0.0)
        while True:
            await asyncio.sleep(max(1.0, NOMINAL["retry_log"] / self.speed))
            self.log.raw(
                f"[W{time.strftime('%m%d %H:%M:%S')} TCPStore.cpp:125] [c10d] recvValue failed on "
                f"SocketImpl(fd=37, addr=[{self.spec.fabric_ip}]:41822, remote=[{a.master_addr}]:"
                f"{a.master_port}): failed to recv, got 0 bytes"
            )


def _spec(args: ServeArgs, root: Path | None) -> layout.HostSpec:
    if root is not None and layout.spec_path(root).exists():
        return layout.read_spec(root)
    return layout.HostSpec(
        rank=args.node_rank,
        nranks=args.nnodes,
        hostname=socket.gethostname(),
        mode="demo",
        fabric_ip=args.master_addr if args.node_rank == 0 else "127.0.0.1",
        peers=[],
        api_bind=args.host,
    )


def run(args: ServeArgs) -> int:
    """Run one rank until it exits; returns the exit code."""
    env_root = os.environ.get(layout.ROOT_ENV)
    root = Path(env_root) if env_root else None
    spec = _spec(args, root)
    speed = float(os.environ.get("R37_SIM_SPEED") or spec.speed or 1.0)
    return run_loop(Boot(args, spec, root, speed).main())


def main(argv: list[str] | None = None) -> int:
    """Entry point of `python -m cockpit.sim.engine`: `vllm serve ...`, `serve ...` or `serve-ready ...`.
    Here, not in `cli`, so that `cli` (argument parsing, shared by the boot) never imports the boot back."""
    args = list(sys.argv[1:] if argv is None else argv)
    if args[:1] == ["vllm"]:
        args = args[1:]
    if args[:1] == ["serve-ready"]:
        ns = ready_parser().parse_args(args[1:])
        return run_loop(serve_ready(ns))
    if args[:1] == ["serve"] and len(args) > 1:
        return run(parse_serve(args[1:]))
    sys.stderr.write(USAGE.strip() + "\n")
    return 2
