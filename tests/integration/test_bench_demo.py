"""The benchmark against the simulated engine, whose schedule is known (GET /sim/schedule).

The quick suite's per-stream decode, aggregate and prefill figures each fall within 2 % of what the
schedule predicts for the requests as they were sent (prompt and completion tokens from usage), at a
fast sim speed; a busy API is refused; a cancelled run leaves nothing running on the server.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from collections import defaultdict
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import httpx
import pytest
from simcluster import busy_request

from cockpit.api.client import ApiClient
from cockpit.api.liveness import read_sample
from cockpit.bench import prompts as P
from cockpit.bench.gate import idle_refusal
from cockpit.bench.runner import BenchEvent, CellStarted, Runner
from cockpit.bench.store import RunStore
from cockpit.bench.suite import plan_for
from cockpit.sim.engine.spawn import ready_engine

SPEED = 4.0
MODEL = "deepseek-v4.1-flash"
SIM_CATEGORY = {"prose": "prose", "coding": "code", "json": "code"}   # what the sim's text generator picks
TOLERANCE = 0.02


@pytest.fixture(scope="module")
def engine(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    with ready_engine(tmp_path_factory.mktemp("engine") / "engine.log", "--speed", str(SPEED)) as url:
        yield url


def _schedule(url: str) -> dict[str, Any]:
    return dict(httpx.get(url + "/sim/schedule", timeout=5).json()["model"])


def _step(sch: dict[str, Any], n: int) -> float:
    """Real seconds of a decode step with n sequences at the sim's time scale."""
    return (sch["base_s"] + sch["per_seq_s"] * n) * sch["time_scale"]


def _expected(sch: dict[str, Any], category: str, n: int, prompt: int,
              completion: int) -> tuple[float, float]:
    """(per-stream decode, aggregate) of n identical streams released together (schedule.predict_stream)."""
    tps = sch["tokens_per_step"][SIM_CATEGORY[category]]
    ttft = n * prompt / sch["prefill_tok_s"] * sch["time_scale"] + _step(sch, n)
    decode_s = (completion - 1) / tps * _step(sch, n)
    return (completion - 1) / decode_s, n * completion / (ttft + decode_s)


def _within(measured: float | None, expected: float, what: str) -> None:
    assert measured is not None, what
    assert abs(measured / expected - 1) <= TOLERANCE, f"{what}: {measured:.2f} vs schedule {expected:.2f}"


@pytest.mark.timing
async def test_quick_suite_within_2_percent_of_the_schedule(engine: str, tmp_path: Path) -> None:
    sch = _schedule(engine)
    assert sch["time_scale"] == pytest.approx(1 / SPEED)
    prompts = P.load()
    plan = replace(plan_for("quick", prompts), checks=False)
    async with ApiClient(engine) as client:
        runner = Runner(client, MODEL, plan, prompts, store=RunStore(tmp_path / "run"))
        await runner.run()
    assert runner.status == "complete", runner.reason
    by: dict[tuple[str, int, str], list[Any]] = defaultdict(list)
    for r in runner.records:
        by[(r.category, r.concurrency, r.kind)].append(r)
    assert {(c.category, c.concurrency) for c in runner.decode} == {
        (c, n) for c in ("prose", "coding", "json") for n in (1, 8)}
    for cell in runner.decode:
        recs = by[(cell.category, cell.concurrency, "decode")]
        prompt = max(r.prompt_tokens for r in recs)
        completion = min(r.completion_tokens for r in recs)
        assert all(r.completion_tokens == completion for r in recs)   # identical streams: the formula holds
        per, agg = _expected(sch, cell.category, cell.concurrency, prompt, completion)
        _within(cell.per_stream_tps, per, f"{cell.category} C{cell.concurrency} per-stream")
        _within(cell.aggregate_tps, agg, f"{cell.category} C{cell.concurrency} aggregate")
    (pre,) = runner.prefill
    expected = pre["prompt_tokens"] / (pre["prompt_tokens"] / sch["prefill_tok_s"] * sch["time_scale"]
                                       + _step(sch, 1))
    _within(pre["prefill_tps"], expected, "prefill")
    (needle,) = runner.needles
    assert needle["passed"], needle
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert summary["status"] == "complete"
    assert summary["spec_decode"]["available"] and summary["spec_decode"]["acceptance_rate"] > 0
    lines = (tmp_path / "run" / "requests.jsonl").read_text().splitlines()
    assert len(lines) == len(runner.records) and all(json.loads(x)["ok"] for x in lines)
    for name in ("config.json", "models.json", "metrics-before.prom", "metrics-after.prom", "summary.md"):
        assert (tmp_path / "run" / name).stat().st_size > 0


async def _busy(client: ApiClient) -> asyncio.Task[Any]:
    return await busy_request(client, MODEL, 4000)  # type: ignore[no-any-return]


async def _running_after(client: ApiClient, seconds: float = 2.0) -> int:
    deadline = time.monotonic() + seconds
    while True:
        sample = await read_sample(client)
        if sample.running + sample.waiting == 0 or time.monotonic() > deadline:
            return sample.running + sample.waiting
        await asyncio.sleep(0.05)


async def test_refuses_when_the_api_is_busy(engine: str, tmp_path: Path) -> None:
    async with ApiClient(engine) as client:
        task = await _busy(client)
        try:
            refusal = await idle_refusal(client)
            assert refusal is not None and "busy: 1 running" in refusal.reason
            out = tmp_path / "refused"
            proc = await asyncio.create_subprocess_exec(
                sys.executable, "-m", "cockpit", "bench", "--api-url", engine, "--out", str(out), "--json",
                stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
            stdout, stderr = await proc.communicate()
            assert proc.returncode == 3, stderr
            assert "benchmark refused: the API is busy" in stderr.decode()
            assert json.loads(stdout)["refused"]["code"] == "bench-busy"
            assert not out.exists()
        finally:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        assert await _running_after(client) == 0
        assert await idle_refusal(client) is None


async def test_cancel_closes_every_request_and_keeps_the_records(engine: str, tmp_path: Path) -> None:
    prompts = P.load()
    plan = replace(plan_for("quick", prompts), checks=False)
    events: list[BenchEvent] = []
    async with ApiClient(engine) as client:
        runner = Runner(client, MODEL, plan, prompts, store=RunStore(tmp_path / "run"), emit=events.append)
        task = asyncio.create_task(runner.run())
        while not any(isinstance(e, CellStarted) and e.cell == "prose C8" for e in events):
            await asyncio.sleep(0.01)
        for _ in range(100):
            if (await read_sample(client)).running == 8:
                break
            await asyncio.sleep(0.02)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        assert await _running_after(client) == 0
    assert runner.status == "cancelled"
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert summary["status"] == "cancelled"
    assert "did not complete" in (tmp_path / "run" / "summary.md").read_text()
    records = [json.loads(x) for x in (tmp_path / "run" / "requests.jsonl").read_text().splitlines()]
    cancelled = [r for r in records if (r["error"] or {}).get("kind") == "cancelled"]
    assert len(cancelled) == 8 and not any(r["ok"] for r in cancelled)


def test_ctrl_c_cancels_the_cli_run(engine: str, tmp_path: Path) -> None:
    out = tmp_path / "run"
    argv = [sys.executable, "-m", "cockpit", "bench", "--api-url", engine, "--out", str(out)]
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=dict(os.environ))
    try:
        deadline = time.monotonic() + 30
        while not (out / "requests.jsonl").exists():
            assert time.monotonic() < deadline and proc.poll() is None
            time.sleep(0.05)
        proc.send_signal(signal.SIGINT)
        _, stderr = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130, stderr
    assert "benchmark cancelled; records kept" in stderr
    assert json.loads((out / "summary.json").read_text())["status"] == "cancelled"
    assert asyncio.run(_running_now(engine)) == 0


async def _running_now(url: str) -> int:
    async with ApiClient(url) as client:
        return await _running_after(client)
