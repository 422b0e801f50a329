"""Which rank is stuck: the judgement over per-rank evidence, the evidence read from the one model (stale or
absent readings are unknown, never evidence), and py-spy dumps summarised."""

from __future__ import annotations

import time

from cockpit.hosts.state import Result
from cockpit.recipe.stuck import (
    RankEvidence,
    _stacks_of,
    evidence_of,
    judge,
    stuck_report,
    summarise_dump,
)
from cockpit.recipe.timeline import ClusterTimeline
from cockpit.telemetry.cluster_stats import ClusterStats
from cockpit.telemetry.gpu import GpuReading
from cockpit.telemetry.host_sample import PortCounters
from cockpit.telemetry.rdma import port_stats

NOW = 1_000_000.0


def ev(rank: int, util: int | None, sm: int | None = None, rdma: float | None = None) -> RankEvidence:
    return RankEvidence(rank, util, sm, 2500 if sm else None, 0.5 if util is not None else None, rdma)


def test_deadlock_on_rank_2_names_rank_2() -> None:
    r = judge([ev(0, 100, 2380), ev(1, 99, 2400), ev(2, 0, 812), ev(3, 100, 2390)], NOW)
    assert r.state == "odd" and r.odd == (2,)
    assert r.reason.startswith("rank 2 idle at 0 % at 812 MHz while rank 0, 1, 3 spin at 99–100 %")
    assert "logs --rank 2 -n 200" in r.remedy and "`r37-cockpit stop`" in r.remedy
    assert r.unknown == ()


def test_one_rank_spinning_alone_is_named() -> None:
    r = judge([ev(0, 0, 800), ev(1, 0, 805), ev(2, 0, 790), ev(3, 97, 2300)], NOW)
    assert r.state == "odd" and r.odd == (3,)
    assert "rank 3 spins at 97 %" in r.reason


def test_all_equal_no_rank_differs() -> None:
    r = judge([ev(k, 100, 2400) for k in range(4)], NOW)
    assert r.state == "none-differs" and r.odd == ()
    assert r.reason.startswith("no rank differs: rank 0, 1, 2, 3 all busy")
    idle = judge([ev(k, 0, 800) for k in range(4)], NOW)
    assert idle.state == "none-differs" and idle.odd == ()


def test_an_even_split_names_nobody() -> None:
    r = judge([ev(0, 100), ev(1, 100), ev(2, 0), ev(3, 0)], NOW)
    assert r.state == "none-differs" and r.odd == ()


def test_missing_readings_are_unknown_never_evidence() -> None:
    # rank 2 not read: it is not named (its absence is no 0 %), and the others, all alike, name nobody
    r = judge([ev(0, 100), ev(1, 100), ev(2, None), ev(3, 100)], NOW)
    assert r.state == "none-differs" and r.odd == () and r.unknown == (2,)
    assert "rank 2 not read (unknown, not evidence)" in r.reason
    # only one rank read: nothing to compare
    r = judge([ev(0, 100), ev(1, None), ev(2, None), ev(3, None)], NOW)
    assert r.state == "unknown" and r.odd == () and r.unknown == (1, 2, 3)
    # one idle, two busy, one not read: the unread rank could make it 2 against 2, so nobody is named yet
    r = judge([ev(0, 100), ev(1, 100), ev(2, 0), ev(3, None)], NOW)
    assert r.state == "unknown" and r.odd == () and r.unknown == (3,)
    assert "rank 2 idle while rank 0, 1 busy, but rank 3 not read" in r.reason
    # with more ranks, one unread rank cannot turn the minority: rank 2 is named all the same
    r = judge([ev(0, 100), ev(1, 100), ev(2, 0), ev(3, 100), ev(4, 100), ev(5, None)], NOW)
    assert r.state == "odd" and r.odd == (2,) and r.unknown == (5,)
    assert "rank 5 not read (unknown, not evidence)" in r.reason


def test_rdma_backs_the_reason_up() -> None:
    r = judge([ev(0, 100, rdma=0.0), ev(1, 100, rdma=0.0), ev(2, 0, rdma=0.0), ev(3, 100, rdma=None)], NOW)
    assert "no RDMA traffic on any rank read" in r.reason
    r = judge([ev(0, 100, rdma=3.2), ev(1, 100, rdma=3.1), ev(2, 0, rdma=0.0), ev(3, 100)], NOW)
    assert "RDMA moving on rank 0, 1" in r.reason


def _hung_timeline() -> ClusterTimeline:
    tl = ClusterTimeline(range(4), hang_after_s=15.0)
    for r in range(4):
        tl[r].feed_line(f"(Worker_TP{r} pid=9{r}) INFO loaded", NOW - 40 + r)
    tl[0].feed_line('INFO:     127.0.0.1:5000 - "GET /metrics HTTP/1.1" 200 OK', NOW - 1)
    return tl


def _stats(utils: dict[int, int | None], gpu_age: float = 1.0) -> ClusterStats:
    stats = ClusterStats(list(range(4)), 1.0)
    for r, util in utils.items():
        if util is None:
            continue
        gpu = GpuReading(util=util, sm=2400 if util else 800, max_sm=2600)
        stats.update(r, gpu=gpu, gpu_at=NOW - gpu_age, sampler="sampling")
        prev = PortCounters("rocep1s0f1", 1, "4: ACTIVE", 1000, 1000, {})
        cur = PortCounters("rocep1s0f1", 1, "4: ACTIVE", 1000, 1000, {})
        stats.update(r, ports=(port_stats(cur, prev, 1.0),), round_at=NOW - 0.5)
    return stats


def test_evidence_from_the_model_stale_is_unknown_and_last_line_skips_access_lines() -> None:
    tl = _hung_timeline()
    evidence = {e.rank: e for e in evidence_of(tl, _stats({0: 100, 1: 100, 2: 0, 3: 100}), None, NOW)}
    assert evidence[2].util == 0 and evidence[2].sm_mhz == 800 and evidence[2].rdma_moving is False
    assert evidence[0].last_line == "(Worker_TP0 pid=90) INFO loaded"   # not the HTTP access line
    assert evidence[0].last_line_age_s == 40.0
    old = _stats({0: 100, 1: 100, 2: 0, 3: 100}, gpu_age=60)
    stale = {e.rank: e for e in evidence_of(tl, old, None, NOW)}
    assert all(e.util is None and e.load == "unknown" for e in stale.values())
    assert stale[2].note == "GPU reading stale"
    none = evidence_of(tl, None, None, NOW)
    assert all(e.load == "unknown" and e.note == "not sampled" for e in none)


def test_no_report_unless_hung() -> None:
    tl = _hung_timeline()
    assert tl.compute_verdict().state != "hung"
    assert stuck_report(tl, _stats({0: 100, 1: 100, 2: 0, 3: 100}), None, NOW) is None


DUMP = """Process 1: /usr/bin/python3.12 /usr/local/bin/vllm serve /models/x --headless
Python v3.12.3 (/usr/bin/python3.12)

Thread 0x7F3A1D2B5740 (idle): "MainThread"
    join (multiprocessing/popen_fork.py:27)
    main (vllm/entrypoints/cli/main.py:54)

Process 131: VLLM::Worker_TP1
Python v3.12.3 (/usr/bin/python3.12)

Thread 0x7F3A1D2B9740 (active+gil): "MainThread"
    all_reduce (torch/distributed/distributed_c10d.py:2806)
    worker_busy_loop (vllm/v1/executor/multiproc_executor.py:597)
Thread 0x7F3A1D2BA740 (idle): "Thread-2"
    wait (threading.py:355)
"""


def test_py_spy_dump_summarised_per_process() -> None:
    assert summarise_dump(DUMP) == (
        "pid 1 (/usr/bin/python3.12 /usr/local/bin/vllm serve /…): idle in join "
        "(multiprocessing/popen_fork.py:27)",
        "pid 131 (VLLM::Worker_TP1): active+gil in all_reduce (torch/distributed/distributed_c10d.py:2806)")
    assert summarise_dump("garbage\n\x1b[2J") == ()


def test_stacks_absent_py_spy_failed_and_read() -> None:
    missing = Result(2, "docker exec …", 127, "", 'OCI runtime exec failed: exec failed: unable to start '
                     'container process: exec: "py-spy": executable file not found in $PATH: unknown', 0.1)
    assert _stacks_of(2, missing).state == "no-py-spy"
    assert _stacks_of(2, missing).detail == "py-spy not in the image"
    denied = Result(2, "docker exec …", 1, "", "Error: Permission Denied\n\x1b]0;x\x07", 0.1)
    st = _stacks_of(2, denied)
    assert st.state == "failed" and "\x1b" not in st.detail and "exit 1" in st.detail
    read = _stacks_of(1, Result(1, "docker exec …", 0, DUMP + "\x1b[31m", "", 0.1))
    assert read.state == "read" and "\x1b" not in read.text and len(read.summary) == 2


def test_judged_at_is_wall_clock_when_not_given() -> None:
    before = time.time()
    assert judge([ev(0, 1), ev(1, 1)]).at >= before
