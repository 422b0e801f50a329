"""GPU readings from real nvidia-smi bytes (an H200, idle and loaded) and GB10-style lines, and the one
SM clock rule (`clock_verdicts`) that preflight's clocks check and the Stats pane share."""

from __future__ import annotations

from pathlib import Path

import pytest

from cockpit.telemetry.gpu import (
    ClockVerdict,
    GpuParseError,
    GpuReading,
    clock_verdicts,
    is_loaded,
    parse_gpu_line,
    parse_gpu_lines,
)

H200 = Path(__file__).resolve().parents[1] / "fixtures" / "samples" / "h200"
QUERY = ["index", "name", "uuid", "pci.bus_id", "driver_version", "pstate", "utilization.gpu",
         "utilization.memory", "temperature.gpu", "power.draw", "power.limit", "clocks.sm", "clocks.max.sm",
         "clocks.mem", "memory.total", "memory.used", "memory.free", "clocks_event_reasons.active",
         "fan.speed", "compute_mode"]   # the fixture README's smi-query.csv command
LOOP_IDLE = ["timestamp", "index", "utilization.gpu", "power.draw", "clocks.sm", "temperature.gpu"]
LOOP_LOADED = ["timestamp", "index", "pstate", "utilization.gpu", "power.draw", "clocks.sm", "clocks.max.sm",
               "temperature.gpu", "memory.used"]
PREFLIGHT = ["name", "driver_version", "clocks.sm", "clocks.max.sm", "utilization.gpu", "pstate"]
GB10_MEM = [*PREFLIGHT, "memory.total", "memory.used", "power.draw"]


def readings(name: str, fields: list[str]) -> list[GpuReading]:
    out = parse_gpu_lines((H200 / name).read_text(), fields)
    assert out and all(isinstance(r, GpuReading) for r in out), out
    return [r for r in out if isinstance(r, GpuReading)]


def test_every_line_of_the_h200_query_sample_parses() -> None:
    (r,) = readings("smi-query.csv", QUERY)
    assert (r.index, r.name, r.pstate, r.util, r.temp_c, r.power_w, r.sm, r.max_sm) == \
        (0, "NVIDIA H200", "P0", 0, 42, 78.79, 345, 1980)
    assert (r.mem_total_mib, r.mem_used_mib, r.memory_kind) == (143771, 0, "discrete")
    assert r.timestamp is None


def test_every_line_of_the_h200_loop_samples_parses() -> None:
    idle = readings("smi-loop.csv", LOOP_IDLE)
    assert len(idle) == len((H200 / "smi-loop.csv").read_text().splitlines())
    assert {(r.util, r.sm, r.pstate, r.max_sm) for r in idle} == {(0, 345, None, None)}
    assert idle[0].timestamp == "2026/12/01 07:55:46.669" and idle[0].power_w == 106.86
    assert all(r.memory_kind is None for r in idle)          # no memory field asked: not "unified"
    loaded = readings("smi-loop-loaded.csv", LOOP_LOADED)
    assert len(loaded) == len((H200 / "smi-loop-loaded.csv").read_text().splitlines())
    assert all(r.util == 100 and r.pstate == "P0" and r.max_sm == 1980 and r.mem_used_mib == 1011
               for r in loaded)
    assert {r.sm for r in loaded} <= set(range(1440, 1531))
    assert all(r.memory_kind == "discrete" for r in loaded)
    assert all(r.power_w is not None and 680 < r.power_w < 710 for r in loaded)


def test_the_bad_field_message_is_a_clear_error() -> None:
    out = parse_gpu_lines((H200 / "smi-bad-field.txt").read_text(), PREFLIGHT)
    assert out and all(isinstance(e, GpuParseError) for e in out)
    first = out[0]
    assert isinstance(first, GpuParseError)
    assert first.line.startswith('Field "bogus.field" is not a valid field') and "1 cells for 6 fields" \
        in first.reason


def test_gb10_lines_read_as_unified_memory_and_na_is_none() -> None:
    r = parse_gpu_line("NVIDIA GB10, 580.95.05, 2405, 3003, 94, P0, [N/A], [N/A], 41.20", GB10_MEM)
    assert isinstance(r, GpuReading)
    assert (r.sm, r.max_sm, r.util, r.pstate, r.power_w) == (2405, 3003, 94, "P0", 41.2)
    assert (r.mem_total_mib, r.mem_used_mib, r.memory_kind) == (None, None, "unified")
    ns = parse_gpu_line("NVIDIA GB10, 580.95.05, [Not Supported], 3003, , P8, Not Supported, [N/A], [N/A]",
                        GB10_MEM)
    assert isinstance(ns, GpuReading) and ns.sm is None and ns.util is None and ns.power_w is None
    assert ns.memory_kind == "unified"
    # without nounits the units follow the numbers
    u = parse_gpu_line("NVIDIA GB10, 580.95.05, 2405 MHz, 3003 MHz, 94 %, P0", PREFLIGHT)
    assert isinstance(u, GpuReading) and (u.sm, u.max_sm, u.util) == (2405, 3003, 94)


@pytest.mark.parametrize("line", [
    "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver.",
    "name, driver_version, clocks.sm, clocks.max.sm, utilization.gpu, pstate",
    "NVIDIA GB10, 580.95.05, fast, 3003, 94, P0",
    "NVIDIA GB10, 580.95.05, ²405, 3003, 94, P0",
    "NVIDIA GB10, 580.95.05, " + "9" * 5000 + ", 3003, 94, P0",
    "NVIDIA GB10, 580.95.05, 2405, 3003, 94, Pfast",
    "NVIDIA GB10, 580.95.05, 2405, 3003, 94",
    "\x00\x1b[31m, , , , ,",
])
def test_garbage_lines_are_errors_not_readings(line: str) -> None:
    r = parse_gpu_line(line, PREFLIGHT)
    assert isinstance(r, GpuParseError) and r.reason and len(r.line) <= 160


def test_a_bad_timestamp_is_an_error() -> None:
    bad = parse_gpu_line("yesterday, 0, 0, 106.86, 345, 43", LOOP_IDLE)
    assert isinstance(bad, GpuParseError) and bad.reason.startswith("timestamp")


def g(sm: int | None, util: int | None, pstate: str = "P0", mx: int | None = 3003) -> GpuReading:
    return GpuReading(sm=sm, util=util, pstate=pstate, max_sm=mx)


def states(v: dict[int, ClockVerdict]) -> dict[int, str]:
    return {k: x.state for k, x in v.items()}


def test_the_real_h200_idle_and_loaded_are_healthy() -> None:
    (idle,) = readings("smi-query.csv", QUERY)
    assert is_loaded(idle) is False                     # P0 at 0 %: idle, whatever the pstate says
    assert states(clock_verdicts({0: idle})) == {0: "ok"}
    for r in readings("smi-loop-loaded.csv", LOOP_LOADED):   # 1440-1530 of 1980 at the 700 W cap
        assert states(clock_verdicts({0: r})) == {0: "ok"}
        assert states(clock_verdicts(dict.fromkeys(range(4), r))) == dict.fromkeys(range(4), "ok")
    loaded = readings("smi-loop-loaded.csv", LOOP_LOADED)
    assert set(states(clock_verdicts(dict(enumerate(loaded)))).values()) == {"ok"}


def test_a_slow_rank_under_load_is_latched_against_its_loaded_peers() -> None:
    v = clock_verdicts({0: g(2400, 95), 1: g(2400, 96), 2: g(2400, 94), 3: g(600, 95)})
    assert states(v) == {0: "ok", 1: "ok", 2: "ok", 3: "latched"} and "below half" in v[3].why
    v = clock_verdicts({0: g(2400, 95, mx=None), 1: g(2400, 96, mx=None), 3: g(600, 95, mx=None)})
    assert states(v) == {0: "ok", 1: "ok", 3: "latched"} and "loaded peers (2400 MHz)" in v[3].why
    # 1600 of 3003 is above half of the maximum: only the peers tell it is slow
    assert states(clock_verdicts({0: g(2400, 95), 1: g(1600, 95)})) == {0: "ok", 1: "latched"}
    assert states(clock_verdicts({1: g(1600, 95)})) == {1: "ok"}
    # alone under load: only the coarse half-of-maximum floor
    assert states(clock_verdicts({0: g(1400, 95)})) == {0: "latched"}
    # idle peers are no measure of a loaded rank
    assert states(clock_verdicts({0: g(208, 0, "P8"), 1: g(1600, 95)})) == {0: "ok", 1: "ok"}


def test_idle_ranks_keep_the_latched_band_rule() -> None:
    idle = g(208, 0, "P8")
    assert states(clock_verdicts({0: idle, 1: idle, 2: g(900, 0, "P8")})) == {0: "ok", 1: "ok", 2: "latched"}
    assert states(clock_verdicts({0: g(900, 0, "P8")})) == {0: "suspect"}
    assert states(clock_verdicts(dict.fromkeys(range(3), g(900, 0, "P8")))) == dict.fromkeys(range(3), "ok")
    assert states(clock_verdicts({0: g(1100, 0, "P0")})) == {0: "ok"}   # outside the band


def test_unreported_fields_are_unknown_not_pass() -> None:
    v = clock_verdicts({0: g(None, 95), 1: g(2400, None), 2: g(2400, 95)})
    assert states(v) == {0: "unknown", 1: "unknown", 2: "ok"} and v[1].loaded is None
    na = parse_gpu_line("NVIDIA GB10, 580.95.05, 600, 3003, [N/A], P0", PREFLIGHT)
    assert isinstance(na, GpuReading) and clock_verdicts({0: na})[0].state == "unknown"


def test_ranks_held_by_the_engine_are_in_use_below_load_and_no_peers() -> None:
    held = {0: g(800, 0), 1: g(800, 0), 2: g(208, 0, "P8")}
    assert states(clock_verdicts(held, held={0, 1})) == {0: "in_use", 1: "in_use", 2: "ok"}
    # the same readings with no engine: 800 MHz idle next to an idle peer at 208 is latched
    assert states(clock_verdicts(held)) == {0: "latched", 1: "latched", 2: "ok"}
    busy = {0: g(2300, 95), 1: g(900, 93)}
    assert states(clock_verdicts(busy, held={0, 1})) == {0: "ok", 1: "latched"}
