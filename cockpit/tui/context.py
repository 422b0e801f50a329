"""What every pane gets: the config, the fleet, the live model of the cluster, the stats monitor, and the
last preflight."""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from cockpit.config import ClusterConfig
from cockpit.hosts import Fleet
from cockpit.recipe.checks import CheckResult, Verdict
from cockpit.recipe.monitor import StatsMonitor
from cockpit.recipe.readonly import action_change
from cockpit.recipe.replay import ReplayClock
from cockpit.recipe.watch import ClusterWatcher

PREFLIGHT_FRESH_S = 300.0     # a launch re-runs preflight when its last result is older than this


@dataclass(frozen=True)
class PreflightSummary:
    """The latest preflight run of this cockpit: what the launch gate reads."""

    running: bool
    results: tuple[CheckResult, ...]
    at: float

    @property
    def failed(self) -> tuple[tuple[str, int], ...]:
        return tuple((r.check, r.rank) for r in self.results if r.verdict is Verdict.FAIL)

    @property
    def unknown(self) -> tuple[tuple[str, int], ...]:
        return tuple((r.check, r.rank) for r in self.results if r.verdict is Verdict.UNKNOWN)

    @property
    def ok(self) -> bool:
        """Finished with nothing failed and nothing unknown (unknown is never a pass)."""
        return not self.running and bool(self.results) and not self.failed and not self.unknown


@dataclass
class CockpitContext:
    config: ClusterConfig
    config_path: Path | None
    fleet: Fleet
    api_url: str | None = None          # --api-url: an authenticated gateway instead of the SSH tunnel
    read_only: bool = False             # hides every host-changing action (also on with [ui] read_only)
    watcher: ClusterWatcher = field(init=False)
    monitor: StatsMonitor = field(init=False)    # the Stats model (`monitor.stats`), fed by the watcher too
    preflight: PreflightSummary | None = None
    setup_finished_at: float | None = None   # the last setup job's end: a preflight before it is stale
    replay: ReplayClock | None = None   # `r37-cockpit replay`: the panes' "now" is the replay clock's

    def __post_init__(self) -> None:
        self.read_only = self.read_only or self.config.ui.read_only
        self.watcher = ClusterWatcher(self.fleet, self.config, api_url=self.api_url)
        self.monitor = StatsMonitor(self.fleet, self.config, self.watcher)

    def now(self) -> float:
        """The time the panes render at: the wall clock, or the replay clock in a replay."""
        return self.replay.now() if self.replay is not None else time.time()

    def allows(self, pane: str, action: str) -> bool:
        """Whether `pane`'s `action` may run now: not when read-only and it changes a host (the one list,
        `cockpit.recipe.readonly`, that the headless commands refuse by too). For a pane's check_action."""
        return not (self.read_only and action_change(pane, action) is not None)

    def set_preflight(self, results: Sequence[CheckResult], *, running: bool) -> None:
        self.preflight = PreflightSummary(running, tuple(results), time.time())

    def setup_finished(self) -> None:
        self.setup_finished_at = time.time()

    def preflight_stale(self, now: float | None = None) -> bool:
        """No preflight, or one older than the last setup job or than PREFLIGHT_FRESH_S."""
        p = self.preflight
        if p is None or p.running:
            return p is None
        now = time.time() if now is None else now
        return (now - p.at > PREFLIGHT_FRESH_S
                or (self.setup_finished_at is not None and self.setup_finished_at >= p.at))
