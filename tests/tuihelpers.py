"""Helpers for TUI tests without a fleet connection (`connect=False`)."""

from __future__ import annotations

from cockpit.hosts import HostStatus
from cockpit.hosts.shell import ShellCommand
from cockpit.recipe.setup_model import JobPlan, RankPlan, SetupPlan, Step
from cockpit.tui.app import CockpitApp


def report_status(app: CockpitApp, status: HostStatus) -> None:
    """What the fleet does when a host's status changes: the host holds it (the header reads it from the
    fleet), then the app is told (every pane renders it)."""
    app.fleet[status.rank].status = status
    app.show_status(status)


def setup_plan(ranks: tuple[int, ...] = (0, 1, 2, 3)) -> SetupPlan:
    """A recipe plan as the planner makes it: three steps a rank, each one line to confirm, on the fixture's
    hosts."""
    def steps() -> tuple[Step, ...]:
        return (Step("mkdir", ShellCommand("mkdir -p -- r37-recipe")),
                Step("download", ShellCommand("hf download 0xTank/DeepSeek-V4.1-Flash-FP8-R37-4x-GB10 "
                                              "--include README.md 'launch/*' --local-dir r37-recipe")),
                Step("verify", ShellCommand("find r37-recipe/launch/node.sh -maxdepth 0 -type f")))
    job = JobPlan("recipe", {r: RankPlan("recipe", r, steps=steps()) for r in ranks})
    return SetupPlan((job,), {r: f"root@spark-{r}" for r in ranks})
