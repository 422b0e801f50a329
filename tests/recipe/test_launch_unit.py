"""Launch model without hosts: docker parsing, ledger, rank state machine, cluster verdict."""

from __future__ import annotations

import json
from pathlib import Path

from cockpit.api.status import ApiStatus
from cockpit.config import load_config
from cockpit.recipe import containers as dk
from cockpit.recipe import launch as L
from cockpit.recipe.containers import ContainerState
from cockpit.recipe.ledger import Ledger
from cockpit.recipe.phases import Phase
from cockpit.recipe.timeline import (
    SECONDARY_GRACE,
    ClusterTimeline,
    RankFailed,
    RankStopped,
    RankTimeline,
    VerdictChanged,
    event_dict,
    settled,
)

FIXED = Path(__file__).parents[1] / "fixtures" / "cluster.toml"
CID = "a" * 64

INSPECT_OOM = json.dumps([{
    "Id": CID, "Name": "/ds41_r37", "Image": "sha256:638d",
    "State": {"Status": "exited", "Running": False, "OOMKilled": True, "ExitCode": 137, "Error": "",
              "StartedAt": "2025-05-01T10:00:00.5Z", "FinishedAt": "2025-05-01T10:06:12.123456789Z"},
    "Config": {"Image": "local/ds41-r37-spark:runtime", "Labels": {"a": "b"}},
}])


def test_launch_order_is_workers_down_then_head() -> None:
    assert L.launch_order([0, 1, 2, 3]) == [3, 2, 1, 0]


def test_commands_are_the_recipes_and_quoted() -> None:
    cfg = load_config(FIXED)
    assert L.launch_command(cfg, 2).line == "cd -- r37-recipe && bash launch/node.sh 2 cluster.env"
    dry = "cd -- r37-recipe && env DRY_RUN=1 bash launch/node.sh 0 cluster.env"
    assert L.dry_run_command(cfg, 0).line == dry


def test_parse_inspect_and_exit_reasons() -> None:
    (st,) = dk.parse_inspect(INSPECT_OOM)
    assert (st.name, st.status, st.exit_code, st.oom_killed) == ("ds41_r37", "exited", 137, True)
    assert st.exited
    assert st.finished_at is not None and st.started_at is not None
    assert abs(st.finished_at - st.started_at - 371.623456789) < 1e-6
    assert "out-of-memory killer" in st.exit_reason()
    assert dk.parse_inspect("[]") == [] and dk.parse_inspect("Error: No such object") == []
    sig = dk.ContainerState(CID, "x", "exited", exit_code=143)
    assert "SIGTERM" in sig.exit_reason()


def test_ps_names_are_matched_exactly() -> None:
    text = ('{"ID":"1","Names":"ds41_r37_old","State":"exited","Status":"Exited (0)","Image":"x"}\n'
            '{"ID":"2","Names":"ds41_r37","State":"running","Status":"Up 2 minutes","Image":"x"}\n')
    entry = dk.ps_named(text, "ds41_r37")
    assert entry is not None and entry.id == "2"
    assert dk.ps_named(text.splitlines()[0], "ds41_r37") is None


def test_inspect_times_and_container_id() -> None:
    at = dk.parse_time("2025-05-01T10:00:00.123456789Z")
    assert at is not None and abs(at - 1746093600.123456789) < 1e-6
    assert dk.parse_time("2025-05-01T12:00:00.5+02:00") == 1746093600.5
    assert dk.parse_time("0001-01-01T00:00:00Z") is None  # docker's "never"
    assert dk.container_id_from_output(f"Unable to find\n{CID}\n") == CID
    assert dk.container_id_from_output("nope") is None


def test_ledger_round_trip_and_cluster_separation(tmp_path: Path) -> None:
    cfg = load_config(FIXED)
    path = tmp_path / "launched.json"
    ledger = Ledger(cfg, path)
    ledger.record(0, CID, "ds41_r37", "spark-0")
    assert ledger.owns(0, CID) and not ledger.owns(0, "b" * 64) and not ledger.owns(1, CID)
    ledger.mark_stopped(0, CID)
    assert ledger.records()[0].stopped_at is not None
    other = cfg.model_copy(update={"hosts": [h.model_copy(update={"ssh": h.ssh + "x"}) for h in cfg.hosts]})
    assert Ledger(other, path).records() == {}
    assert not list(tmp_path.glob("*.tmp"))


def test_container_exit_without_signature_uses_last_line() -> None:
    tl = RankTimeline(1)
    tl.launched(0.0, CID)
    tl.feed_line("(Worker_TP1 pid=1) INFO 05-01 10:00:00 [x.py:1] Starting to load model /m", 1.0)
    tl.feed_line("Loading safetensors checkpoint shards:  58% Completed | 28/48 [..]", 2.0)
    (st,) = dk.parse_inspect(INSPECT_OOM)
    events = tl.feed_container(st, 3.0)
    assert [type(e) for e in events] == [RankFailed]
    assert tl.failure is not None and tl.failure.label == "container OOM-killed"
    assert tl.failure.cause.startswith("Loading safetensors") and tl.progress == (28, 48)
    assert tl.feed_container(st, 4.0) == []  # reported once


def test_stuck_phase_turns_red_but_not_while_host_is_lost() -> None:
    tl = RankTimeline(3)
    tl.launched(0.0)
    tl.feed_line("Connecting to the head at 10.0.0.1:29543 (node_rank=3, headless)", 1.0)
    limits = {Phase.DIST_INIT: 60.0}
    assert tl.check_stuck(50.0, limits) == []
    tl.host_lost("connection lost", 55.0)
    assert tl.check_stuck(100.0, limits) == []
    tl.host_back(101.0)
    (ev,) = tl.check_stuck(102.0, limits)
    assert isinstance(ev, RankFailed) and "stuck in 'distributed init'" in ev.failure.label


def _booted(cluster: ClusterTimeline) -> None:
    for r in cluster.ranks:
        cluster[r].launched(0.0)
        cluster[r].feed_line("Graph capturing finished in 34 secs", 10.0 + r)


def test_head_ready_promotes_waiting_workers_and_cluster_is_ready() -> None:
    cluster = ClusterTimeline([0, 1, 2, 3])
    _booted(cluster)
    assert cluster[1].phase is Phase.WAIT_HEAD and cluster[0].phase is Phase.API_START
    events = cluster.settle(cluster.mark_api(ApiStatus("ready", "ok"), 20.0))
    assert all(cluster[r].phase is Phase.READY for r in range(4))
    assert isinstance(events[-1], VerdictChanged) and events[-1].verdict.state == "ready"


def test_verdict_blames_the_root_cause_rank_not_the_one_reporting_a_dead_peer() -> None:
    cluster = ClusterTimeline([0, 1, 2, 3])
    for r in cluster.ranks:
        cluster[r].launched(0.0)
    cluster[0].feed_line("(EngineCore_DP0 pid=72) ERROR 05-01 10:02:32 [multiproc_executor.py:154] Worker "
                         "proc VllmWorker-2 (node_rank=2) died unexpectedly (NCCL error: unhandled system "
                         "error)", 5.0)
    cluster.settle([])
    # down at once, but nobody is named while rank 1-3's logs are not read up to 5.0
    assert cluster.verdict.state == "down" and cluster.verdict.first_failed is None
    assert "reading rank 1, 2, 3's log" in cluster.verdict.summary
    assert not settled(cluster, now=5.0 + SECONDARY_GRACE)
    for r in (1, 2, 3):
        cluster[r].read_to = 7.5
    cluster.settle([])
    assert cluster.verdict.first_failed == 0
    assert not settled(cluster, now=6.0)  # waits for the root cause ...
    assert settled(cluster, now=5.0 + SECONDARY_GRACE)  # ... but not forever
    cluster[2].feed_line("NCCL WARN Call to ibv_modify_qp failed with 110 Connection timed out", 6.0)
    cluster.settle([])
    verdict = cluster.verdict
    assert verdict.state == "down" and verdict.first_failed == 2 and "followed by rank 0" in verdict.summary
    assert settled(cluster, now=6.0)


def test_a_lost_host_is_its_own_verdict_and_clears() -> None:
    cluster = ClusterTimeline([0, 1])
    cluster[1].launched(0.0)
    cluster.settle(cluster[1].host_lost("connection lost", 1.0))
    assert cluster.verdict.state == "host-lost" and "rank 1" in cluster.verdict.summary
    cluster.settle(cluster[1].host_back(2.0))
    assert cluster.verdict.state == "unknown"      # rank 0 has none: is a launch still running? not read yet
    cluster.launch_in_progress = True
    cluster.settle([])
    assert cluster.verdict.state == "launching"


def test_an_abandoned_launch_is_incomplete_never_launching_forever() -> None:
    """Rank 1 runs, rank 0 has no container and no launcher holds the lock (aborted, then healed)."""
    cluster = ClusterTimeline([0, 1])
    cluster[1].launched(0.0)
    cluster.launch_in_progress, cluster.launch_note = False, "the launcher is gone: its process 42 is gone"
    cluster.settle([])
    v = cluster.verdict
    assert v.state == "incomplete" and v.code == "launch-incomplete"
    assert "rank 1 has a container, rank 0 none" in v.summary and "process 42" in v.summary
    assert "r37-cockpit stop" in v.remedy


def test_events_serialise_to_json() -> None:
    tl = RankTimeline(0)
    events = tl.launched(1.0) + tl.feed_line("KeyError: 'x'", 2.0)
    for e in events:
        json.dumps(event_dict(e))
    assert event_dict(events[0]) == {"event": "PhaseEntered", "rank": 0, "phase": "launched", "at": 1.0}


CRASH = ["(VllmWorker pid=9) ERROR 12-01 10:00:00 [multiproc_executor.py:654] WorkerProc hit an exception.",
         "Traceback (most recent call last):",
         '  File "vllm/v1/worker/gpu_model_runner.py", line 2411, in execute_model',
         "RuntimeError: CUDA error: an illegal memory access was encountered"]
HEAD_SEES_IT = ["Traceback (most recent call last):",
                '  File "vllm/v1/engine/core.py", line 711, in run_engine_core',
                "RuntimeError: Worker failed with error 'Worker proc died unexpectedly', please check the "
                "stack trace above for the root cause"]


def _feed(tl: RankTimeline, lines: list[str], at: float) -> None:
    for i, line in enumerate(lines):
        tl.feed_line(line, at + i * 0.5)


def test_the_rank_that_failed_first_by_its_hosts_clock_is_blamed_whatever_reports_first() -> None:
    """The head's report of a dead worker arrives first; the worker's own crash began earlier."""
    cluster = ClusterTimeline([0, 1, 2, 3])
    for r in cluster.ranks:
        cluster[r].launched(0.0)
    _feed(cluster[0], HEAD_SEES_IT, 11.0)
    events = cluster.settle([])                          # down, but no rank named: others not read to 11.0
    assert [e.verdict.first_failed for e in events if isinstance(e, VerdictChanged)] == [None]
    assert cluster.verdict.state == "down" and not settled(cluster)
    _feed(cluster[3], CRASH, 10.0)                       # exception line at 11.5, its traceback at 10.5
    assert cluster.settle([]) == [] or cluster.verdict.first_failed is None   # rank 1, 2 still unread
    assert cluster[0].failure is not None and cluster[0].failure.secondary
    assert cluster[3].failure is not None and cluster[3].failure.at == 10.5
    for r in (1, 2):
        cluster[r].read_to = 12.0                        # their logs read past that moment: nothing earlier
    events = cluster.settle([])
    assert [e.verdict.first_failed for e in events if isinstance(e, VerdictChanged)] == [3]
    assert "followed by rank 0" in cluster.verdict.summary


def test_a_rank_stopped_by_the_cockpit_is_stopped_whatever_it_printed_while_shutting_down() -> None:
    tl = RankTimeline(0)
    tl.launched(0.0, "c" * 64)
    tl.feed_line("INFO:     Application startup complete.", 5.0)
    tl.request_stop(100.0)
    _feed(tl, ["Traceback (most recent call last):", "asyncio.exceptions.CancelledError"], 100.5)
    assert tl.failure is None and tl.condition == "stopping"
    events = tl.feed_container(_exited(exit_code=0, finished=102.0), 102.0)
    assert tl.condition == "stopped" and tl.failure is None
    assert any(isinstance(e, RankStopped) for e in events)
    cluster = ClusterTimeline([0])
    cluster.ranks[0] = tl
    assert cluster.compute_verdict().state == "stopped"


def test_a_crash_before_the_stop_request_stays_a_failure() -> None:
    tl = RankTimeline(1)
    tl.launched(0.0, "c" * 64)
    _feed(tl, CRASH, 50.0)
    tl.request_stop(100.0)
    tl.feed_container(_exited(exit_code=1, finished=52.0), 101.0)
    assert tl.condition == "failed" and tl.failure is not None and "CUDA error" in tl.failure.cause


def test_a_clean_exit_is_a_stop_and_an_oom_kill_is_not() -> None:
    clean = RankTimeline(2)
    clean.launched(0.0, "c" * 64)
    clean.feed_line("[W1201 09:30:36 TCPStore.cpp:125] [c10d] recvValue failed on SocketImpl", 90.0)
    clean.feed_container(_exited(exit_code=0, finished=100.0), 100.0)
    assert clean.condition == "stopped"
    oom = RankTimeline(3)
    oom.launched(0.0, "c" * 64)
    oom.feed_container(_exited(exit_code=137, finished=100.0, oom=True), 100.0)
    assert oom.condition == "failed"


def test_137_after_the_cockpits_stop_is_a_stop_with_the_kill_said_and_137_unasked_is_a_failure() -> None:
    """docker stop's SIGKILL when its timeout ran out (vLLM waiting for open streams): stopped, with how
    long it took; the same exit code without a stop request (the OOM killer, a kill -9): a failure."""
    asked = RankTimeline(0)
    asked.launched(0.0, "c" * 64)
    asked.feed_line("INFO:     Application startup complete.", 5.0)
    asked.request_stop(100.0)
    asked.feed_line("INFO:     Waiting for connections to close. (CTRL+C to force quit)", 100.2)
    events = asked.feed_container(_exited(exit_code=137, finished=110.4), 111.0)
    assert asked.condition == "stopped" and asked.failure is None
    [stopped] = [e for e in events if isinstance(e, RankStopped)]
    assert stopped.detail == "killed after 10 s: the engine did not exit on SIGTERM"
    assert asked.stop_detail == stopped.detail
    term = RankTimeline(1)
    term.launched(0.0, "c" * 64)
    term.request_stop(100.0)
    term.feed_container(_exited(exit_code=143, finished=100.5), 101.0)
    assert term.condition == "stopped" and term.stop_detail == "ended by SIGTERM, exit code 143"
    unasked = RankTimeline(2)
    unasked.launched(0.0, "c" * 64)
    unasked.feed_line("INFO:     Application startup complete.", 5.0)
    unasked.feed_container(_exited(exit_code=137, finished=50.0), 51.0)
    assert unasked.condition == "failed" and unasked.failure is not None
    assert "137" in unasked.failure.exit_reason and "SIGKILL" in unasked.failure.exit_reason
    cluster = ClusterTimeline([0, 1])
    cluster.ranks[0], cluster.ranks[1] = asked, term
    assert cluster.compute_verdict().state == "stopped"


def _exited(*, exit_code: int, finished: float, oom: bool = False) -> ContainerState:
    return ContainerState("c" * 64, "ds41_r37", "exited", exit_code=exit_code, oom_killed=oom,
                            started_at=0.0, finished_at=finished)


def test_a_worker_stopped_after_losing_its_head_is_stopped_in_whatever_order_it_is_read() -> None:
    """`status` inspects the container before it reads the log tail: the order must not matter."""
    lost_head = "[W1201 09:30:36 TCPStore.cpp:125] [c10d] recvValue failed on SocketImpl(fd=37)"
    for container_first in (True, False):
        tl = RankTimeline(2)
        tl.launched(0.0, "c" * 64)
        tl.request_stop(100.0)
        if container_first:
            tl.feed_container(_exited(exit_code=0, finished=101.0), 101.0)
        tl.feed_line(lost_head, 90.0)
        if not container_first:
            tl.feed_container(_exited(exit_code=0, finished=101.0), 101.0)
        assert tl.condition == "stopped" and tl.failure is None, container_first


def _stats_line(prompt: float, gen: float, running: int) -> str:
    return (f"Engine 000: Avg prompt throughput: {prompt:.1f} tokens/s, Avg generation throughput: {gen:.1f} "
            f"tokens/s, Running: {running} reqs, Waiting: 0 reqs, GPU KV cache usage: 1.0%")


def test_a_hang_is_dated_inside_the_stats_interval_and_confirmed_until_now() -> None:
    """vLLM's stats line averages its 10 s: a line at a third of the rate says the tokens stopped a third
    into its interval; /metrics still flat now extends the run past the last line."""
    cluster = ClusterTimeline([0], hang_after_s=15.0)
    head = cluster[0]
    head.launched(0.0, "c" * 64)
    for at, gen in ((100.0, 50.0), (110.0, 50.0), (120.0, 50.0 / 3), (130.0, 0.0)):
        head.feed_line(_stats_line(0.0, gen, 1), at)
    live = cluster.log_liveness()                                  # flat since 113.3: 16.7 s at 130
    assert live is not None and live.state == "hung" and abs(live.since - (110.0 + 10 / 3)) < 0.01
    cluster.hang_after_s = 25.0
    assert cluster.log_liveness().state == "serving"             # type: ignore[union-attr]
    cluster.metrics_flat_until = 140.0                            # /metrics: still no tokens at 140
    live = cluster.log_liveness()
    assert live is not None and live.state == "hung"
    head.feed_line(_stats_line(0.0, 40.0, 1), 150.0)              # tokens again: not hung
    assert cluster.log_liveness().state == "serving"             # type: ignore[union-attr]
