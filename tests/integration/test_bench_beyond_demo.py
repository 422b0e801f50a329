"""The benchmark beyond one batch, against the simulated engine and a launched demo cluster.

- ``--depth``: each depth's prompt is sized by the engine's own count (``usage``, after the filler's
  calibration), and its single-stream decode follows the sim's attention term (the schedule's
  ``attn_s_per_ktok`` beyond ``attn_free_tokens``): slower with more context, as the schedule predicts.
- ``bench --suite quick --repeat 2 --depth 0,2k`` through the tunnel of a launched demo cluster: every
  decode and depth cell measured twice (mean, std, interval), every cell with the sampler's GPU power, SM
  clock and RDMA rates of all four ranks and an energy per token; report.html beside summary.md; the
  engine container still running afterwards (the bench removes and stops nothing).
"""

from __future__ import annotations

import asyncio
import json
import os
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import httpx
import pytest
from simcluster import TEST_SPEED, SimCluster
from test_launch_demo import cli, prepare_hosts

from cockpit.api.client import ApiClient
from cockpit.bench import prompts as P
from cockpit.bench.runner import Runner
from cockpit.bench.store import RunStore
from cockpit.bench.suite import K, plan_for
from cockpit.hosts import Fleet
from cockpit.recipe.launch import inspect_container
from cockpit.sim.engine.spawn import ready_engine

MODEL = "deepseek-v4.1-flash"
SPEED = 8.0
DEPTHS = (0, 8 * K, 16 * K)


@pytest.fixture(scope="module")
def engine(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    with ready_engine(tmp_path_factory.mktemp("engine") / "engine.log", "--speed", str(SPEED)) as url:
        yield url


def _schedule(url: str) -> dict[str, Any]:
    return dict(httpx.get(url + "/sim/schedule", timeout=5).json()["model"])


async def _depth_run(url: str, out: Path, depths: tuple[int, ...], repeat: int = 1) -> Runner:
    prompts = P.load()
    plan = replace(plan_for("quick", prompts), categories=(), prefill_sizes=(), needles=(), checks=False)
    async with ApiClient(url) as client:
        runner = Runner(client, MODEL, plan, prompts, store=RunStore(out), depths=depths, repeat=repeat)
        await runner.run()
    assert runner.status == "complete", runner.reason
    return runner


async def test_depth_prompts_are_sized_by_the_engines_usage(engine: str, tmp_path: Path) -> None:
    runner = await _depth_run(engine, tmp_path / "run", DEPTHS)
    by_depth = {r.extra["depth_tokens"]: r for r in runner.records if r.kind == "depth"}
    calibration = [r for r in runner.records if r.kind == "calibrate"]
    assert len(calibration) == 2 and all(r.prompt_tokens for r in calibration)   # sized by usage counts
    base = by_depth[0].prompt_tokens
    assert base is not None and base < 200                                   # depth 0: the prose prompt alone
    for cell in runner.depth:
        rec = by_depth[cell.depth]
        assert cell.prompt_tokens == rec.prompt_tokens               # the engine's count, as sent back
        if cell.depth:
            assert rec.prompt_tokens is not None
            assert abs(rec.prompt_tokens - base - cell.depth) <= 0.03 * cell.depth + 64, (cell.depth, rec)
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert [d["depth"] for d in summary["depth"]] == list(DEPTHS)
    assert summary["figures"]["depth.16384.decode_tps"] == summary["depth"][2]["decode_tps"]
    assert "## Decode at context depth" in (tmp_path / "run" / "summary.md").read_text()
    assert "Decode at depth" in (tmp_path / "run" / "report.html").read_text()


@pytest.mark.timing
async def test_depth_decode_follows_the_attention_term(engine: str, tmp_path: Path) -> None:
    sch = _schedule(engine)
    runner = await _depth_run(engine, tmp_path / "run", DEPTHS)
    rates = {}
    for cell in runner.depth:
        assert cell.prompt_tokens is not None and cell.completion_tokens is not None and cell.decode_tps
        # decode steps of one stream: each adds the attention term of its context at that step
        tps = sch["tokens_per_step"]["prose"]
        steps = int((cell.completion_tokens - 1) / tps)
        ctx = [cell.prompt_tokens + 1 + i * tps for i in range(steps)]
        step_s = [sch["base_s"] + sch["per_seq_s"]
                  + sch["attn_s_per_ktok"] * max(c - sch["attn_free_tokens"], 0) / 1024 for c in ctx]
        expected = (cell.completion_tokens - 1) / (sum(step_s) * (cell.completion_tokens - 1) / (steps * tps)
                                                   * sch["time_scale"])
        assert abs(cell.decode_tps / expected - 1) <= 0.03, (cell.depth, cell.decode_tps, expected)
        rates[cell.depth] = cell.decode_tps
    assert rates[0] > rates[8 * K] > rates[16 * K]
    assert rates[16 * K] / rates[0] < 0.85


# --- a launched demo cluster, through the CLI ------------------------------------------------------------


@pytest.fixture(scope="module")
def serving(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SimCluster]:
    from cockpit.sim import cluster as sim

    tmp = tmp_path_factory.mktemp("bench")
    old = os.environ.get("XDG_STATE_HOME")
    os.environ["XDG_STATE_HOME"] = str(tmp / "state")
    toml = sim.demo_up(tmp / "cluster", speed=TEST_SPEED)
    cluster = SimCluster(tmp / "cluster", toml, "demo")
    try:
        async def prepare() -> None:
            async with Fleet(cluster.config) as fleet:
                assert await fleet.wait_connected(20)
                await prepare_hosts(fleet, cluster.config)
        asyncio.run(prepare())
        res = cli(cluster, "launch", "--yes")
        assert res.returncode == 0, res.stdout + res.stderr
        yield cluster
    finally:
        sim.down(tmp / "cluster")
        if old is None:
            os.environ.pop("XDG_STATE_HOME", None)
        else:
            os.environ["XDG_STATE_HOME"] = old


def short_prompts(path: Path) -> Path:
    """The packaged prompt set with every answer cut to 24 tokens: the demo engine decodes in real time,
    and the cells' shape, not their length, is what this test looks at."""
    data = json.loads((Path(P.__file__).parent / "prompts_v1.json").read_text())
    for cat in data["categories"].values():
        cat["max_tokens"] = 24
    path.write_text(json.dumps(data))
    return path


async def test_quick_repeat_2_depth_with_telemetry_per_cell(serving: SimCluster, tmp_path: Path) -> None:
    out = tmp_path / "run"
    res = await asyncio.to_thread(cli, serving, "bench", "--suite", "quick", "--repeat", "2", "--depth",
                                  "0,2k", "--prompts", str(short_prompts(tmp_path / "prompts.json")),
                                  "--out", str(out), "--json", timeout=300)
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    s = json.loads(res.stdout)
    assert s["ok"] and s["status"] == "complete" and s["repeat"] == 2
    assert json.loads((out / "summary.json").read_text())["repeat"] == 2
    ranks = set(serving.config.ranks)
    cells = [*s["decode"], *s["depth"]]
    assert len(s["decode"]) == 6 and [d["depth"] for d in s["depth"]] == [0, 2 * K]
    for cell in s["decode"]:
        reps = cell["repeats"]
        assert reps["n"] == 2 and len(reps["runs"]) == 2
        assert reps["runs"][0]["per_stream_tps"] == cell["per_stream_tps"]        # the card's: run 1
        low, high = reps["per_stream_tps"]["ci95"]
        assert low <= reps["per_stream_tps"]["mean"] <= high
    for cell in s["depth"]:
        assert cell["repeats"]["n"] == 2 and cell["ok"] and cell["prompt_tokens"]
    kv_seen = 0
    for cell in cells:
        t = cell["telemetry"]
        assert {r["rank"] for r in t["ranks"]} == ranks, t
        for r in t["ranks"]:
            assert r["samples"] > 0 and r["power_w"] and r["sm_mhz"], t      # the sampler's readings
            assert r["tx_gbps"] is not None and r["rx_gbps"] is not None, t
        assert t["energy_j_per_token"] and t["energy_j_per_token"] > 0 and t["energy_unknown"] is None, t
        kv_seen += t["kv_cache_pct_max"] is not None
    assert kv_seen > 0
    requests = [json.loads(x) for x in (out / "requests.jsonl").read_text().splitlines()]
    assert sum(r["kind"] == "depth" for r in requests) == 4
    assert sorted({r["extra"].get("run") for r in requests if r["kind"] == "decode"}) == [1, 2]
    md = (out / "summary.md").read_text()
    assert "## Telemetry per cell" in md and "Repeated 2 times" in md and "## Decode at context depth" in md
    page = (out / "report.html").read_text()
    assert "<svg" in page and "Telemetry per cell" in page and "<script" not in page
    async with Fleet(serving.config) as fleet:                      # nothing stopped, nothing removed
        assert await fleet.wait_connected(20)
        for rank in serving.config.ranks:
            state = await inspect_container(fleet, rank, serving.config.cluster.container_name)
            assert state is not None and state.running, rank
