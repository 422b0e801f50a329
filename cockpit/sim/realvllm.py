"""The real vLLM as rank 0's engine of a simulated cluster (`r37-cockpit sim up --engine vllm`).

The container shim (container.py) asks `plan()` whether a container's command is the head's `vllm serve`
on a host whose spec says `engine = "vllm"`; if so it runs, instead of the simulated engine:

- the real `vllm serve` of the environment scripts/vllm-venv.sh makes (the CPU build from PyPI), on the
  tiny local model built by tinymodel.py, with the recipe's argv mapped by `real_argv` (MAPPING below:
  what the tiny model on a CPU can take is kept, the rest is dropped and recorded in the container's
  `real-vllm.json`), bound to a loopback address only (the API is never exposed);
- beside it, in the same process group (so it dies with the engine, as a container's processes do), a
  rendezvous head (`python -m cockpit.sim.realvllm head …`) on `--master-addr:--master-port` that
  welcomes the simulated workers: they boot as they do with a simulated head and see it go away (the
  head's TCPStore closing) when the real engine exits. It prints nothing into the container's log.

`find_python()` finds the vLLM environment (R37_VLLM_PYTHON, else the newest complete
`venv-vllm-*` in the cache folder scripts/vllm-venv.sh installs into) or raises NotInstalled naming the
script; `tiny_model(py)` builds the model once per machine (cached by the hash of tinymodel.py).
The sim imports nothing of the cockpit: this module reads only the sim's own files.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import fcntl
import hashlib
import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

HERE = Path(__file__).resolve().parent
BUILDER = HERE / "tinymodel.py"
VENV_SCRIPT = "scripts/vllm-venv.sh"
SERVED_DEFAULT = "deepseek-v4.1-flash"

# What the CPU build needs for the tiny model (tests/real_vllm/vllmserver.py serves it the same way).
CPU_FLAGS = ("--dtype", "float32", "--reasoning-parser", "deepseek_v3")
CPU_ENV = {"VLLM_CPU_KVCACHE_SPACE": "1", "VLLM_CPU_OMP_THREADS_BIND": "nobind"}
CAPS = {"--max-model-len": 2048, "--max-num-seqs": 8}   # the tiny model's context; a 2-core machine
# the recipe's flags and what becomes of them (docs/vllm.md has the same table)
MAPPING: dict[str, str] = {
    "MODEL_PATH": "the tiny model's folder (the simulated checkpoint holds no weights)",
    "--served-model-name": "kept",
    "--port": "kept",
    "--host": "a loopback address: the host's own 127.x address on a demo host, 127.0.0.1 in the lab",
    "--max-model-len": "kept, at most 2048 (the tiny model's context)",
    "--max-num-seqs": "kept, at most 8",
    "--trust-remote-code": "dropped (the tiny model is a plain Llama)",
    "--tensor-parallel-size": "dropped: one CPU process serves the whole model (the workers are simulated)",
    "--distributed-executor-backend": "dropped (no tensor parallelism)",
    "--nnodes": "dropped; the rendezvous head beside the engine takes the workers",
    "--node-rank": "dropped",
    "--master-addr": "dropped; the rendezvous head listens there",
    "--master-port": "dropped; the rendezvous head listens there",
    "--headless": "never on rank 0 (workers stay simulated)",
    "--gpu-memory-utilization": "dropped: the CPU build sizes its KV cache by VLLM_CPU_KVCACHE_SPACE (1 GiB)",
    "--max-num-batched-tokens": "dropped (vLLM's default for the context)",
    "--kv-cache-dtype": "dropped (fp8 KV cache is a GPU feature)",
    "--block-size": "dropped (the CPU attention backend picks its own)",
    "--speculative-config": "dropped (DeepSeek MTP needs the real model's MTP layer)",
    "--compilation-config": "dropped (CUDA graph modes mean nothing on a CPU)",
    "--limit-mm-per-prompt": "dropped (the tiny model has no vision tower)",
    "--mm-processor-cache-gb": "dropped (no multimodal processor)",
    "any other flag": "dropped and recorded in real-vllm.json",
    "added": "--dtype float32 --reasoning-parser deepseek_v3; env VLLM_CPU_KVCACHE_SPACE=1, "
             "VLLM_CPU_OMP_THREADS_BIND=nobind",
}
FLAGS_ONLY = {"--trust-remote-code", "--headless", "--enforce-eager", "--enable-auto-tool-choice",
              "--enable-prefix-caching", "--no-enable-prefix-caching", "--disable-log-requests"}
KEPT = ("--served-model-name", "--port")
# the container's -e values a single CPU process must not get: fabric interfaces and addresses this host
# does not have (gloo looks the interface up and dies), NCCL settings for GPUs it has none of
DROPPED_ENV_PREFIXES = ("NCCL_",)
DROPPED_ENV = {"GLOO_SOCKET_IFNAME", "VLLM_HOST_IP", "PYTHONPATH"}


class NotInstalled(Exception):
    """The real vLLM's environment is not there; the message names the script that makes it."""


def cache_dir() -> Path:
    base = os.environ.get("R37_CACHE_DIR") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "r37-cockpit")
    return Path(base)


def find_python() -> Path:
    """The vLLM environment's python: R37_VLLM_PYTHON, else the newest complete one in the cache."""
    hint = (f"the real vLLM is not installed: `source {VENV_SCRIPT} && r37_vllm_venv` installs it (the "
            "CPU build, ~6 min once per machine; ./scripts/test does it too), or set R37_VLLM_PYTHON to "
            "its python")
    env = os.environ.get("R37_VLLM_PYTHON")
    if env:
        py = Path(env)
        if py.is_file() and (py.parent / "vllm").is_file():
            return py
        raise NotInstalled(f"R37_VLLM_PYTHON={env} is not a python beside a `vllm` command; {hint}")
    found = [d for d in cache_dir().glob("venv-vllm-*")
             if (d / ".r37-complete").is_file() and (d / "bin" / "vllm").is_file()]
    if not found:
        raise NotInstalled(f"{hint} (looked in {cache_dir()})")
    return max(found, key=lambda d: d.stat().st_mtime) / "bin" / "python"


@contextlib.contextmanager
def _file_lock(path: Path) -> Iterator[None]:
    with path.open("w") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def tiny_model(py: Path) -> Path:
    """The tiny model's folder, built on first use with the vLLM environment's python (a few seconds),
    cached per machine by the builder's hash; a file lock keeps two builders apart."""
    digest = hashlib.sha256(BUILDER.read_bytes()).hexdigest()[:12]
    cache = cache_dir()
    cache.mkdir(parents=True, exist_ok=True)
    out = cache / f"tiny-model-{digest}"
    with _file_lock(cache / "tiny-model.lock"):
        if not (out / "config.json").is_file():
            tmp = out.with_name(out.name + ".part")
            shutil.rmtree(tmp, ignore_errors=True)
            env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
            subprocess.run([str(py), str(BUILDER), str(tmp)], check=True, stdout=subprocess.DEVNULL,
                           timeout=600, env=env)
            tmp.rename(out)
    return out


def _split(argv: list[str]) -> tuple[list[str], list[tuple[str, str | None]]]:
    """`serve` argv → (positionals, [(flag, value or None)]); `--flag=value` and `--flag value` alike."""
    pos: list[str] = []
    flags: list[tuple[str, str | None]] = []
    i = 0
    while i < len(argv):
        word = argv[i]
        if word.startswith("--"):
            name, eq, value = word.partition("=")
            if eq:
                flags.append((name, value))
            elif name in FLAGS_ONLY or i + 1 >= len(argv) or argv[i + 1].startswith("--"):
                flags.append((name, None))
            else:
                flags.append((name, argv[i + 1]))
                i += 1
        else:
            pos.append(word)
        i += 1
    return pos, flags


def is_head(argv: list[str]) -> bool:
    """`vllm serve …` of rank 0: not `--headless`, node rank 0 (or none)."""
    if argv[:2] != ["vllm", "serve"]:
        return False
    _pos, flags = _split(argv[2:])
    got = dict(flags)
    return "--headless" not in got and (got.get("--node-rank") or "0") == "0"


def loopback(bind: str) -> str:
    """The address the real API binds: the host's own 127.x address, else 127.0.0.1 (never 0.0.0.0)."""
    return bind if bind.startswith("127.") else "127.0.0.1"


def real_argv(argv: list[str], vllm: str, model: str, bind: str) -> tuple[list[str], dict[str, object]]:
    """The recipe's `vllm serve …` → the real CPU vLLM's argv, and a record of what was kept/dropped
    and where the rendezvous head listens (`head`: nnodes, master addr and port, or None)."""
    _pos, flags = _split(argv[2:])
    out = [vllm, "serve", model]
    dropped: list[str] = []
    got: dict[str, str | None] = {}
    for name, value in flags:
        got[name] = value
        if name in KEPT and value is not None:
            out += [name, value]
        elif name in CAPS and value is not None and value.isdigit():
            out += [name, str(min(int(value), CAPS[name]))]
        elif name != "--host":
            dropped.append(name if value is None else f"{name} {value}")
    out += ["--host", loopback(bind)]
    if "--served-model-name" not in got:
        out += ["--served-model-name", SERVED_DEFAULT]
    for name, cap in CAPS.items():
        if name not in got:
            out += [name, str(cap)]
    out += list(CPU_FLAGS)
    head: dict[str, object] | None = None
    nnodes, addr, port = got.get("--nnodes") or "1", got.get("--master-addr"), got.get("--master-port") or ""
    if nnodes.isdigit() and int(nnodes) > 1 and addr and port.isdigit():
        head = {"nnodes": int(nnodes), "addr": addr, "port": int(port)}
    return out, {"recipe_argv": argv, "argv": out, "dropped": dropped, "head": head}


def real_env(env: dict[str, str], model: str = "") -> dict[str, str]:
    """The container's environment for the real engine: without the fabric and GPU settings a single
    CPU process must not use, with the CPU build's settings (a container's own -e values win). vLLM's
    compile cache goes beside the tiny model (one per machine, not one per simulated host: a warm cache
    saves about a minute of every boot)."""
    out = {k: v for k, v in env.items()
           if k not in DROPPED_ENV and not k.startswith(DROPPED_ENV_PREFIXES)}
    for key, value in CPU_ENV.items():
        out.setdefault(key, value)
    if model:
        out.setdefault("VLLM_CACHE_ROOT", str(Path(model).parent / "vllm-compile-cache"))
    out["PYTHONUNBUFFERED"] = "1"
    return out


def plan(argv: list[str], spec: dict[str, object]) -> tuple[list[str], dict[str, object]] | None:
    """The real engine's argv and record if this container is the head on a host with engine "vllm"."""
    if spec.get("engine") != "vllm" or not is_head(argv):
        return None
    py = Path(str(spec.get("vllm_python") or ""))
    return real_argv(argv, str(py.parent / "vllm"), str(spec.get("vllm_model") or ""),
                     str(spec.get("api_bind") or "127.0.0.1"))


def head_command(head: dict[str, object], python: str) -> list[str]:
    return [python, "-m", "cockpit.sim.realvllm", "head", "--nnodes", str(head["nnodes"]),
            "--addr", str(head["addr"]), "--port", str(head["port"])]


async def _serve_head(nnodes: int, addr: str, port: int) -> None:
    """Welcome the simulated workers once all have said hello; heartbeats and zero ticks until killed."""
    from cockpit.sim.engine.rendezvous import Head

    head = Head(nnodes, lambda _kind, _rank, _text: None)
    await head.start(addr, port)
    await head.all_joined.wait()
    await head.welcome(nnodes)
    while True:
        await asyncio.sleep(0.5)
        head.tick(0, 0.0)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="cockpit.sim.realvllm")
    sub = p.add_subparsers(dest="cmd", required=True)
    h = sub.add_parser("head", help="the rendezvous head beside a real engine")
    h.add_argument("--nnodes", type=int, required=True)
    h.add_argument("--addr", required=True)
    h.add_argument("--port", type=int, required=True)
    sub.add_parser("mapping", help="the recipe flags → real vLLM mapping, as JSON")
    a = p.parse_args(argv)
    if a.cmd == "mapping":
        print(json.dumps(MAPPING, indent=2))
        return 0
    asyncio.run(_serve_head(a.nnodes, a.addr, a.port))
    return 0


if __name__ == "__main__":
    sys.exit(main())
