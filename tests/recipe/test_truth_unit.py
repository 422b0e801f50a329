"""The live model judges only on evidence (issue 22), pure: no read yet is unknown, a failed `docker inspect`
is unknown, a log tail that misses the boot proves no phase, a rank judged stuck that moves on is not
stuck, a stop withdraws the shutdown's failure, the phase of an exited rank is what its log said."""

from __future__ import annotations

from pathlib import Path

from cockpit.api.status import ApiStatus
from cockpit.recipe import containers as dk
from cockpit.recipe.phases import Phase
from cockpit.recipe.timeline import ClusterTimeline, RankRecovered, RankTimeline

SAMPLES = Path(__file__).parents[1] / "fixtures" / "samples" / "real-docker"   # from shared/samples
LIMITS = {p: 10.0 for p in Phase}


def _running(started: float, cid: str = "c" * 64) -> dk.ContainerState:
    return dk.ContainerState(cid, "ds41_r37", "running", running=True, started_at=started)


def _sample(name: str) -> tuple[str, int]:
    out = (SAMPLES / f"{name}.out").read_text(errors="replace")
    err = (SAMPLES / f"{name}.err").read_text(errors="replace")
    rc = int((SAMPLES / f"{name}.rc").read_text().strip().removeprefix("rc="))
    return out + ("\n" if out and not out.endswith("\n") else "") + err, rc


def test_a_rank_not_read_yet_is_unknown_and_never_stuck() -> None:
    tl = RankTimeline(1)
    tl.pending = "reading its log"
    tl.feed_container(_running(0.0), 100.0)          # its container started 100 s ago: its log not read
    assert tl.condition == "unknown"
    assert tl.check_stuck(1000.0, LIMITS) == [] and tl.failure is None
    cluster = ClusterTimeline([0, 1])
    cluster.ranks[1] = tl
    v = cluster.compute_verdict()
    assert v.state == "unknown" and v.summary.startswith("reading the cluster") and v.code == "state-unknown"


def test_a_log_tail_without_boot_lines_proves_no_phase() -> None:
    """A worker serving for hours: the tail read holds none of its boot lines. Not stuck in 'running'."""
    tl = RankTimeline(2)
    tl.feed_container(_running(0.0), 5000.0)
    tl.feed_line("INFO some periodic line", 4990.0)
    tl.partial = True
    assert not tl.phase_known and tl.phase_text == "running (boot not in the log read)"
    assert tl.check_stuck(5000.0, LIMITS) == []
    head = RankTimeline(0)
    head.feed_container(_running(0.0), 5000.0)
    head.partial = True
    cluster = ClusterTimeline([0, 2])
    cluster.ranks[0], cluster.ranks[2] = head, tl
    cluster.settle(cluster.mark_api(ApiStatus("ready", "ok"), 5000.0))
    assert cluster.verdict.state == "ready" and tl.condition == "ready"


def test_a_rank_judged_stuck_that_moves_on_is_not_stuck() -> None:
    tl = RankTimeline(3)
    tl.feed_line("(Worker_TP3 pid=1) INFO [multiproc_executor.py:118] Connecting to the head at 1.2.3.4:5",
                 0.0)
    events = tl.check_stuck(60.0, LIMITS)
    assert tl.condition == "failed" and tl.failure is not None and tl.failure.source == "stuck"
    assert events
    moved = tl.enter(Phase.LOADING, 61.0)
    assert tl.failure is None and tl.condition == "booting"
    assert isinstance(moved[0], RankRecovered) and "moved on" in moved[0].detail


def test_a_real_failure_replaces_a_stuck_judgement() -> None:
    tl = RankTimeline(3)
    tl.feed_line("x", 0.0)
    tl.check_stuck(60.0, LIMITS)
    tl.feed_line("NCCL WARN Call to ibv_modify_qp failed with 110 Connection timed out", 61.0)
    assert tl.failure is not None and tl.failure.source == "log"


def test_an_exited_ranks_phase_is_what_its_log_said_before_the_exit() -> None:
    """The exit is seen (docker inspect) before the log is read: the log's phases still count up to it."""
    tl = RankTimeline(1)
    state = dk.ContainerState("c" * 64, "ds41_r37", "exited", exit_code=1, started_at=0.0, finished_at=50.0)
    tl.feed_container(state, 60.0)
    assert tl.failure is not None and tl.failure.source == "container"
    tl.feed_line("(Worker_TP1 pid=1) INFO [multiproc_executor.py:584] Worker ready; running headless on this "
                 "node (no API server), waiting for work from the head node", 40.0)
    assert tl.phase is Phase.WAIT_HEAD and tl.phase_text == "exited in waiting for head"
    tl.feed_line("(Worker_TP1 pid=1) INFO [gpu_model_runner.py:1] Starting to load model", 55.0)
    assert tl.phase is Phase.WAIT_HEAD         # after the exit: no phase


def test_a_stop_noted_late_withdraws_the_failure_its_shutdown_printed() -> None:
    tl = RankTimeline(2)
    tl.feed_container(_running(0.0), 1.0)
    tl.feed_line("[W1201 09:30:36 TCPStore.cpp:125] [c10d] recvValue failed on SocketImpl(fd=1) peer "
                 "closed: Connection reset by peer", 101.0)
    assert tl.condition in ("failed", "followed")
    events = tl.request_stop(100.0)
    assert tl.failure is None and tl.condition == "stopping"
    assert isinstance(events[0], RankRecovered)


def test_a_crash_before_the_stop_is_not_withdrawn() -> None:
    tl = RankTimeline(2)
    tl.feed_line("RuntimeError: CUDA error: an illegal memory access was encountered", 50.0)
    assert tl.request_stop(100.0) == [] and tl.condition == "failed"


def test_inspect_frames_from_real_docker() -> None:
    out, rc = _sample("inspect-running")
    frame = dk.read_inspect_frame(out, rc)
    assert frame.known and frame.state is not None and frame.state.running
    for name in ("inspect-missing", "inspect-missing-plain"):
        out, rc = _sample(name)
        frame = dk.read_inspect_frame(out, rc)
        assert frame.known and frame.state is None, name


def test_an_unanswered_inspect_is_unknown_never_none() -> None:
    down = ("Cannot connect to the Docker daemon at unix:///var/run/docker.sock. Is the docker daemon "
            "running?")
    frame = dk.read_inspect_frame("[]\n" + down, 1)
    assert not frame.known and "Cannot connect" in frame.error
    denied = ("permission denied while trying to connect to the Docker daemon socket at "
              "unix:///var/run/docker.sock: Get ...: dial unix /var/run/docker.sock: connect: "
              "permission denied")
    assert not dk.read_inspect_frame(denied, 1).known
    assert not dk.read_inspect_frame("", 0).known             # exit 0 and no container: proves nothing
    assert not dk.read_inspect_frame("", None).known          # cut off before its status
    assert not dk.read_inspect_frame("garbage", 127).known


def test_an_unknown_rank_is_not_reset_by_the_model() -> None:
    cluster = ClusterTimeline([0, 1])
    cluster[1].feed_container(_running(0.0), 1.0)
    cluster[1].unknown = "docker not answering: Cannot connect to the Docker daemon"
    v = cluster.compute_verdict()
    assert v.state == "unknown" and "docker not answering" in v.summary
    assert cluster[1].phase is Phase.RUNNING


def test_a_busy_engine_not_seen_to_move_is_neither_ready_nor_hung() -> None:
    """The API answers and /metrics shows a request, but no sample yet shows the counters grow: the cluster
    is not READY (that would be a pass on absent evidence) and not HUNG (the flat run is shorter than the
    limit as far as anything read says); growth makes it READY. The header says the same."""
    from cockpit.api.liveness import EngineSample, HangTracker
    from cockpit.tui.header import health_line
    head = RankTimeline(0)
    head.feed_container(_running(0.0), 5000.0)
    head.partial = True
    cluster = ClusterTimeline([0], hang_after_s=15)
    cluster.ranks[0] = head
    cluster.settle(cluster.mark_api(ApiStatus("ready", "ok"), 5000.0))
    assert cluster.verdict.state == "ready"
    tracker = HangTracker(15)
    found = frozenset({"vllm:num_requests_running", "vllm:generation_tokens_total",
                       "vllm:prompt_tokens_total"})
    busy = EngineSample(1, 0, 900.0, 50.0, None, 10.0, found)
    cluster.mark_liveness(tracker.feed(busy))
    cluster.settle([])
    v = cluster.verdict
    assert v.state == "unknown" and v.code == "state-unknown" and "engine progress unknown" in v.summary
    assert "status" in v.remedy
    line = health_line("c", [], cluster).plain
    assert "engine progress unknown" in line and "API ready" in line and "READY" not in line
    cluster.mark_liveness(tracker.feed(EngineSample(1, 0, 960.0, 50.0, None, 11.0, found)))
    cluster.settle([])
    assert cluster.verdict.state == "ready" and "READY" in health_line("c", [], cluster).plain
