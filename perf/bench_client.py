"""The benchmark client's own overhead: one decode cell of 64 and of 256 concurrent streams, measured by
the benchmark engine (`cockpit.bench.runner.Runner`) against the simulated engine, whose schedule is known.

Starts `python -m cockpit.sim.engine serve-ready` (no jitter; `--max-num-seqs` large enough for the
cell) in a process of its own and reads its timing model from `GET /sim/schedule`. For each cell size C:

- measured aggregate = the runner's `Σ completion_tokens / batch wall time` (tokens from usage);
- schedule aggregate = what the schedule predicts for C identical streams released together
  (`C * prompt / prefill_tok_s + step_time(C)` to the first tokens, then `(completion - 1) / tokens_per_step`
  steps of `step_time(C)`), with the prompt and completion tokens the server reported;
- client CPU = CPU time of this process (user + system) over the cell, per completion token and as a
  share of one core.

Target: |measured / schedule - 1| <= 2 %.

    python perf/bench_client.py [--speed 4] [--max-tokens 100] [--cells 64,256] [--loop uvloop] [--json]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import resource
import socket
import subprocess
import sys
import time
from dataclasses import replace
from typing import Any

import httpx

from cockpit.api.client import ApiClient
from cockpit.bench import prompts as P
from cockpit.bench.runner import Runner
from cockpit.bench.suite import plan_for

MODEL = "deepseek-v4.1-flash"


def _cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _prompts(max_tokens: int) -> P.PromptSet:
    base = P.load()
    raw = {"format": P.FORMAT, "version": P.VERSION, "headline_excludes": [],
           "categories": {"prose": {"max_tokens": max_tokens,
                                    "prompts": list(base.categories["prose"].prompts)}},
           "filler": list(base.filler)}
    return P.parse(raw, "bench_client")


def _expected(sch: dict[str, Any], n: int, prompt: int, completion: int) -> float:
    def step(k: int) -> float:
        return float((sch["base_s"] + sch["per_seq_s"] * k) * sch["time_scale"])
    ttft = n * prompt / sch["prefill_tok_s"] * sch["time_scale"] + step(n)
    decode = (completion - 1) / sch["tokens_per_step"]["prose"] * step(n)
    return n * completion / (ttft + decode)


async def _cell(url: str, sch: dict[str, Any], n: int, max_tokens: int) -> dict[str, Any]:
    prompts = _prompts(max_tokens)
    plan = replace(plan_for("quick", prompts, (n,)), prefill_sizes=(), needles=(), checks=False)
    async with ApiClient(url, max_connections=max(n, 64)) as client:
        runner = Runner(client, MODEL, plan, prompts)
        cpu0, t0 = _cpu(), time.perf_counter()
        await runner.run()
        cpu, wall = _cpu() - cpu0, time.perf_counter() - t0
    assert runner.status == "complete", runner.reason
    (cell,) = runner.decode
    recs = [r for r in runner.records if r.kind == "decode"]
    prompt = max(r.prompt_tokens or 0 for r in recs)
    completion = min(r.completion_tokens or 0 for r in recs)
    expected = _expected(sch, n, prompt, completion)
    tokens = sum(r.completion_tokens or 0 for r in runner.records)
    measured = cell.aggregate_tps or 0.0
    return {"streams": n, "completion_tokens_each": completion, "prompt_tokens": prompt,
            "aggregate_tps": round(measured, 2), "schedule_tps": round(expected, 2),
            "error_pct": round((measured / expected - 1) * 100, 3),
            "per_stream_tps": round(cell.per_stream_tps or 0.0, 2),
            "client_cpu_s": round(cpu, 3), "run_wall_s": round(wall, 3),
            "cpu_us_per_token": round(cpu / tokens * 1e6, 1), "cpu_share_of_core": round(cpu / wall, 3)}


async def main_async(args: argparse.Namespace) -> list[dict[str, Any]]:
    cells = [int(x) for x in args.cells.split(",")]
    port = _free_port()
    proc = subprocess.Popen([sys.executable, "-m", "cockpit.sim.engine", "serve-ready", "--port", str(port),
                             "--speed", str(args.speed), "--jitter", "0", "--max-num-seqs", str(max(cells))],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}"
    try:
        async with httpx.AsyncClient() as h:
            for _ in range(300):
                with contextlib.suppress(httpx.HTTPError):
                    if (await h.get(url + "/v1/models")).status_code == 200:
                        break
                await asyncio.sleep(0.1)
            sch = (await h.get(url + "/sim/schedule")).json()["model"]
        return [await _cell(url, sch, n, args.max_tokens) for n in cells]
    finally:
        proc.terminate()
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(10)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--speed", type=float, default=4.0)
    ap.add_argument("--max-tokens", type=int, default=100)
    ap.add_argument("--cells", default="64,256")
    ap.add_argument("--loop", choices=("asyncio", "uvloop"), default="asyncio")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    if args.loop == "uvloop":
        import uvloop
        rows = uvloop.run(main_async(args))
    else:
        rows = asyncio.run(main_async(args))
    if args.json:
        print(json.dumps(rows, indent=2))
    else:
        for r in rows:
            print(f"C{r['streams']:<4} aggregate {r['aggregate_tps']:9.2f} tok/s  "
                  f"schedule {r['schedule_tps']:9.2f}"
                  f"  error {r['error_pct']:+.2f} %  client CPU {r['client_cpu_s']:.2f} s "
                  f"({r['cpu_us_per_token']:.0f} us/token, {r['cpu_share_of_core']:.0%} of a core)")
    return 0 if all(abs(r["error_pct"]) <= 2.0 for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
