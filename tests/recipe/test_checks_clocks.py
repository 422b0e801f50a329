"""Preflight's clocks check on real H200 bytes and on the shared rule's edge cases (the rule itself:
tests/telemetry/test_gpu.py)."""

from __future__ import annotations

from pathlib import Path

from cockpit.config import ClusterConfig
from cockpit.recipe import checks_host as H
from cockpit.recipe import parsers as P
from cockpit.recipe.checks import Probe, Verdict

H200 = Path(__file__).resolve().parents[1] / "fixtures" / "samples" / "h200"


def probe(cfg: ClusterConfig, rank: int, query: str) -> Probe:
    return Probe(cfg, rank, {"nvsmi.query": P.Section("nvsmi.query", query, 0)}, {})


def clocks(cfg: ClusterConfig, readings: dict[int, str]) -> dict[int, Verdict]:
    outs = {r: H.CLOCKS.evaluate(probe(cfg, r, t)) for r, t in readings.items()}
    changed = H.CLOCKS.compare(cfg, outs)  # type: ignore[misc]
    return {r: changed.get(r, o).verdict for r, o in outs.items()}


def h200_lines() -> tuple[str, list[str]]:
    """The real samples' cells in preflight's field order (name, driver, clocks.sm, clocks.max.sm,
    utilization.gpu, pstate): the idle query line and every loaded loop line."""
    q = [c.strip() for c in (H200 / "smi-query.csv").read_text().split(",")]
    idle = ", ".join([q[1], q[4], q[11], q[12], q[6], q[5]]) + "\n"
    loaded = []
    for line in (H200 / "smi-loop-loaded.csv").read_text().splitlines():
        c = [x.strip() for x in line.split(",")]     # timestamp, index, pstate, util, power, sm, max, …
        loaded.append(", ".join([q[1], q[4], c[5], c[6], c[3], c[2]]) + "\n")
    return idle, loaded


def test_the_idle_and_loaded_h200_samples_give_no_clock_failure(fixed_config: ClusterConfig) -> None:
    idle, loaded = h200_lines()
    assert idle == "NVIDIA H200, 580.159.04, 345, 1980, 0, P0\n"
    one = H.CLOCKS.evaluate(probe(fixed_config, 0, idle))
    assert one.verdict is Verdict.PASS and one.value == "345/1980 MHz, P0 0% (idle)"
    assert clocks(fixed_config, dict.fromkeys(range(4), idle)) == dict.fromkeys(range(4), Verdict.PASS)
    assert len(loaded) == 8
    for line in loaded:
        assert clocks(fixed_config, {0: line}) == {0: Verdict.PASS}
    assert set(clocks(fixed_config, dict(enumerate(loaded[:4]))).values()) == {Verdict.PASS}
    # loaded and idle H200s side by side: neither is a measure of the other
    assert clocks(fixed_config, {0: loaded[0], 1: idle}) == {0: Verdict.PASS, 1: Verdict.PASS}


def test_a_rank_at_600_under_load_fails_against_peers_at_2400(fixed_config: ClusterConfig) -> None:
    fast = "NVIDIA GB10, 580.95.05, 2400, 3003, 95, P0\n"
    slow = "NVIDIA GB10, 580.95.05, 600, 3003, 95, P0\n"
    got = clocks(fixed_config, {0: fast, 1: fast, 2: slow, 3: fast})
    assert got == {0: Verdict.PASS, 1: Verdict.PASS, 2: Verdict.FAIL, 3: Verdict.PASS}
    outs = {r: H.CLOCKS.evaluate(probe(fixed_config, r, t)) for r, t in enumerate([fast, slow])}
    failed = {**outs, **H.CLOCKS.compare(fixed_config, outs)}[1]  # type: ignore[misc]
    assert failed.remedy == H.CLOCK_REMEDY and "600/3003 MHz" in failed.value


def test_na_fields_are_unknown_not_pass(fixed_config: ClusterConfig) -> None:
    no_util = "NVIDIA GB10, 580.95.05, 900, 3003, [N/A], P0\n"
    o = H.CLOCKS.evaluate(probe(fixed_config, 0, no_util))
    assert o.verdict is Verdict.UNKNOWN and "utilisation" in o.detail and "load unknown" in o.value
    fast = "NVIDIA GB10, 580.95.05, 2400, 3003, 95, P0\n"
    assert clocks(fixed_config, {0: no_util, 1: fast}) == {0: Verdict.UNKNOWN, 1: Verdict.PASS}
    no_clock = H.CLOCKS.evaluate(probe(fixed_config, 0, "NVIDIA GB10, 580.95.05, [N/A], 3003, 95, P0\n"))
    assert no_clock.verdict is Verdict.UNKNOWN
