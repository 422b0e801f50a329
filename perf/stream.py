"""Streaming client benchmark: CPU time per streamed token, and TTFT / decode tok/s against ground truth.

Starts the simulated engine (`python -m cockpit.sim.engine serve-ready`, no jitter, no idle boost) in a
process of its own, reads its timing model from `GET /sim/schedule`, and streams requests through the
cockpit's `ApiClient` (thinking off, prose), alternating a short prompt (the card's smoke request size)
and a ~4000-token one. For each request:

- client CPU per token = process CPU time of this (client) process while streaming / completion tokens
  (from `usage`);
- TTFT error = client TTFT vs the schedule's `prompt_tokens / prefill_tok_s + step_time(1)`;
- decode error = client `(completion_tokens - 1) / (t_end - t_first)` vs the schedule's single-stream rate.

The engine keeps that schedule from the kernel's receive time of the request (cockpit/sim/engine/arrival.py)
and writes each step's chunks at their due time, so its own Python latency stays out of the figures. The
engine's per-request timings (`/metrics` histograms `time_to_first_token_seconds`,
`request_decode_time_seconds`, read before and after each request) are reported too: client minus engine
is the client's own measurement error. The schedule's rate is a long-run mean; a 400-token answer ends on
a partial step, which puts the engine itself 0.3 % under it.

    python perf/stream.py [--speed 1] [--requests 4] [--max-tokens 400] [--interval S]
                                [--loop uvloop] [--tunnel] [--json]

``--interval`` is the client's frame: after the first token it reads the socket at most that often
(default: the client's own, 0.3 s; 0 = every piece as it arrives). ``--loop uvloop`` runs the client on
uvloop, as the headless ``chat`` and ``smoke`` commands do (the Textual app runs on asyncio's loop).
``--tunnel`` goes the operator's default way: through an SSH local forward of the cockpit's own host
connection (``Host.forward_local``) to a one-host demo cluster whose SSH server runs in a process of its
own, so the client's CPU includes the asyncssh work of the tunnel.

Targets: |error| <= 1 %, <= 50 us CPU per token.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import statistics
import subprocess
import tempfile
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from cockpit.api import ApiClient, ChatRequest, Finished, StreamError
from cockpit.api.client import STREAM_INTERVAL
from cockpit.sim.engine.spawn import free_port, spawn_ready

REPO = Path(__file__).resolve().parents[1]
CPU_TARGET_US = 50.0
ERROR_TARGET_PCT = 1.0
SHORT_PROMPT = "Write a long essay about the ocean."
FILLER = "The tide comes in and goes out along the quiet harbour wall every day. "


def start_engine(port: int, speed: float, bind: str = "127.0.0.1") -> subprocess.Popen[bytes]:
    """The engine with no jitter and no idle boost, so the schedule is the ground truth."""
    return spawn_ready(port, "--speed", str(speed), "--jitter", "0", "--idle-factor", "1.0", "--bind", bind)


@contextlib.asynccontextmanager
async def tunnelled_engine(speed: float) -> AsyncIterator[tuple[str, subprocess.Popen[bytes]]]:
    """An engine on a one-host demo cluster's address, reached through the cockpit's SSH tunnel."""
    from cockpit.config import load_config
    from cockpit.hosts import Fleet
    from cockpit.sim.cluster import demo_up, down

    with tempfile.TemporaryDirectory(prefix="r37-bench-") as tmp:
        cfg = load_config(demo_up(Path(tmp), n=1))
        try:
            port = free_port()
            proc = start_engine(port, speed, bind=cfg.fabric_ips()[0])
            try:
                async with Fleet(cfg) as fleet:
                    if not await fleet.wait_connected(20):
                        raise SystemExit("the demo host's SSH server did not answer")
                    local = await fleet[0].forward_local("127.0.0.1", port)  # as the chat pane does
                    yield f"http://127.0.0.1:{local}", proc
            finally:
                proc.terminate()
                proc.wait(10)
        finally:
            down(Path(tmp))


async def wait_ready(client: ApiClient, proc: subprocess.Popen[bytes] | None, timeout: float = 30) -> None:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if proc is not None and proc.poll() is not None:
            raise SystemExit(f"the simulated engine exited with {proc.returncode}")
        if (await client.health()).ok:
            return
        await asyncio.sleep(0.1)
    raise SystemExit("the simulated engine did not become ready")


async def schedule(client: ApiClient) -> dict[str, Any]:
    resp = await client._http.get("/sim/schedule")  # the sim's own route: ground truth, not the cockpit's API
    resp.raise_for_status()
    info: dict[str, Any] = resp.json()
    return info["model"]


def metric_sums(text: str) -> dict[str, float]:
    """`name_sum` and `name_count` values of the engine's /metrics (one engine, no label split)."""
    out: dict[str, float] = {}
    for line in text.splitlines():
        if line.startswith("vllm:") and ("_sum{" in line or "_count{" in line):
            name, _, value = line.rpartition(" ")
            out[name.split("{")[0]] = float(value)
    return out


async def engine_timing(client: ApiClient, before: dict[str, float]) -> tuple[float, float]:
    """(TTFT s, decode s) the engine measured for the one request since `before`."""
    after = metric_sums(await client.metrics_text())

    def delta(name: str) -> float:
        n = after[f"vllm:{name}_count"] - before.get(f"vllm:{name}_count", 0.0)
        if n != 1:
            raise SystemExit(f"expected one finished request in {name}, saw {n:g} (is the engine shared?)")
        return after[f"vllm:{name}_sum"] - before.get(f"vllm:{name}_sum", 0.0)

    return delta("time_to_first_token_seconds"), delta("request_decode_time_seconds")


def expected(model: dict[str, Any], prompt_tokens: int) -> tuple[float, float]:
    """(TTFT s, decode tok/s) of a single prose stream, on the engine's clock."""
    step1 = (model["base_s"] + model["per_seq_s"]) * model["time_scale"]
    ttft = prompt_tokens / model["prefill_tok_s"] * model["time_scale"] + step1
    return ttft, model["tokens_per_step"]["prose"] / step1


async def one(client: ApiClient, prompt: str, max_tokens: int) -> dict[str, Any]:
    req = ChatRequest(
        [{"role": "user", "content": prompt}],
        thinking=False,
        temperature=0,
        top_p=None,
        max_tokens=max_tokens,
    )
    cpu0 = time.process_time()
    async with client.chat_stream(req) as stream:
        async for event in stream:
            if isinstance(event, StreamError):
                raise SystemExit(f"stream failed: {event.message}")
            if isinstance(event, Finished):
                result = event.result
    cpu = time.process_time() - cpu0
    stats = result.stats
    assert stats is not None and result.usage is not None
    return {
        "prompt_tokens": result.usage.prompt_tokens,
        "completion_tokens": result.usage.completion_tokens,
        "chunks": stats.chunks,
        "ttft_s": stats.ttft_s,
        "decode_tps": stats.decode_tps,
        "cpu_s": cpu,
        "cpu_us_per_token": cpu / result.usage.completion_tokens * 1e6,
    }


@contextlib.asynccontextmanager
async def engine(args: argparse.Namespace) -> AsyncIterator[tuple[str, subprocess.Popen[bytes] | None]]:
    """The engine's URL (and process, if this bench started it)."""
    if args.url is not None:
        yield args.url, None
    elif args.tunnel:
        async with tunnelled_engine(args.speed) as got:
            yield got
    else:
        port = free_port()
        proc = start_engine(port, args.speed)
        try:
            yield f"http://127.0.0.1:{port}", proc
        finally:
            proc.terminate()
            proc.wait(10)


async def run(args: argparse.Namespace) -> dict[str, Any]:
    async with engine(args) as (url, proc), ApiClient(url, stream_interval=args.interval) as client:
        await wait_ready(client, proc)
        model = await schedule(client)
        await one(client, "Say hello.", 8)  # warm-up: connection pool, imports, JIT-free paths
        rows = []
        for i in range(args.requests):
            long_prompt = i % 2 == 1
            prompt = f"[{i}] " + (
                FILLER * args.filler_repeats + SHORT_PROMPT if long_prompt else SHORT_PROMPT
            )
            before = metric_sums(await client.metrics_text())
            row = await one(client, prompt, args.max_tokens)
            eng_ttft, eng_decode = await engine_timing(client, before)
            eng_tps = (row["completion_tokens"] - 1) / eng_decode
            row["engine_ttft_s"] = eng_ttft
            row["engine_decode_tps"] = eng_tps
            row["client_vs_engine_ttft_ms"] = (row["ttft_s"] - eng_ttft) * 1000
            row["client_vs_engine_ttft_pct"] = (row["ttft_s"] - eng_ttft) / eng_ttft * 100
            row["client_vs_engine_decode_pct"] = (row["decode_tps"] - eng_tps) / eng_tps * 100
            ttft_exp, tps_exp = expected(model, row["prompt_tokens"])
            row["ttft_expected_s"] = ttft_exp
            row["ttft_error_pct"] = (row["ttft_s"] - ttft_exp) / ttft_exp * 100
            row["ttft_error_ms"] = (row["ttft_s"] - ttft_exp) * 1000
            row["decode_expected_tps"] = tps_exp
            row["decode_error_pct"] = (row["decode_tps"] - tps_exp) / tps_exp * 100
            rows.append(row)
    tokens = sum(r["completion_tokens"] for r in rows)
    cpu_us = sum(r["cpu_s"] for r in rows) / tokens * 1e6
    worst_ttft = max(abs(r["ttft_error_pct"]) for r in rows)
    worst_decode = max(abs(r["decode_error_pct"]) for r in rows)
    return {
        "url": url,
        "speed": args.speed,
        "loop": args.loop,
        "via": "tunnel" if args.tunnel else "direct",
        "interval_s": args.interval,
        "requests": rows,
        "tokens": tokens,
        "cpu_us_per_token": cpu_us,
        "chunks_per_token": sum(r["chunks"] for r in rows) / tokens,
        "ttft_error_pct_worst": worst_ttft,
        "ttft_error_ms_median": statistics.median(r["ttft_error_ms"] for r in rows),
        "decode_error_pct_worst": worst_decode,
        "client_vs_engine_ttft_pct_worst": max(abs(r["client_vs_engine_ttft_pct"]) for r in rows),
        "client_vs_engine_ttft_ms_median": statistics.median(r["client_vs_engine_ttft_ms"] for r in rows),
        "client_vs_engine_decode_pct_worst": max(abs(r["client_vs_engine_decode_pct"]) for r in rows),
        "targets": {"cpu_us_per_token": CPU_TARGET_US, "error_pct": ERROR_TARGET_PCT},
        "pass": cpu_us <= CPU_TARGET_US
        and worst_ttft <= ERROR_TARGET_PCT
        and worst_decode <= ERROR_TARGET_PCT,
    }


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument(
        "--speed", type=float, default=1.0, help="engine speed-up (1 = the card: 50.5 tok/s single stream)"
    )
    p.add_argument(
        "--requests", type=int, default=4, help="measured requests (alternating short/long prompt)"
    )
    p.add_argument("--max-tokens", type=int, default=400)
    p.add_argument("--filler-repeats", type=int, default=250, help="filler sentences in the long prompt")
    p.add_argument("--url", help="use a running simulated engine instead of starting one")
    p.add_argument("--interval", type=float, default=STREAM_INTERVAL,
                   help=f"client read frame after the first token, s (default {STREAM_INTERVAL:g})")
    p.add_argument("--loop", choices=("asyncio", "uvloop"), default="asyncio",
                   help="event loop of the client (uvloop: as the chat/smoke commands run)")
    p.add_argument("--tunnel", action="store_true",
                   help="through the cockpit's SSH tunnel to a one-host demo cluster (the operator's way)")
    p.add_argument("--json", action="store_true")
    args = p.parse_args(argv)
    if args.loop == "uvloop":
        import uvloop

        out = uvloop.run(run(args))
    else:
        out = asyncio.run(run(args))
    if args.json:
        print(json.dumps(out, indent=2))
    else:
        print(
            f"{'prompt':>7} {'tokens':>6} {'chunks':>6} {'TTFT ms':>8} {'sched':>8} {'engine':>8} "
            f"{'tok/s':>7} {'sched':>7} {'engine':>7} {'CPU us/tok':>10}"
        )
        for r in out["requests"]:
            print(
                f"{r['prompt_tokens']:>7} {r['completion_tokens']:>6} {r['chunks']:>6} "
                f"{r['ttft_s'] * 1000:>8.2f} {r['ttft_expected_s'] * 1000:>8.2f} "
                f"{r['engine_ttft_s'] * 1000:>8.2f} "
                f"{r['decode_tps']:>7.2f} {r['decode_expected_tps']:>7.2f} {r['engine_decode_tps']:>7.2f} "
                f"{r['cpu_us_per_token']:>10.1f}"
            )
        print(
            f"client CPU per token: {out['cpu_us_per_token']:.1f} us (target <= {CPU_TARGET_US:g}; "
            f"frame {args.interval:g} s, {args.loop} loop, engine speed {args.speed:g}, {out['via']})"
        )
        print(
            f"vs schedule: TTFT error worst {out['ttft_error_pct_worst']:.2f} %, "
            f"median {out['ttft_error_ms_median']:+.2f} ms; decode tok/s error worst "
            f"{out['decode_error_pct_worst']:.2f} % (target <= {ERROR_TARGET_PCT:g} %)"
        )
        print(
            f"client vs engine's own timing: TTFT worst {out['client_vs_engine_ttft_pct_worst']:.2f} % "
            f"(median {out['client_vs_engine_ttft_ms_median']:+.2f} ms), "
            f"decode worst {out['client_vs_engine_decode_pct_worst']:.2f} %"
        )
        print("PASS" if out["pass"] else "FAIL")
    return 0 if out["pass"] else 1


if __name__ == "__main__":
    raise SystemExit(main())
