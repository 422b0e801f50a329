"""A booted engine at work: core loop, HTTP API, periodic stats log lines, GPU and RDMA readings."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from aiohttp import web

from cockpit.sim import layout
from cockpit.sim.engine import tracebacks
from cockpit.sim.engine.api import ChatAPI, start_site
from cockpit.sim.engine.core import EngineCore
from cockpit.sim.engine.hostio import BYTES_PER_TOKEN, HostIO
from cockpit.sim.engine.schedule import Schedule
from cockpit.sim.engine.vlog import VLog

TICK_S = 0.5
STATS_INTERVAL_S = 10.0


@dataclass
class EngineConfig:
    model: str
    model_path: str
    max_model_len: int
    max_num_seqs: int
    kv_tokens: int
    max_images: int = 4


async def shut_down_api(log: VLog, teardown: Callable[[], Awaitable[None]], traceback: bool = False,
                        serving: Serving | None = None) -> None:
    """The API server's graceful stop on SIGTERM as vLLM logs it (launcher, then uvicorn), around
    `teardown`; `traceback`: uvicorn's lifespan CancelledError in the middle (fault traceback-on-stop).
    With answers still open on `serving` it does what vLLM 0.32 does in most tries
    (docs/vllm.md#real-vllm-032-cpu-build-and-the-pinned-version): the engine core is force-killed before
    the requests are aborted, the open streams stall (no [DONE], no error) and the server waits for its
    clients to go ("Waiting for connections to close"): under `docker stop` that ends in SIGKILL after the
    timeout, exit 137."""
    if serving is not None and serving.api.open:
        await serving.stall_until_clients_go()
    else:
        log.line("APIServer", "INFO", "launcher.py:110", "Shutting down FastAPI HTTP server.")
        log.uvicorn("Shutting down")
    log.uvicorn("Waiting for application shutdown.")
    if traceback:
        log.raw(tracebacks.stop_api())
    await teardown()
    log.uvicorn("Application shutdown complete.")
    log.uvicorn(f"Finished server process [{log.pid}]")


def activity(busy: float, hung: bool, idle: int | None, rank: int) -> str:
    """What a rank's Python threads do: stalled (never entered the collective), spinning in the
    collective (hung), serving, or waiting for work."""
    if idle == rank:
        return "stalled"
    if hung:
        return "collective"
    return "serving" if busy > 0.005 else "idle"


# vLLM 0.32's lines on SIGTERM with requests open (shutdown-run2-sigterm-with-open-stream.log of the
# real-vLLM samples): the engine core is killed before it aborts the requests
STALL_LINES = (
    ("APIServer", "INFO", "launcher.py:254", "[shutdown] API server: shutdown triggered"),
    ("APIServer", "INFO", "launcher.py:270",
     "[shutdown] API server: stopping engine client mode=abort timeout=0s"),
    ("APIServer", "INFO", "core_client.py:770", "[shutdown] MPClient: start timeout=0s"),
    ("APIServer", "INFO", "core_client.py:772", "[shutdown] MPClient: stopping engine manager"),
    ("APIServer", "INFO", "utils.py:628", "[shutdown] Process manager: send sigterm to process EngineCore"),
    ("APIServer", "WARNING", "utils.py:648",
     "[shutdown] Process manager: force killing remaining processes count=1"),
    ("APIServer", "WARNING", "utils.py:653",
     "[shutdown] Process manager: force killing remaining process EngineCore pid {core}"),
    ("EngineCore_DP0", "INFO", "core.py:1454", "[shutdown] EngineCore: trigger received signal=SIGTERM"),
    ("APIServer", "WARNING", "system_utils.py:225",
     "[shutdown] force killing sub process VLLM::Worker pid {worker}"),
    ("APIServer", "INFO", "core_client.py:774", "[shutdown] MPClient: engine manager stopped"),
    ("APIServer", "INFO", "core_client.py:775", "[shutdown] MPClient: cleaning up background resources"),
    ("APIServer", "INFO", "core_client.py:777", "[shutdown] MPClient: complete"),
    ("APIServer", "INFO", "launcher.py:279", "[shutdown] API server: engine client stopped"),
    ("APIServer", "INFO", "launcher.py:282", "[shutdown] API server: signalling HTTP server shutdown"),
    ("APIServer", "INFO", "launcher.py:304", "[shutdown] API server: shutting down FastAPI HTTP server"),
)
WAITING_FOR_CONNECTIONS = "Waiting for connections to close. (CTRL+C to force quit)"
CLIENT_POLL_S = 0.1


class Serving:
    """Owns the engine core and its background tasks; `start_api` opens the HTTP port."""

    def __init__(
        self,
        schedule: Schedule,
        cfg: EngineConfig,
        log: VLog,
        host: HostIO,
        fault: Callable[[str], bool] = lambda _: False,
        on_tick: Callable[[int, float, int | None], None] | None = None,
        nranks: int = 1,
    ) -> None:
        self.sch = schedule
        self.cfg = cfg
        self.log = log
        self.host = host
        self.fault = fault
        self.on_tick = on_tick
        self.nranks = nranks
        self.core = EngineCore(
            schedule,
            cfg.model,
            cfg.max_model_len,
            cfg.max_num_seqs,
            cfg.kv_tokens,
            hang=lambda: fault("hang") or fault("tp-deadlock"),
        )
        self.api = ChatAPI(self.core, cfg.model_path, schedule.info(), cfg.max_images)
        self.runner: web.AppRunner | None = None
        self.tasks: list[asyncio.Task[None]] = []

    def start_background(self) -> None:
        self.tasks = [
            asyncio.create_task(self.core.run(), name="engine-core"),
            asyncio.create_task(self._ticker(), name="engine-ticker"),
            asyncio.create_task(self._stats_logger(), name="engine-stats"),
        ]

    async def start_api(self, bind: str, port: int) -> None:
        self.runner = await start_site(self.api, bind, port)

    async def stop(self, reason: str = "The engine is shutting down") -> None:
        self.api.alive = False
        self.core.fail_all(reason)
        for t in self.tasks:
            t.cancel()
        await asyncio.gather(*self.tasks, return_exceptions=True)
        if self.runner is not None:
            await self.runner.cleanup()

    async def stall_until_clients_go(self) -> None:
        """SIGTERM with answers open, as vLLM 0.32 mostly does it: its shutdown lines, the engine core
        killed (no more tokens, no abort, no [DONE]), the listening socket closed, then uvicorn waits for
        every open connection to be closed by its client. The stats logger keeps its last lines (one with
        the running requests at 0.0 tokens/s, then quiet)."""
        pids = {"core": self.log.pid + 71, "worker": self.log.pid + 140}   # as VLog numbers them
        for proc, level, where, msg in STALL_LINES:
            self.log.line(proc, level, where, msg.format(**pids))
        core_tasks = [t for t in self.tasks if t.get_name() == "engine-core"]
        for t in core_tasks:
            t.cancel()
        await asyncio.gather(*core_tasks, return_exceptions=True)
        self.api.alive = False
        if self.runner is not None:
            for site in list(self.runner.sites):
                server = getattr(site, "_server", None)   # stop listening; the open connections stay
                if server is not None:
                    server.close()
        self.log.uvicorn("Shutting down")
        self.log.uvicorn(WAITING_FOR_CONNECTIONS)
        while self.api.open:
            for rid, (req, request) in list(self.api.open.items()):
                transport = request.transport
                if transport is None or transport.is_closing():
                    self.api.open.pop(rid, None)
                    req.gone = True
                    req.events.put_nowait(("gone",))
            await asyncio.sleep(CLIENT_POLL_S)

    async def _ticker(self) -> None:
        last_busy, last_t = self.core.busy_s, time.monotonic()
        last_tok = 0
        while True:
            await asyncio.sleep(TICK_S)
            now = time.monotonic()
            busy = min(1.0, (self.core.busy_s - last_busy) / max(1e-6, now - last_t))
            hung = self.core.hang() and bool(self.core.running)
            if hung:
                busy = 1.0
            idle = self.deadlocked_rank() if hung else None
            last_busy, last_t = self.core.busy_s, now
            total = self.core.stats.prompt_tokens + self.core.stats.generation_tokens
            delta, last_tok = total - last_tok, total
            self.host.add_traffic(delta * BYTES_PER_TOKEN)
            self.host.set_gpu(0.0 if idle == 0 else busy, slow=self.fault("slow-clocks"))
            self.host.set_activity(activity(busy, hung, idle, 0), "head", 0)
            if self.on_tick is not None:
                self.on_tick(delta, busy, idle)

    def deadlocked_rank(self) -> int | None:
        """The rank that never enters the collective under `tp-deadlock` (its `rank_idle`, default the
        last rank); None without that fault."""
        if not self.fault("tp-deadlock"):
            return None
        params = layout.fault_params(self.host.root, "tp-deadlock") if self.host.root else {}
        rank = params.get("rank_idle", self.nranks - 1)
        return rank if isinstance(rank, int) and 0 <= rank < max(1, self.nranks) else self.nranks - 1

    async def _stats_logger(self) -> None:
        interval = STATS_INTERVAL_S * self.sch.time_scale
        was_busy = False
        while True:
            await asyncio.sleep(interval)
            w, c = self.core.window, self.core
            # vLLM logs this line only while this or the previous interval had throughput (else at DEBUG):
            # an idle engine is quiet, and a hung one prints one 0.0 line with its running requests, then
            # nothing (docs/vllm.md#engine-stats-line)
            busy = bool(w["gen"] or w["prompt"])
            if busy or was_busy:
                hit = 100.0 * c.stats.prefix_hits / c.stats.prefix_queries if c.stats.prefix_queries else 0.0
                self.log.line(
                    "APIServer",
                    "INFO",
                    "loggers.py:127",
                    f"Engine 000: Avg prompt throughput: {w['prompt'] / interval:.1f} tokens/s, "
                    f"Avg generation throughput: {w['gen'] / interval:.1f} tokens/s, "
                    f"Running: {len(c.running)} reqs, Waiting: {len(c.waiting)} reqs, "
                    f"GPU KV cache usage: {100 * c.kv_usage():.1f}%, Prefix cache hit rate: {hit:.1f}%",
                )
                if w["drafts"]:
                    mean_len = 1 + w["accepted"] / w["drafts"]
                    rate = 100.0 * w["accepted"] / w["draft_tokens"]
                    self.log.line(
                        "APIServer",
                        "INFO",
                        "metrics.py:96",
                        f"SpecDecoding metrics: Mean acceptance length: {mean_len:.2f}, "
                        f"Accepted throughput: {w['accepted'] / interval:.2f} tokens/s, "
                        f"Drafted throughput: {w['draft_tokens'] / interval:.2f} tokens/s, "
                        f"Accepted: {w['accepted']} tokens, Drafted: {w['draft_tokens']} tokens, "
                        f"Avg Draft acceptance rate: {rate:.1f}%",
                    )
            for k in w:
                w[k] = 0
            was_busy = busy
