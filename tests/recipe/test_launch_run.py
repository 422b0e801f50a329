"""The one launch procedure (`recipe.launch_run.run_launch`) without hosts: the lock, the gate, the face's
confirmation, the replace and the launcher replaced by stand-ins that log what ran, so each test checks what
the procedure did, in which order, and what it did not do (refused, cancelled, changed since the
confirmation, replace failed, lock refused, dry run, launched)."""

from __future__ import annotations

from typing import Any

import pytest

from cockpit.config import ClusterConfig
from cockpit.recipe import launch as L
from cockpit.recipe import launch_run as LR
from cockpit.recipe.ledger import Ledger
from cockpit.recipe.lock import LockUnavailable
from cockpit.recipe.replace import ReplaceItem, ReplaceOutcome

PREFLIGHT_BLOCKER = L.Blocker(None, "1 preflight problem(s)", "fix them", overridable=True)
HELD = L.Blocker(3, "rank 3 still has a container named ds41_r37 (Up 2 minutes)", "stop it first")


def item(rank: int, cid: str) -> ReplaceItem:
    return ReplaceItem(rank, "replace", "stopped, started by this cockpit", cid,
                       [f"docker logs -t {cid}", f"docker rm {cid}"])


class World:
    """Stand-ins for the lock, the gate, the replace and the launcher; `log` is what ran, in order."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, *, gate: L.Gate, failures: list[str] | None = None,
                 warning: str | None = None, lock_error: Exception | None = None,
                 replaced_ok: bool = True, started: bool = True) -> None:
        self.log: list[str] = []
        self.held = False
        self.gate_args: dict[str, Any] = {}
        world = self

        class Lock:
            def __init__(self, fleet: object, cfg: object, purpose: str = "launch") -> None:
                world.log.append(f"lock {purpose}")
                self.warning = warning

            async def __aenter__(self) -> Lock:
                if lock_error is not None:
                    raise lock_error
                world.held = True
                return self

            async def __aexit__(self, *exc: object) -> None:
                world.held = False
                world.log.append("unlock")

        async def launch_gate(fleet: object, cfg: object, **kw: Any) -> L.Gate:
            world.log.append(f"gate held={world.held}")
            world.gate_args = kw
            return gate

        async def execute_replace(fleet: object, cfg: object, plan: list[ReplaceItem],
                                  ledger: object) -> list[ReplaceOutcome]:
            world.log.append(f"replace {[i.container_id for i in plan]} held={world.held}")
            return [ReplaceOutcome(i.rank, replaced_ok, "removed" if replaced_ok else "docker rm failed",
                                   i.container_id) for i in plan]

        class Launcher:
            timeline = None

            async def launch(self) -> bool:
                world.log.append(f"launch held={world.held}")
                return started

            async def close(self) -> None:
                world.log.append("close")

        self.failures = failures or []
        self.launcher = Launcher()
        monkeypatch.setattr(LR, "ClusterLock", Lock)
        monkeypatch.setattr(L, "launch_gate", launch_gate)
        monkeypatch.setattr(LR, "execute_replace", execute_replace)

    async def preflight(self) -> list[str]:
        self.log.append(f"preflight held={self.held}")
        return self.failures

    def make_launcher(self) -> Any:
        self.log.append("make launcher")
        return self.launcher


async def run(world: World, cfg: ClusterConfig, *, answer: bool = True, follow: bool = False,
              **kw: Any) -> tuple[LR.Outcome, list[LR.Note], list[L.Gate]]:
    notes: list[LR.Note] = []
    asked: list[L.Gate] = []

    async def confirm(gate: L.Gate) -> bool:
        world.log.append(f"confirm held={world.held}")
        asked.append(gate)
        return answer

    async def followed(launcher: Any, started: bool) -> bool:
        world.log.append(f"follow started={started} held={world.held}")
        return True

    outcome = await LR.run_launch(None, cfg, preflight=world.preflight, confirm=confirm,  # type: ignore[arg-type]
                                  emit=notes.append, make_launcher=world.make_launcher, ledger=Ledger(cfg),
                                  follow=followed if follow else None, **kw)
    return outcome, notes, asked


async def test_a_closed_gate_is_refused_with_its_blockers_and_nothing_is_asked_or_run(
        fixed_config, monkeypatch) -> None:
    gate = L.Gate([HELD, PREFLIGHT_BLOCKER], [], ["rank 1: clocks: 1100 MHz"])
    world = World(monkeypatch, gate=gate, failures=gate.preflight_failures)
    outcome, notes, asked = await run(world, fixed_config)
    assert isinstance(outcome, LR.Refused) and outcome.gate is gate and asked == []
    assert world.log == ["lock launch", "preflight held=True", "gate held=True", "unlock"]
    assert notes == [LR.GateAnswered(gate), LR.PreflightProblem("rank 1: clocks: 1100 MHz", False),
                     LR.LaunchRefused(HELD), LR.LaunchRefused(PREFLIGHT_BLOCKER)]
    assert world.gate_args["preflight_failures"] == ["rank 1: clocks: 1100 MHz"]
    assert world.gate_args["override_preflight"] is False and world.gate_args["replace_stopped"] is False


async def test_cancelled_by_confirm_changes_nothing(fixed_config, monkeypatch) -> None:
    gate = L.Gate([], [item(0, "c0")], [])
    world = World(monkeypatch, gate=gate)
    outcome, notes, asked = await run(world, fixed_config, answer=False, replace_stopped=True)
    assert isinstance(outcome, LR.Cancelled) and asked == [gate]
    assert world.log == ["lock launch", "preflight held=True", "gate held=True", "confirm held=True",
                         "unlock"]
    assert notes == [LR.GateAnswered(gate), LR.PreflightPassed(), LR.ReplacePlanned(gate.replace[0])]
    assert world.gate_args["replace_stopped"] is True


async def test_a_gate_changed_since_the_confirmation_is_seen_by_confirm_under_the_lock(
        fixed_config, monkeypatch) -> None:
    """The TUI's confirm: the gate computed under the lock must clear exactly what the operator confirmed."""
    confirmed = [item(0, "c0")]
    gate = L.Gate([], [item(0, "c0"), item(2, "c2")], [])     # another stopped container appeared since
    world = World(monkeypatch, gate=gate)
    notes: list[LR.Note] = []

    async def still_confirmed(g: L.Gate) -> bool:
        world.log.append(f"confirm held={world.held}")
        return g.same_replace(confirmed)

    outcome = await LR.run_launch(None, fixed_config, preflight=world.preflight,  # type: ignore[arg-type]
                                  confirm=still_confirmed, emit=notes.append,
                                  make_launcher=world.make_launcher, ledger=Ledger(fixed_config),
                                  replace_stopped=True)
    assert isinstance(outcome, LR.Cancelled) and outcome.gate is gate
    assert "confirm held=True" in world.log
    assert not any(s.startswith(("replace", "make launcher", "launch")) for s in world.log)


async def test_a_replace_that_fails_launches_nothing(fixed_config, monkeypatch) -> None:
    gate = L.Gate([], [item(0, "c0"), item(1, "c1")], [])
    world = World(monkeypatch, gate=gate, replaced_ok=False)
    outcome, notes, _ = await run(world, fixed_config, replace_stopped=True)
    assert isinstance(outcome, LR.ReplaceFailed) and outcome.first.rank == 0
    assert world.log[-2:] == ["replace ['c0', 'c1'] held=True", "unlock"]
    assert notes[-3:] == [LR.Replacing(gate.replace), *(LR.Replaced(o) for o in outcome.outcomes)]


async def test_launched_after_the_replace_and_followed_under_the_lock(fixed_config, monkeypatch) -> None:
    fails = ["rank 1: clocks: UNKNOWN (not a pass): no answer"]
    gate = L.Gate([], [item(0, "c0")], fails)
    world = World(monkeypatch, gate=gate, failures=fails, warning="took over a stale cluster lock")
    outcome, notes, _ = await run(world, fixed_config, follow=True, override_preflight=True,
                                  replace_stopped=True)
    assert isinstance(outcome, LR.Launched) and outcome.launcher is world.launcher
    assert outcome.started and outcome.finished is True
    assert world.log == ["lock launch", "preflight held=True", "gate held=True", "confirm held=True",
                         "replace ['c0'] held=True", "make launcher", "launch held=True",
                         "follow started=True held=True", "close", "unlock"]
    assert notes[0] == LR.LockTakenOver("took over a stale cluster lock")
    assert LR.PreflightProblem(fails[0], True) in notes and LR.PreflightOverridden(1) in notes
    assert notes[-1] == LR.Launching(True) and world.gate_args["override_preflight"] is True


async def test_a_launch_that_failed_is_followed_all_the_same_and_without_follow_is_returned(
        fixed_config, monkeypatch) -> None:
    world = World(monkeypatch, gate=L.Gate([], [], []), started=False)
    outcome, _, _ = await run(world, fixed_config, follow=True)
    assert isinstance(outcome, LR.Launched) and not outcome.started
    assert "follow started=False held=True" in world.log
    world = World(monkeypatch, gate=L.Gate([], [], []))
    outcome, _, _ = await run(world, fixed_config)
    assert isinstance(outcome, LR.Launched) and outcome.finished is None
    assert world.log[-3:] == ["launch held=True", "close", "unlock"]


async def test_a_lock_not_taken_is_an_outcome_and_nothing_ran(fixed_config, monkeypatch) -> None:
    world = World(monkeypatch, gate=L.Gate([], [], []), lock_error=LockUnavailable("no route"))
    outcome, notes, asked = await run(world, fixed_config)
    assert isinstance(outcome, LR.Locked) and "no route" in str(outcome.error)
    assert world.log == ["lock launch"] and notes == [] and asked == []


async def test_a_dry_run_stops_at_the_open_gate_and_only_it_may_go_without_the_lock(
        fixed_config, monkeypatch) -> None:
    gate = L.Gate([], [], [])
    world = World(monkeypatch, gate=gate)
    outcome, notes, asked = await run(world, fixed_config, dry_run=True, lock=False)
    assert isinstance(outcome, LR.GatePassed) and asked == []
    assert world.log == ["preflight held=False", "gate held=False"]
    assert notes == [LR.GateAnswered(gate), LR.PreflightPassed()]
    with pytest.raises(ValueError, match="always holds the cluster lock"):
        await run(world, fixed_config, lock=False)
