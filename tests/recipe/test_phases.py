"""Phase and failure rules against realistic vLLM log excerpts of an R37 rank (docs/vllm.md#launch-phases)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from cockpit.recipe.phases import (
    FAILURE_RULES,
    PHASE_RULES,
    Phase,
    match_failure,
    match_phase,
    match_progress,
    required_literals,
)
from cockpit.recipe.timeline import RankFailed, RankTimeline

LOGS = Path(__file__).parent / "logs"
HEAD_BOOT = (LOGS / "head_boot.log").read_text()
WORKER_BOOT = (LOGS / "worker_boot.log").read_text()
NCCL_TIMEOUT = (LOGS / "nccl_timeout.log").read_text()
OOM_AT_LOAD = (LOGS / "oom_at_load.log").read_text()
WORKER_WAITS = (LOGS / "worker_waits_for_head.log").read_text()
CRASH_AFTER_READY = (LOGS / "crash_after_ready.log").read_text()

FAILURES = {
    "ibv-modify-qp": "NCCL WARN NET/IB : Call to ibv_modify_qp failed with 110 Connection timed out, on dev "
                     "rocep1s0f0:1, curr state INIT, next state RTR, local GID index 3",
    "ib-completion-12": "spark-2:141:190 [0] NCCL WARN NET/IB: Got completion from peer "
                        "192.168.100.13<40123> with status=12 opcode=1 len=0 vendor err 129 (Recv)",
    "ibv-reg-mr": "spark-3:141:141 [0] misc/ibvwrap.cc:190 NCCL WARN Call to ibv_reg_mr failed with error "
                  "wrap_ibv_reg_mr_iova2 failed: Cannot allocate memory",
    "no-common-block-size": "(EngineCore_DP0 pid=72) ERROR 05-01 10:10:52 [core.py:708] ValueError: "
                            "No common block size for 600000 tokens",
    "too-many-open-files": "OSError: [Errno 24] Too many open files: '/srv/models/x/model-00031-of-00048"
                           ".safetensors'",
    "worker-died": "(EngineCore_DP0 pid=72) ERROR 05-01 10:02:32 [multiproc_executor.py:154] Worker proc "
                   "VllmWorker-2 (node_rank=2) died unexpectedly (NCCL error: unhandled system error), "
                   "shutting down executor.",
    "engine-core-died": "(APIServer pid=11049) WARNING 12-04 03:42:43 [core_client.py:817] [shutdown] "
                        "MPClient: "
                        "engine core exited unexpectedly; starting cleanup",
    "engine-dead": "RuntimeError: Worker failed with error 'Worker proc died unexpectedly', please check the "
                   "stack trace above for the root cause",
    "cuda-error": "RuntimeError: CUDA error: an illegal memory access was encountered",
    "out-of-memory": "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB.",
    "killed": "Killed",
    "tcpstore": "[W501 10:20:01.123456 TCPStore.cpp:141] [c10d] recvValue failed on SocketImpl(fd=41, "
                "addr=[::ffff:192.168.100.11]:50234, remote=[::ffff:192.168.100.10]:29543): failed to recv, "
                "got 0 bytes; TCPStore recvValue failed",
    "nccl-system-error": "RuntimeError: NCCL error: unhandled system error (run with NCCL_DEBUG=INFO)",
    "nccl-warn": "spark-0:141:141 [0] NCCL WARN Cuda failure 'out of range'",
    "exception": "KeyError: 'model.layers.61.mlp.experts.w13_weight'",
    "traceback": "Traceback (most recent call last):",
    "engine-init-failed": "(EngineCore_DP0 pid=72) ERROR 05-01 10:02:32 [core.py:708] RuntimeError: Engine "
                          "core initialization failed. See root cause above.",
}


def replay(rank: int, text: str) -> RankTimeline:
    tl = RankTimeline(rank)
    tl.launched(0.0)
    for i, line in enumerate(text.splitlines()):
        tl.feed_line(line, float(i + 1))
    return tl


def test_healthy_head_goes_through_every_phase_in_order() -> None:
    tl = replay(0, HEAD_BOOT)
    assert [s.phase for s in tl.spans] == [Phase.LAUNCHED, Phase.RUNNING, Phase.DIST_INIT, Phase.LOADING,
                                           Phase.KV_CACHE, Phase.CUDA_GRAPHS, Phase.API_START]
    assert tl.failure is None
    assert tl.progress == (48, 48)


def test_healthy_worker_reports_engram_and_waits_for_head() -> None:
    tl = replay(2, WORKER_BOOT)
    assert [s.phase for s in tl.spans] == [Phase.LAUNCHED, Phase.RUNNING, Phase.DIST_INIT, Phase.ENGRAM,
                                           Phase.LOADING, Phase.KV_CACHE, Phase.CUDA_GRAPHS, Phase.WAIT_HEAD]
    assert tl.failure is None


def test_no_healthy_line_is_a_failure() -> None:
    for line in (HEAD_BOOT + WORKER_BOOT).splitlines():
        assert match_failure(line) is None, line


def test_progress_of_checkpoint_shards() -> None:
    line = "Loading safetensors checkpoint shards:  50% Completed | 24/48 [04:48<04:48]"
    assert match_progress(line) == (24, 48)
    # tqdm redraws with carriage returns: the last one is what shows
    redraw = "Loading safetensors checkpoint shards:  2% Completed | 1/48 [..]\rLoading safetensors " \
             "checkpoint shards:  4% Completed | 2/48 [..]"
    assert match_progress(redraw) == (2, 48)
    assert match_progress("Capturing CUDA graphs (decode, FULL): 100%|██| 35/35") is None


def test_graph_capture_finished_differs_by_role() -> None:
    line = ("(Worker_TP0 pid=141) INFO 05-01 10:11:25 [gpu_model_runner.py:3480] "
            "Graph capturing finished in 34 secs")
    assert match_phase(line, 0) is Phase.API_START
    assert match_phase(line, 3) is Phase.WAIT_HEAD
    assert match_phase("Uvicorn running on http://0.0.0.0:8000 (Press CTRL+C to quit)", 1) is None


@pytest.mark.parametrize("name", sorted(FAILURES))
def test_each_failure_signature(name: str) -> None:
    rule = match_failure(FAILURES[name])
    assert rule is not None and rule.name == name
    assert rule.label and rule.remedy


def test_every_rule_is_exercised() -> None:
    assert {r.name for r in FAILURE_RULES} == set(FAILURES)
    phases = {r.phase for r in PHASE_RULES}
    assert phases == set(Phase) - {Phase.PENDING, Phase.LAUNCHED, Phase.RUNNING, Phase.READY}


def test_nccl_timeout_cause_is_the_ibv_line_not_the_generic_one() -> None:
    tl = replay(1, NCCL_TIMEOUT)
    assert tl.failure is not None
    assert "ibv_modify_qp failed with 110" in tl.failure.cause
    assert tl.failure.label.startswith("RoCE connection timed out")
    assert tl.failure.context[-1] == tl.failure.cause
    assert tl.phase is Phase.DIST_INIT  # frozen where it failed


def test_oom_at_load_keeps_progress_and_cause() -> None:
    tl = replay(0, OOM_AT_LOAD)
    assert tl.failure is not None and tl.failure.label == "out of memory"
    assert "CUDA out of memory" in tl.failure.cause
    assert tl.progress == (28, 48)
    assert tl.phase is Phase.LOADING


def test_context_keeps_at_least_250_lines_before_the_cause() -> None:
    tl = RankTimeline(2)
    tl.launched(0.0)
    for i in range(1000):
        tl.feed_line(f"(Worker_TP2 pid=141) INFO 05-01 10:00:00 [x.py:1] step {i}", float(i))
    events = tl.feed_line("RuntimeError: Engine core initialization failed. See root cause above.", 1000.0)
    assert any(isinstance(e, RankFailed) for e in events)
    assert tl.failure is not None and len(tl.failure.context) >= 250
    assert tl.failure.context[-2].endswith("step 999")


def test_worker_retrying_the_head_store_is_not_a_failure() -> None:
    tl = replay(3, WORKER_WAITS)
    assert tl.failure is None
    assert tl.phase is Phase.DIST_INIT


def test_a_traceback_is_judged_by_its_exception_line() -> None:
    tl = replay(2, CRASH_AFTER_READY)
    assert tl.failure is not None
    assert tl.failure.cause == "RuntimeError: CUDA error: an illegal memory access was encountered"
    assert tl.failure.label == "CUDA error on this rank's GPU"
    assert any("WorkerProc hit an exception" in line for line in tl.failure.context)
    assert tl.phase is Phase.WAIT_HEAD


def test_an_unknown_exception_after_a_traceback_is_still_a_failure() -> None:
    tl = replay(1, "Traceback (most recent call last):\n  File \"x.py\", line 1, in f\n    g()\n"
                   "SomeWeirdError: the shard index is inconsistent\n")
    assert tl.failure is not None and tl.failure.label == "Python exception"
    assert tl.failure.cause.startswith("SomeWeirdError")


def test_a_worker_that_lost_the_heads_store_reports_a_peer_not_its_own_failure() -> None:
    line = ("torch.distributed.DistStoreError: Failed to recv, got 0 bytes. Connection was likely closed. "
            "Did the remote server shutdown or crash?")
    rule = match_failure(line)
    assert rule is not None and rule.name == "tcpstore" and rule.secondary



_RULES = [r.pattern for r in PHASE_RULES] + [r.pattern for r in FAILURE_RULES]


@pytest.mark.parametrize("pattern", _RULES, ids=[p.pattern[:40] for p in _RULES])
def test_the_literal_prefilter_never_hides_a_match(pattern: re.Pattern[str]) -> None:
    """Every text a rule's regex matches holds one of the literals the prefilter looks for."""
    from hypothesis import HealthCheck, given, settings
    from hypothesis import strategies as st

    lits = required_literals(pattern)
    if lits is None:
        return   # no prefilter for this rule: its regex always runs

    @settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck))
    @given(st.from_regex(pattern, fullmatch=False))
    def check(text: str) -> None:
        if pattern.flags & re.IGNORECASE:
            assert any(lit.lower() in text.lower() for lit in lits), (pattern.pattern, text)
        else:
            assert any(lit in text for lit in lits), (pattern.pattern, text)

    check()


def test_required_literals() -> None:
    assert required_literals(PHASE_RULES[0].pattern) == ("Initializing a V1 LLM engine",)
    assert required_literals(re.compile("out of memory", re.IGNORECASE)) == ("out of memory",)
    assert required_literals(re.compile(r"\d+x")) is None
    assert required_literals(re.compile("ab(c)?defg|hij")) == ("defg", "hij")
