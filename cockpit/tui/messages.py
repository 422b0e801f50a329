"""Every message of the TUI, declared one way: a dataclass `Message` here, named for what happened.

Workers and listeners post them; a handler is ``on_<snake_case_name>`` on the pane (or the app) that
receives them. The payloads are the core's typed events and models (`cockpit.recipe`, `cockpit.api`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from textual.message import Message

from cockpit.hosts.state import HostStatus

if TYPE_CHECKING:
    from cockpit.api import SmokeStep
    from cockpit.recipe.checks import PreflightEvent
    from cockpit.recipe.launch import DryRun, Gate
    from cockpit.recipe.setup_model import SetupEvent, SetupPlan
    from cockpit.recipe.stop import StopPlan
    from cockpit.recipe.timeline_events import LaunchEvent
    from cockpit.telemetry.logline import LogLine


# ---- app ----------------------------------------------------------------------------------------------

@dataclass
class HostStatusChanged(Message):
    """One host's connection state changed (the fleet's listener). `cluster`: the app's cluster
    generation it belongs to (a message of a cluster switched away from is dropped)."""

    status: HostStatus
    cluster: int = 0


@dataclass
class ClusterChanged(Message):
    """The live model of the cluster changed (`event` says how); `cluster` as for HostStatusChanged."""

    event: LaunchEvent
    cluster: int = 0


@dataclass
class StatsChanged(Message):
    """The stats monitor judged again (`ctx.monitor.stats` may have changed): once per interval;
    `cluster` as for HostStatusChanged."""

    cluster: int = 0


# ---- preflight ----------------------------------------------------------------------------------------

@dataclass
class PreflightProgress(Message):
    """A preflight run started, one check answered, or the run finished."""

    event: PreflightEvent


# ---- setup --------------------------------------------------------------------------------------------

@dataclass
class SetupProgress(Message):
    """A setup job's step, progress or end on one rank."""

    event: SetupEvent


@dataclass
class SetupPlanned(Message):
    """The plan of a setup job (or why there is none), to confirm or to show."""

    plan: SetupPlan | None
    error: str = ""
    confirm: bool = True


# ---- launch -------------------------------------------------------------------------------------------

@dataclass
class DryRunDone(Message):
    runs: dict[int, DryRun]
    gate: Gate


@dataclass
class GateChecked(Message):
    """The launch gate's answer for a launch (`replace`: a relaunch) the operator asked for."""

    gate: Gate
    replace: bool


@dataclass
class StopPlanned(Message):
    plan: StopPlan


@dataclass
class LaunchNotice(Message):
    """A line for the launch pane's notice (it may quote a host: neutralised when shown)."""

    text: str
    style: str = ""


# ---- logs ---------------------------------------------------------------------------------------------

@dataclass
class ErrorFound(Message):
    """The failure search (a thread) found a line, or none."""

    line: LogLine | None
    index: int
    generation: int


class FollowPaused(Message):
    """The log view's operator scrolled away from the end: following paused."""


# ---- chat ---------------------------------------------------------------------------------------------

@dataclass
class SmokeProgress(Message):
    """One smoke-test step passed or failed (`step`), or the test ended (`passed`)."""

    step: SmokeStep | None
    passed: bool | None = None
    error: str = ""
