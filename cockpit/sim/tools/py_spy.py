"""`py-spy` stand-in (inside the engine's container): `py-spy dump --pid PID [--subprocesses]` in py-spy's
text format.

Real py-spy prints, per process, `Process PID: CMDLINE`, `Python vX.Y.Z (EXE)`, a blank line, then every
thread as `Thread 0xID (STATUS): "NAME"` (STATUS: active, idle, gil, active+gil) followed by its frames,
innermost first, each `    FUNCTION (FILE:LINE)`. What the simulated engine's threads do comes from
`<root>/run/pystate.json` (the engine writes it): serving, idle (waiting for work), collective (spinning in
NCCL all_reduce, waiting for a peer) or stalled (never entered the collective). PID 1 is the container's
main process; with `--subprocesses` its children (EngineCore, the worker) follow. No engine running: the
real tool's error for a process that does not exist, exit 1.
"""

from __future__ import annotations

import json
import os
import sys

from cockpit.sim.tools import _host

USAGE = """py-spy 0.4.0
Sampling profiler for Python programs

USAGE:
    py-spy <SUBCOMMAND>

SUBCOMMANDS:
    record    Records stack trace information to a flamegraph, speedscope or raw file
    top       Displays a top like view of functions consuming CPU
    dump      Dumps stack traces for a target program to stdout
    help      Print this message or the help of the given subcommand(s)
"""
PYTHON = "Python v3.12.3 (/usr/bin/python3.12)"
VLLM = "vllm/"
TORCH = "torch/"

LOOP = [("select", "selectors.py:468"), ("_run_once", "asyncio/base_events.py:1949"),
        ("run_forever", "asyncio/base_events.py:641"), ("run_until_complete", "asyncio/base_events.py:674"),
        ("run", "uvloop/__init__.py:109"), ("main", "vllm/entrypoints/cli/main.py:54"),
        ("<module>", "vllm:8")]
ENGINE_IDLE = [("wait", "threading.py:355"), ("get", "queue.py:171"),
               ("_process_input_queue", VLLM + "v1/engine/core.py:712"),
               ("run_busy_loop", VLLM + "v1/engine/core.py:701"),
               ("run_engine_core", VLLM + "v1/engine/core.py:688"), ("run", "multiprocessing/process.py:108")]
ENGINE_BUSY = [("get_response", VLLM + "v1/executor/multiproc_executor.py:243"),
               ("collective_rpc", VLLM + "v1/executor/multiproc_executor.py:262"),
               ("execute_model", VLLM + "v1/executor/multiproc_executor.py:174"),
               ("step", VLLM + "v1/engine/core.py:284"),
               ("_process_engine_step", VLLM + "v1/engine/core.py:740"),
               ("run_busy_loop", VLLM + "v1/engine/core.py:704"),
               ("run_engine_core", VLLM + "v1/engine/core.py:688"), ("run", "multiprocessing/process.py:108")]
WORKER_TAIL = [("worker_busy_loop", VLLM + "v1/executor/multiproc_executor.py:597"),
               ("worker_main", VLLM + "v1/executor/multiproc_executor.py:566"),
               ("run", "multiprocessing/process.py:108")]
WORKER_WAIT = [("acquire_read", VLLM + "distributed/device_communicators/shm_broadcast.py:447"),
               ("dequeue", VLLM + "distributed/device_communicators/shm_broadcast.py:508"),
               *WORKER_TAIL]
WORKER_COLLECTIVE = [("all_reduce", TORCH + "distributed/distributed_c10d.py:2806"),
                     ("all_reduce", VLLM + "distributed/device_communicators/pynccl.py:127"),
                     ("all_reduce", VLLM + "distributed/parallel_state.py:381"),
                     ("tensor_model_parallel_all_reduce", VLLM + "distributed/communication_op.py:14"),
                     ("forward", VLLM + "model_executor/layers/linear.py:1290"),
                     ("forward", VLLM + "model_executor/models/deepseek_v2.py:612"),
                     ("execute_model", VLLM + "v1/worker/gpu_model_runner.py:1411"),
                     ("execute_model", VLLM + "v1/worker/gpu_worker.py:311"), *WORKER_TAIL]
WORKER_SERVING = [("_sample", VLLM + "v1/worker/gpu_model_runner.py:1502"),
                  ("execute_model", VLLM + "v1/worker/gpu_model_runner.py:1460"),
                  ("execute_model", VLLM + "v1/worker/gpu_worker.py:311"), *WORKER_TAIL]


def _state() -> dict | None:
    try:
        with open(os.path.join(_host.root(), "run", "pystate.json")) as f:
            value = json.load(f)
    except (OSError, ValueError):
        return None
    return value if isinstance(value, dict) else None


def _thread(tid: int, status: str, name: str, frames: list[tuple[str, str]]) -> str:
    head = f'Thread 0x{tid:X} ({status}): "{name}"\n'
    return head + "".join(f"    {fn} ({where})\n" for fn, where in frames)


def _process(pid: int, cmdline: str, threads: list[str]) -> str:
    return f"Process {pid}: {cmdline}\n{PYTHON}\n\n" + "".join(threads)


def dump(pid: int, subprocesses: bool, st: dict) -> str:
    activity, role, rank = st.get("activity", "idle"), st.get("role", "head"), int(st.get("rank", 0))
    base = 0x7F3A1C2B5740 + rank * 0x1000000
    if role == "head":
        main = _process(1, "/usr/bin/python3.12 /usr/local/bin/vllm serve /models/DeepSeek-V4.1-Flash "
                           "--tensor-parallel-size 4", [_thread(base, "idle", "MainThread", LOOP)])
    else:
        main = _process(1, "/usr/bin/python3.12 /usr/local/bin/vllm serve /models/DeepSeek-V4.1-Flash "
                           "--headless", [_thread(base, "idle", "MainThread",
                                                  [("join", "multiprocessing/popen_fork.py:27"),
                                                   ("wait", VLLM + "v1/executor/multiproc_executor.py:388"),
                                                   ("run_headless", VLLM + "entrypoints/cli/serve.py:121"),
                                                   ("main", "vllm/entrypoints/cli/main.py:54")])])
    if pid != 1 or not subprocesses:
        return main if pid == 1 else ""
    out = [main]
    if role == "head":
        core = ENGINE_IDLE if activity == "idle" else ENGINE_BUSY
        out.append(_process(97, "VLLM::EngineCore", [_thread(base + 0x2000, "idle" if activity == "idle"
                                                              else "active", "MainThread", core)]))
    frames = {"collective": WORKER_COLLECTIVE, "serving": WORKER_SERVING}.get(activity, WORKER_WAIT)
    status = "active" if activity in ("collective", "serving") else "idle"
    worker = _thread(base + 0x4000, status, "MainThread", frames)
    out.append(_process(131, f"VLLM::Worker_TP{rank}", [worker]))
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if not args or args[0] in ("-h", "--help", "help"):
        sys.stdout.write(USAGE)
        return 0 if args else 2
    if args[0] in ("-V", "--version"):
        print("py-spy 0.4.0")
        return 0
    if args[0] != "dump":
        print(f"error: unrecognized subcommand '{args[0]}'", file=sys.stderr)
        return 2
    pid: int | None = None
    subprocesses = False
    i = 1
    while i < len(args):
        a = args[i]
        if a in ("-p", "--pid") and i + 1 < len(args):
            i += 1
            pid = int(args[i]) if args[i].isdigit() else None
        elif a.startswith("--pid="):
            pid = int(a[6:]) if a[6:].isdigit() else None
        elif a in ("-s", "--subprocesses"):
            subprocesses = True
        i += 1
    if pid is None:
        print("error: the following required arguments were not provided:\n  --pid <pid>", file=sys.stderr)
        return 2
    st = _state()
    text = dump(pid, subprocesses, st) if st is not None else ""
    if not text:
        print(f"Error: Failed to find process {pid} - check if it is running", file=sys.stderr)
        return 1
    sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
