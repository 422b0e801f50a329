"""The one StopPlan: what it stops (head first), what it leaves alone, its refusals (nothing to stop, the
head unreachable unless forced), and what it says about rank 0's requests under way."""

from __future__ import annotations

from cockpit.recipe.stop import InFlight, StopItem, StopPlan

TARGETS = {0: "spark-0", 1: "spark-1", 2: "spark-2", 3: "spark-3"}


def _stop(rank: int) -> StopItem:
    return StopItem(rank, "stop", "ds41_r37 (aaaa) started by this cockpit, running",
                    f"docker stop {str(rank) * 64}", str(rank) * 64)


LOST_2 = StopItem(2, "unreachable", "host unreachable: connection refused; its container 222222222222 "
                                    "(started by this cockpit) may still run", container_id="2" * 64)
BY_HAND_3 = StopItem(3, "skip", "ds41_r37 (3333) was not started by this cockpit (launched by hand?)")


def test_commands_head_first_and_what_is_left_alone() -> None:
    plan = StopPlan((_stop(0), _stop(1), LOST_2, BY_HAND_3), TARGETS)
    assert plan.refusal() is None
    assert plan.commands() == [("rank 0 (spark-0) — head, first", "docker stop " + "0" * 64),
                               ("rank 1 (spark-1)", "docker stop " + "1" * 64)]
    assert plan.left_alone() == f"left alone: rank 2: {LOST_2.reason}; rank 3: {BY_HAND_3.reason}"
    assert plan.question().startswith("Stop 2 container(s), head first?")
    assert [i.rank for i in plan] == [0, 1, 2, 3]
    assert plan.to_dict()["refusal"] is None and len(plan.to_dict()["plan"]) == 4


def test_a_lost_head_refuses_unless_forced() -> None:
    lost_head = StopItem(0, "unreachable", "host unreachable: timed out", container_id="0" * 64)
    plan = StopPlan((lost_head, _stop(1), _stop(2)), TARGETS)
    assert plan.head_lost
    refusal = plan.refusal()
    assert refusal is not None and refusal.startswith("rank 0 NOT stopped: host unreachable: timed out")
    assert "--force" in refusal
    forced = StopPlan((lost_head, _stop(1), _stop(2)), TARGETS, force=True)
    assert forced.refusal() is None and [r for r, _ in forced.commands()] == ["rank 1 (spark-1)",
                                                                            "rank 2 (spark-2)"]


def test_nothing_to_stop_and_cannot_stop() -> None:
    nothing = StopPlan((BY_HAND_3,), TARGETS)
    assert (nothing.refusal() or "").startswith("nothing to stop: no running container started by this "
                                                "cockpit")
    assert BY_HAND_3.reason in (nothing.refusal() or "")
    cannot = StopPlan((LOST_2,), TARGETS)
    assert (cannot.refusal() or "").startswith("cannot stop: ")


def test_what_the_stop_does_about_requests_under_way() -> None:
    items = (_stop(0), _stop(1))
    assert StopPlan(items, TARGETS).drain_text(120) == ""          # not read (--no-drain)
    busy = StopPlan(items, TARGETS, in_flight=InFlight(2, 1))
    assert busy.drain_text(120) == ("rank 0 has 2 running, 1 waiting request(s): the stop waits up to 120 s "
                                    "for them to finish, then stops")
    assert "stopping at once cuts their answers" in busy.drain_text(0)
    idle = StopPlan(items, TARGETS, in_flight=InFlight(0, 0))
    assert not idle.in_flight.busy and idle.drain_text(120) == "rank 0 serves no request: nothing to wait for"
    blind = StopPlan(items, TARGETS, in_flight=InFlight(error="/metrics could not be read: refused"))
    assert not blind.in_flight.busy
    assert blind.drain_text(120) == ("requests under way unknown: /metrics could not be read: refused: "
                                     "stopping without waiting for answers")
    workers_only = StopPlan((_stop(1),), TARGETS, in_flight=InFlight(2, 0))
    assert workers_only.drain_text(120) == ""                      # the head is not stopped: no drain
