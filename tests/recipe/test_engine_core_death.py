"""Real vLLM 0.32's engine core killed under its API server (captured from `sim up --engine vllm`: the
end of rank 0's log after `kill -KILL` of VLLM::EngineCore): the API server logs the death at WARNING
level, then an EngineDeadError, then shuts down and exits 0. A clean exit nobody asked for is normally a
stop; this one is the rank's failure, whichever the cockpit reads first (the log live, or the exited
container first as a one-off `status` does)."""

from __future__ import annotations

from vllmread import read_boot, sample

from cockpit.recipe.containers import ContainerState
from cockpit.recipe.phases import match_failure
from cockpit.recipe.timeline import RankTimeline

DEATH = ("(APIServer pid=11049) WARNING 12-04 03:42:43 [core_client.py:817] [shutdown] MPClient: engine core "
         "exited unexpectedly; starting cleanup")
LABEL = "the engine core process died (the API server shuts down)"


def _exited(code: int, finished: float) -> ContainerState:
    return ContainerState("c0", "ds41_r37", "exited", exit_code=code, started_at=0.5, finished_at=finished)


def test_the_death_line_is_a_failure_of_rank_0_and_not_a_lost_worker() -> None:
    rule = match_failure(DEATH)
    assert rule is not None and rule.name == "engine-core-died" and not rule.secondary
    # the pinned version's wording (ERROR level) reads the same
    rule = match_failure("(APIServer pid=1) ERROR 06-01 10:00:00 [core_client.py:564] Engine core proc "
                         "EngineCore_DP0 died unexpectedly, shutting down client.")
    assert rule is not None and rule.name == "engine-core-died"
    # an INFO line that names it is not it
    assert match_failure(DEATH.replace("WARNING", "INFO")) is None


def test_the_log_read_live_names_the_engine_core_not_a_worker() -> None:
    reading = read_boot(sample("enginecore-sigkill.log").splitlines())
    assert reading.failure == LABEL, reading
    assert reading.cause is not None and "engine core exited unexpectedly" in reading.cause


def test_failure_then_exit_0_is_failed_not_stopped() -> None:
    lines = sample("enginecore-sigkill.log").splitlines()
    tl = RankTimeline(0)
    tl.launched(0.0)
    for i, line in enumerate(lines):
        tl.feed_line(line, float(i + 1))
    tl.feed_container(_exited(0, float(len(lines) + 1)), float(len(lines) + 2))
    assert tl.condition == "failed" and not tl.stopped
    assert tl.failure is not None and tl.failure.label == LABEL and tl.failure.exit_reason


def test_exit_0_read_before_the_log_is_still_the_failure() -> None:
    """A one-off status sees the exited container first, then reads its log: the exit 0 was taken for a
    stop and the lines of its last 30 s for shutdown output; the engine core's death undoes that."""
    lines = sample("enginecore-sigkill.log").splitlines()
    tl = RankTimeline(0)
    tl.launched(0.0)
    tl.feed_container(_exited(0, float(len(lines) + 1)), float(len(lines) + 2))
    assert tl.condition == "stopped"
    for i, line in enumerate(lines):
        tl.feed_line(line, float(i + 1))
    assert tl.condition == "failed", tl.failure
    assert tl.failure is not None and tl.failure.label == LABEL and "exit" in tl.failure.exit_reason.lower()


def test_a_sigterm_stop_of_real_vllm_stays_a_stop() -> None:
    """The same exit 0 after a SIGTERM (nobody's failure): still a stop, read in either order."""
    lines = sample("shutdown-run1-sigterm.log").splitlines()
    for container_first in (True, False):
        tl = RankTimeline(0)
        tl.launched(0.0)
        if container_first:
            tl.feed_container(_exited(0, float(len(lines) + 1)), float(len(lines) + 2))
        for i, line in enumerate(lines):
            tl.feed_line(line, float(i + 1))
        if not container_first:
            tl.feed_container(_exited(0, float(len(lines) + 1)), float(len(lines) + 2))
        assert tl.condition == "stopped" and tl.failure is None, (container_first, tl.failure)
