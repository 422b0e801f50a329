"""The fabric test's parsers on perftest's real report layout, and the verdicts: slow against the port's
rate or the other pairs, the rank every bad pair shares named, errors classified with their remedy."""

from __future__ import annotations

from pathlib import Path

import pytest

from cockpit.config import ClusterConfig
from cockpit.recipe.fabric import (
    BwRow,
    LatRow,
    PairResult,
    choose_pairs,
    classify,
    judge,
    parse_bw,
    parse_lat,
    parse_rate,
    planned_commands,
)

SAMPLES = Path(__file__).resolve().parents[1] / "fixtures" / "samples" / "perftest"


def test_bw_row_under_the_gbits_header_skipping_cpu_frequency_noise() -> None:
    row = parse_bw((SAMPLES / "ib_write_bw.txt").read_text())
    assert row == BwRow(65536, 5000, 97.63, 97.61, 0.186179)


def test_bw_in_mb_per_second_is_converted_to_gbits() -> None:
    row = parse_bw((SAMPLES / "ib_write_bw_mb.txt").read_text())
    assert row is not None and row.avg_gbps == pytest.approx(97.58, abs=0.01)


def test_lat_row_by_the_headers_own_columns() -> None:
    row = parse_lat((SAMPLES / "ib_write_lat.txt").read_text())
    assert row is not None and (row.size, row.iterations) == (2, 1000)
    assert row.avg_us == 1.80 and row.typical_us == 1.79
    assert row.values["t_min[usec]"] == 1.76 and row.values["99.9% percentile[usec]"] == 6.12


def test_older_lat_layout_has_no_average_but_a_typical() -> None:
    row = parse_lat((SAMPLES / "ib_write_lat_old.txt").read_text())
    assert row is not None and row.avg_us is None and row.typical_us == 1.66


def test_no_result_row_is_none() -> None:
    text = (SAMPLES / "ib_write_bw.txt").read_text().replace(" 65536      5000", " oops")
    assert parse_bw(text) is None
    assert parse_bw("Couldn't connect to 10.0.0.1:18515\n") is None


def test_rate() -> None:
    assert parse_rate("200 Gb/sec (2X NDR)") == 200.0
    assert parse_rate("100 Gb/sec (4X EDR)\n") == 100.0
    assert parse_rate("") is None


def test_pairs() -> None:
    assert choose_pairs([0, 1, 2, 3], "all") == [(0, 1), (0, 2), (0, 3), (1, 2), (1, 3), (2, 3)]
    assert choose_pairs([0, 1, 2, 3], "ring") == [(0, 1), (1, 2), (2, 3), (3, 0)]
    assert choose_pairs([0, 1], "ring") == [(0, 1)]
    with pytest.raises(ValueError):
        choose_pairs([0, 1], "star")


def _pair(s: int, c: int, gbps: float | None, verdict: str = "pass", problem: str = "") -> PairResult:
    bw = BwRow(1 << 20, 5000, gbps * 1.001, gbps, 0.02) if gbps is not None else None
    lat = LatRow(2, 1000, {"t_avg[usec]": 1.7}) if gbps is not None else None
    return PairResult(s, c, bw, lat, 200.0, verdict, problem, "r" if problem else "")  # type: ignore[arg-type]


def test_a_degraded_rank_is_named_with_the_link_remedy() -> None:
    pairs = [_pair(0, 1, 196), _pair(0, 2, 49), _pair(0, 3, 196), _pair(1, 2, 49), _pair(1, 3, 195),
             _pair(2, 3, 48)]
    judged, rank, summary, remedy = judge(pairs, 0.8)
    assert [p.verdict for p in judged] == ["pass", "slow", "pass", "slow", "pass", "slow"]
    assert rank == 2 and "rank 2's link" in summary
    assert "rank 2's link is slow" in remedy and "MTU" in remedy and "PFC" in remedy and "cable" in remedy


def test_all_pairs_slow_against_the_port_rate_names_no_rank() -> None:
    judged, rank, summary, _ = judge([_pair(0, 1, 90), _pair(0, 2, 91), _pair(1, 2, 90)], 0.8)
    assert {p.verdict for p in judged} == {"slow"} and rank is None
    assert "below 80% of the ports' active rate 200" in judged[0].problem and "3 of 3" in summary


def test_healthy_pairs_pass() -> None:
    judged, rank, summary, remedy = judge([_pair(0, 1, 196), _pair(1, 2, 195)], 0.8)
    assert {p.verdict for p in judged} == {"pass"} and rank is None and remedy == ""
    assert "2 pair(s) passed" in summary


def test_failed_pairs_sharing_a_rank_name_it() -> None:
    pairs = [_pair(0, 1, 196), _pair(1, 2, None, "fail", "port rocep1s0f0/1 is down on rank 2"),
             _pair(2, 3, None, "fail", "port rocep1s0f0/1 is down on rank 2"), _pair(3, 0, 196)]
    _, rank, summary, _ = judge(pairs, 0.8)
    assert rank == 2 and "failed" in summary


@pytest.mark.parametrize(("text", "status", "what", "remedy"), [
    (" Port number 1 state is Down\n Couldn't set the link layer\n", 1, "is down on rank 1", "cable"),
    (" Completion with error at client\n Failed status 12: wr_id 0 syndrom 0x81\n", 1, "GID index 3",
     "gid_index"),
    ("Couldn't connect to 192.168.100.10:18515\n", 1, "could not connect to rank 0", "firewall"),
    ("bash: line 1: ib_write_bw: command not found\n", 127, "not installed", "apt install perftest"),
    ("", 124, "no result within 30 s", "cable"),
])
def test_errors_are_classified(fixed_config: ClusterConfig, text: str, status: int, what: str,
                               remedy: str) -> None:
    f = classify(text, status, server=0, client=1, side=1, cfg=fixed_config, timeout_s=30)
    assert what in f.what and remedy in f.remedy


def test_the_commands_shown_are_the_commands_run(fixed_config: ClusterConfig) -> None:
    lines = planned_commands(fixed_config, [(0, 1)], 1 << 20)
    h0, h1 = fixed_config.host(0), fixed_config.host(1)
    assert lines[0].startswith("rank 0: sh -c 'echo R37PID $$; exec timeout -k 2 30 ib_write_bw -d "
                               f"{h0.ib_hca[0]} -i 1 -x {h0.gid_index} -p 18515 -s 1048576")
    assert lines[1].startswith(f"rank 1: timeout -k 2 30 ib_write_bw -d {h1.ib_hca[0]}")
    assert lines[1].endswith(f" --report_gbits {h0.fabric_ip}")
    assert "ib_write_lat" in lines[2] and "-s 2 " in lines[3]
