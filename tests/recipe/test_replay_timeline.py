"""The live model rebuilt from a recording (`recipe.replay_timeline`, `Replay.state_at(t).timeline`): a
launch driven through the real `ClusterTimeline` and recorded by the real recorder (tests/replayscene.py)
reads back, at every second, as the live model stood then; the API status and the engine's liveness are
restored; what was not recorded is unknown, never invented; a failure and a relaunch read back too."""

from __future__ import annotations

from pathlib import Path

from replayscene import (
    HUNG_AT,
    HUNG_SINCE,
    LAUNCHED_AT,
    READY2_AT,
    STOP_AT,
    STOPPED_AT,
    T0,
    record_launch,
    record_scene,
)

from cockpit.config import ClusterConfig
from cockpit.recipe.phases import Phase
from cockpit.recipe.recording import Recording
from cockpit.recipe.replay import Replay
from cockpit.recipe.replay_timeline import NOT_RECORDED_RANK, timeline_at
from cockpit.recipe.stuck import stuck_report
from cockpit.recipe.timeline import ClusterTimeline, RankStopped
from cockpit.telemetry.recorder import Event, read_events


def test_every_second_of_a_recorded_launch_reads_back_as_the_live_model_stood(
        fixed_config: ClusterConfig, tmp_path: Path) -> None:
    live = record_launch(fixed_config, tmp_path / "r.sqlite3")
    replay = Replay(tmp_path / "r.sqlite3", list(fixed_config.ranks), 1.0)
    for s, ranks in live.items():
        if s < LAUNCHED_AT:
            continue          # before the launch: the live model had no container; the recording nothing
        model = replay.state_at(T0 + s).timeline
        assert {r: (tl.condition, tl.phase.value) for r, tl in model.ranks.items()} == ranks, s


def test_the_api_the_engine_and_the_verdict_at_given_times(fixed_config: ClusterConfig,
                                                          tmp_path: Path) -> None:
    record_launch(fixed_config, tmp_path / "r.sqlite3")
    replay = Replay(tmp_path / "r.sqlite3", list(fixed_config.ranks), 1.0)
    booting = replay.state_at(T0 + 24)
    assert booting.verdict.state == "launching" and booting.timeline.verdict is booting.verdict
    assert booting.timeline.api is not None and booting.timeline.api.state == "not_ready"
    assert booting.timeline.liveness is None
    assert booting.timeline[3].phase is Phase.LOADING and booting.timeline[0].phase is Phase.DIST_INIT
    assert booting.timeline[3].started == T0 + LAUNCHED_AT        # the bars start where the launch did
    ready = replay.state_at(T0 + READY2_AT + 5)
    assert ready.verdict.state == "ready" and ready.timeline.api is not None and ready.timeline.api.ready
    assert ready.timeline.liveness is not None and ready.timeline.liveness.state == "serving"
    hung = replay.state_at(T0 + HUNG_AT + 2)
    assert hung.verdict.state == "hung"
    assert hung.timeline.liveness is not None and hung.timeline.liveness.since == T0 + HUNG_SINCE
    report = stuck_report(hung.timeline, hung.stats, None, T0 + HUNG_AT + 2)
    assert report is not None and report.odd == (2,)             # rank 2 idle while the others spin
    assert all(e.last_line is None for e in report.ranks)         # log lines are not recorded: unknown
    stopping = replay.state_at(T0 + STOP_AT + 1).timeline
    assert {tl.condition for tl in stopping.ranks.values()} == {"stopping"}
    stopped = replay.state_at(T0 + STOPPED_AT + 1)
    assert stopped.verdict.state == "stopped"
    assert stopped.timeline.api is not None and stopped.timeline.api.state == "down"
    tl = stopped.timeline[1]
    assert tl.stopped and tl.end_at(T0 + 999) == T0 + STOPPED_AT     # the bar ends at the recorded stop
    assert tl.container is not None and tl.container.exit_code is None   # its exit code: not recorded


def test_what_was_not_recorded_is_unknown_not_pending(fixed_config: ClusterConfig, tmp_path: Path) -> None:
    """The older scene records verdicts only: no rank is drawn as "pending" or booting, each is unknown."""
    replay = Replay(record_scene(fixed_config, tmp_path / "r.sqlite3"), list(fixed_config.ranks), 1.0)
    model = replay.state_at(T0 + 50).timeline
    assert model.verdict.state == "ready"
    for tl in model.ranks.values():
        assert tl.condition == "unknown" and tl.pending == NOT_RECORDED_RANK and not tl.spans
    assert model.api is None and model.liveness is None


def _event(i: int, t: float, kind: str, rank: int | None, summary: str, **data: object) -> Event:
    return Event(i, t, kind, rank, summary, dict(data))


def test_a_failure_then_a_relaunch_and_old_recordings_without_data() -> None:
    """A failure with its cause and recorded lines; a phase not later than the one reached on a failed rank
    is a new container (a relaunch); phase events of recordings made before the phase was in their data
    are read from their summary; bad values are skipped, not trusted."""
    events = [
        _event(1, 10.0, "phase", 1, "rank 1: launched"),                       # no data: an old recording
        _event(2, 12.0, "phase", 1, "rank 1: container running", phase="container running"),
        _event(3, 20.0, "failure", 1, "rank 1: NCCL error: boom", label="NCCL error", cause="boom",
               remedy="check the fabric", context=["a", "b"], at=20.0, source="log", secondary=False),
        _event(4, 20.0, "phase", 1, "rank 1: bogus phase"),
        _event(5, 21.0, "api", None, "API weird", state="not-a-state", message="x"),
        _event(6, 22.0, "engine", None, "engine weird", state="exploded", since=1.0, message="x"),
    ]
    failed = timeline_at(events, [0, 1])
    f = failed[1].failure
    assert f is not None and (f.label, f.cause, f.context, f.at) == ("NCCL error", "boom", ("a", "b"), 20.0)
    assert failed[1].condition == "failed" and failed[1].end_at(99.0) == 20.0
    assert failed.api is None and failed.liveness is None
    assert failed[0].condition == "unknown"                             # nothing of rank 0 recorded
    again = timeline_at([*events, _event(7, 30.0, "phase", 1, "rank 1: launched", phase="launched")], [0, 1])
    assert again[1].failure is None and again[1].phase is Phase.LAUNCHED and again[1].started == 30.0
    # the same boot read again by a later cockpit (not failed, not stopped): ignored, not a new container
    reread = timeline_at([*events[:2], _event(8, 12.5, "phase", 1, "rank 1: launched", phase="launched")],
                         [0, 1])
    assert reread[1].phase is Phase.RUNNING and reread[1].started == 10.0


def test_the_recorder_keeps_what_the_rebuild_reads(fixed_config: ClusterConfig, tmp_path: Path) -> None:
    """A stop's detail and a phase travel in the events' data (the rebuild does not parse summaries of
    new recordings)."""
    path = tmp_path / "r.sqlite3"
    rec = Recording(fixed_config, path=path, command="tui").start()
    model = ClusterTimeline(fixed_config.ranks)
    for event in model[2].launched(100.0, "c2"):
        rec.on_event(event, model)
    rec.on_event(RankStopped(2, "killed after 10 s: the engine did not exit on SIGTERM", 110.0), model)
    rec.close()
    kept = {e.kind: e.data for e in read_events(path) if e.rank == 2}
    assert kept["phase"] == {"phase": "launched"}
    assert kept["stopped"] == {"detail": "killed after 10 s: the engine did not exit on SIGTERM"}
