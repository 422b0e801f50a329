"""Command line of the simulated engine.

python -m cockpit.sim.engine vllm serve MODEL_PATH [vLLM flags]     (what the container shim runs)
python -m cockpit.sim.engine serve-ready --port P [--bind ADDR] [--speed S] [--time-scale X]
        [--fault-root DIR] ...
"""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
from collections.abc import Coroutine
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from cockpit import constants
from cockpit.sim import layout
from cockpit.sim.engine import arrival
from cockpit.sim.engine.hostio import TOTAL_MEMORY, HostIO
from cockpit.sim.engine.schedule import Schedule
from cockpit.sim.engine.serving import EngineConfig, Serving, shut_down_api
from cockpit.sim.engine.vlog import VLog

KV_BYTES_PER_TOKEN = 20 * 1024


@dataclass
class ServeArgs:
    """The vLLM flags the engine honours, plus everything else for the arg dump."""

    model_path: str
    served_model_name: str
    tensor_parallel_size: int = 1
    nnodes: int = 1
    node_rank: int = 0
    master_addr: str = "127.0.0.1"
    master_port: int = constants.COORD_PORT
    headless: bool = False
    host: str = "0.0.0.0"
    port: int = constants.API_PORT
    max_model_len: int = constants.MAXLEN
    max_num_seqs: int = constants.SEQS
    gpu_memory_utilization: float = 0.9
    spec_k: int = 0
    max_num_batched_tokens: int = 4096
    max_images: int = 4
    non_default: dict[str, Any] = field(default_factory=dict)


def _coerce(value: str) -> Any:
    """A flag value as vLLM's parser would type it: int, float, JSON object/list, else the string."""
    if value[:1] in "{[":
        import json

        try:
            return json.loads(value)
        except ValueError:
            return value
    for kind in (int, float):
        try:
            return kind(value)
        except ValueError:
            pass
    return value


def parse_serve(argv: list[str]) -> ServeArgs:
    """Parse `serve MODEL_PATH [flags]` as vLLM would (unknown flags are kept for the arg dump)."""
    import json

    p = argparse.ArgumentParser(prog="vllm serve", add_help=False)
    p.add_argument("model_tag")
    p.add_argument("--served-model-name", nargs="+")
    p.add_argument("--tensor-parallel-size", "-tp", type=int, default=1)
    p.add_argument("--nnodes", type=int, default=1)
    p.add_argument("--node-rank", type=int, default=0)
    p.add_argument("--master-addr", default="127.0.0.1")
    p.add_argument("--master-port", type=int, default=constants.COORD_PORT)
    p.add_argument("--headless", action="store_true")
    p.add_argument("--host", default="0.0.0.0")
    p.add_argument("--port", type=int, default=constants.API_PORT)
    p.add_argument("--max-model-len", type=int, default=None)
    p.add_argument("--max-num-seqs", type=int, default=256)
    p.add_argument("--gpu-memory-utilization", type=float, default=0.9)
    p.add_argument("--speculative-config")
    p.add_argument("--max-num-batched-tokens", type=int)
    ns, rest = p.parse_known_args(argv)
    spec_k = 0
    if ns.speculative_config:
        try:
            spec_k = int(json.loads(ns.speculative_config).get("num_speculative_tokens", 0))
        except (ValueError, AttributeError):
            spec_k = 0
    extra: dict[str, Any] = {}
    i = 0
    while i < len(rest):
        tok = rest[i]
        if tok.startswith("--"):
            key, eq, val = tok[2:].partition("=")
            key = key.replace("-", "_")
            if eq:
                extra[key] = _coerce(val)
            elif i + 1 < len(rest) and not rest[i + 1].startswith("--"):
                extra[key] = _coerce(rest[i + 1])
                i += 1
            elif key.startswith("no_"):
                extra[key[3:]] = False
            else:
                extra[key] = True
        i += 1
    nd: dict[str, Any] = {"model_tag": ns.model_tag}
    for key, default in (
        ("host", "0.0.0.0"),
        ("port", constants.API_PORT),
        ("headless", False),
        ("nnodes", 1),
        ("node_rank", 0),
        ("master_addr", "127.0.0.1"),
        ("master_port", constants.COORD_PORT),
    ):
        if getattr(ns, key) != default:
            nd[key] = getattr(ns, key)
    nd["model"] = ns.model_tag
    for key, engine_default in (
        ("max_model_len", None),
        ("tensor_parallel_size", 1),
        ("max_num_seqs", 256),
        ("gpu_memory_utilization", 0.9),
    ):
        if getattr(ns, key) != engine_default:
            nd[key] = getattr(ns, key)
    if ns.served_model_name:
        nd["served_model_name"] = ns.served_model_name
    if ns.speculative_config:
        nd["speculative_config"] = json.loads(ns.speculative_config) if spec_k else ns.speculative_config
    if ns.max_num_batched_tokens is not None:
        nd["max_num_batched_tokens"] = ns.max_num_batched_tokens
    nd.update(extra)
    mm = extra.get("limit_mm_per_prompt")
    max_images = int(mm.get("image", 4)) if isinstance(mm, dict) else 4
    return ServeArgs(
        model_path=ns.model_tag,
        served_model_name=(ns.served_model_name or [ns.model_tag])[0],
        tensor_parallel_size=ns.tensor_parallel_size,
        nnodes=ns.nnodes,
        node_rank=ns.node_rank,
        master_addr=ns.master_addr,
        master_port=ns.master_port,
        headless=ns.headless,
        host=ns.host,
        port=ns.port,
        max_model_len=ns.max_model_len or constants.MAXLEN,
        max_num_seqs=ns.max_num_seqs,
        gpu_memory_utilization=ns.gpu_memory_utilization,
        spec_k=spec_k,
        max_num_batched_tokens=ns.max_num_batched_tokens or 4096,
        max_images=max_images,
        non_default=nd,
    )


def kv_tokens(gmu: float) -> int:
    """KV cache size (tokens) the engine reports: what gmu x 128 GB leaves after the weights."""
    weights = 71.3 * (1 << 30)
    avail = max(1 << 30, gmu * TOTAL_MEMORY - weights - 2.1 * (1 << 30))
    return int(avail // KV_BYTES_PER_TOKEN) // 256 * 256


def schedule_from_env(base: Schedule | None = None) -> Schedule:
    """Apply R37_SIM_TIME_SCALE, R37_SIM_SEED, R37_SIM_IDLE_FACTOR overrides."""
    sch = base or Schedule()
    env = os.environ
    if env.get("R37_SIM_TIME_SCALE"):
        sch = replace(sch, time_scale=float(env["R37_SIM_TIME_SCALE"]))
    if env.get("R37_SIM_SEED"):
        sch = replace(sch, seed=int(env["R37_SIM_SEED"]))
    if env.get("R37_SIM_IDLE_FACTOR"):
        sch = replace(sch, idle_factor=float(env["R37_SIM_IDLE_FACTOR"]))
    return sch


async def serve_ready(ns: argparse.Namespace) -> int:
    sch = Schedule(
        seed=ns.seed,
        idle_factor=ns.idle_factor,
        idle_after_s=ns.idle_after,
        jitter=ns.jitter,
        time_scale=ns.time_scale / ns.speed,
    )
    log = VLog()
    cfg = EngineConfig(
        model=ns.served_model_name,
        model_path=ns.model_path,
        max_model_len=ns.max_model_len,
        max_num_seqs=ns.max_num_seqs,
        kv_tokens=kv_tokens(constants.GMU),
    )
    root = Path(ns.fault_root) if ns.fault_root else None

    def fault(name: str) -> bool:
        return root is not None and layout.fault_active(root, name)

    serving = Serving(sch, cfg, log, HostIO(None, ""), fault)
    serving.start_background()
    await serving.start_api(ns.bind, ns.port)
    log.line(
        "APIServer",
        "INFO",
        "entry.py:140",
        f"Starting vLLM server on http://{ns.bind}:{ns.port} (simulated, already booted)",
    )
    log.uvicorn("Application startup complete.")
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    await stop.wait()
    await shut_down_api(log, serving.stop, fault("traceback-on-stop"), serving)
    return 0


def ready_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m cockpit.sim.engine serve-ready",
        description="Serve the simulated API of an already-booted engine (no host root).",
    )
    p.add_argument("--port", type=int, default=constants.API_PORT)
    p.add_argument("--bind", default="127.0.0.1")
    p.add_argument("--speed", type=float, default=1.0, help="divide all engine durations by S (default 1)")
    p.add_argument("--time-scale", type=float, default=1.0, help="multiply all engine durations by X")
    p.add_argument("--seed", type=int, default=37)
    p.add_argument("--jitter", type=float, default=0.02)
    p.add_argument("--idle-factor", type=float, default=1.08)
    p.add_argument("--idle-after", type=float, default=45.0)
    p.add_argument("--served-model-name", default=constants.SERVED_MODEL)
    p.add_argument("--model-path", default="/srv/models/DeepSeek-V4.1-Flash")
    p.add_argument("--max-model-len", type=int, default=constants.MAXLEN)
    p.add_argument("--max-num-seqs", type=int, default=constants.SEQS)
    p.add_argument(
        "--fault-root",
        metavar="DIR",
        help="a host root whose fault switches apply (DIR/faults/NAME: hang, traceback-on-stop); "
        "no host files are written",
    )
    return p


USAGE = __doc__ or ""


def run_loop(main: Coroutine[Any, Any, int]) -> int:
    """Run an engine coroutine on the loop that keeps requests' kernel arrival times (``arrival.py``);
    without it, on uvloop when installed (it reacts ~150 us sooner than asyncio's loop after idling)."""
    loop = arrival.loop_factory()
    if loop is not None:
        with asyncio.Runner(loop_factory=lambda: loop) as runner:
            return runner.run(main)
    try:
        import uvloop
    except ImportError:
        return asyncio.run(main)
    return uvloop.run(main)
