"""`r37-cockpit replay`: the cockpit opened read-only on a recording, with a replay clock.

The app is the live cockpit (`CockpitApp`) with `connect=False` (the fleet is never started: no SSH
connection at all) and read-only (`ctx.read_only`: no host-changing key), whose context carries the replay
clock (`ctx.replay`: the time every pane renders at and the header shows). Twice a second the recording's
rows at the replay time are fed into the same core models the live panes render — the Stats model
(`ctx.monitor.stats`: per-rank figures and history, engine figures, alerts) and the verdict
(`ctx.watcher.timeline`) — and the panes are told, as the live monitor tells them.

The live model of the cluster is rebuilt from the recorded events at the replay time
(`ReplayState.timeline`: phases, failures, stops, hosts, the API status and the engine's liveness) and put
where the live watcher keeps it (`ctx.watcher.timeline`), so the header's verdict and API line, the Launch
pane's per-rank timeline and the "which rank is stuck" block are drawn by their own code, as they looked
then. The Launch pane in a replay reads no host (no dry run, look again or stacks) and says what the
recording does not keep. Panes with nothing recorded (Hosts, Preflight, Setup, Logs, Chat, Bench,
Commands) say so.

Keys: space pause / run, ←/→ 10 s, shift+←/→ 1 min, g go to a time, + / - speed.
"""

from __future__ import annotations

from pathlib import Path
from typing import ClassVar

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.widgets import Footer, Static, TabbedContent, TabPane

from cockpit.config import ClusterConfig
from cockpit.recipe.recording import parse_when
from cockpit.recipe.replay import NOT_RECORDED, Replay, ReplayClock, stamp
from cockpit.recipe.watch import ClusterWatcher
from cockpit.safetext import safe
from cockpit.tui.app import PANES, CockpitApp
from cockpit.tui.context import CockpitContext
from cockpit.tui.dialogs import EventsScreen
from cockpit.tui.dialogs.prompt import PathPrompt
from cockpit.tui.header import ClusterHeader
from cockpit.tui.pane import Pane
from cockpit.tui.panes.launch import LaunchPane

REPLAYED = {"stats", "launch"}        # panes that render the replayed models as they are
LAUNCH_NOT_RECORDED = ("replay: the launch as recorded up to the replay time. Not recorded, so not shown: "
                       "log lines (a failure keeps its last recorded lines), loading progress, container "
                       "IDs and exit codes, dry runs. No host is read: dry run, look again and stacks are "
                       "off.")
REPLAY_ACTIONS = ("replay_pause", "replay_move", "replay_go", "replay_speed")


class NotRecordedPane(Pane):
    """A pane whose figures the recorder does not keep: it says so, and shows nothing live."""

    can_focus = True

    def compose(self) -> ComposeResult:
        yield Static(Text(f"{self.TITLE}: {NOT_RECORDED}", style="muted"), id="not-recorded")


class ReplayLaunchPane(LaunchPane):
    """The Launch pane on the replayed model: drawn at the replay time, reading no host."""

    def __init__(self, ctx: CockpitContext, *, id: str | None = None, classes: str | None = None):
        super().__init__(ctx, id=id, classes=classes)
        self.clock = ctx.now

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        return False                    # every action of the pane reads or changes a host

    def _commands_text(self, now: float) -> Text:
        return Text(LAUNCH_NOT_RECORDED, style="muted")

    def _stacks_hint(self) -> str:
        return ""                       # stacks are read from a host: not in a replay

    def stats_changed(self) -> None:
        """The replay moved (the app tells every pane so): redraw at the new time."""
        if self.is_mounted:
            self.refresh_view()


class ReplayedWatcher(ClusterWatcher):
    """The watcher of a replay: never started; its model is the recording's, what the cockpit had judged
    then, so it has always looked (never "looking at the hosts …")."""

    def looked(self) -> bool:
        return True


def _stand_in(base: type[Pane], cls: type[Pane]) -> type[Pane]:
    """`base` titled as `cls` (its tab, notifications and key map name the pane it stands in for)."""
    return type(f"Replay{cls.__name__}", (base,), {"TITLE": cls.TITLE, "HEADLESS": cls.HEADLESS})


class ReplayApp(CockpitApp):
    """The cockpit on a recording (see the module doc)."""

    BINDINGS: ClassVar[list[Binding]] = [  # type: ignore[assignment]
        *(b for b in CockpitApp.BINDINGS if isinstance(b, Binding)),
        Binding("space", "replay_pause", "Pause/run", id="replay.pause", priority=True),
        Binding("left", "replay_move(-10)", "-10 s", id="replay.back", priority=True, show=False),
        Binding("right", "replay_move(10)", "+10 s", id="replay.forward", priority=True, show=False),
        Binding("shift+left", "replay_move(-60)", "-1 min", id="replay.back_min", priority=True, show=False),
        Binding("shift+right", "replay_move(60)", "+1 min", id="replay.forward_min", priority=True,
                show=False),
        Binding("g", "replay_go", "Go to time", id="replay.go", priority=True),
        Binding("plus", "replay_speed(1)", "Faster", id="replay.faster", priority=True, show=False),
        Binding("minus", "replay_speed(-1)", "Slower", id="replay.slower", priority=True, show=False),
    ]

    def __init__(self, config: ClusterConfig, config_path: Path | None, replay: Replay, clock: ReplayClock,
                 **kwargs: object) -> None:
        super().__init__(config, config_path, connect=False, read_only=True, **kwargs)  # type: ignore[arg-type]
        self.replay = replay
        self.clock = clock
        self.ctx.replay = clock
        self.ctx.watcher = ReplayedWatcher(self.fleet, config, probe_api=False)
        self._shown_at: float | None = None
        self._version = 0

    def compose(self) -> ComposeResult:
        yield ClusterHeader(id="cluster-header")
        with TabbedContent(id="panes"):
            for number, (pid, cls) in enumerate(PANES, start=1):
                with TabPane(f"{number} {cls.TITLE}", id=pid):
                    shown = (ReplayLaunchPane if pid == "launch" else cls if pid in REPLAYED
                             else _stand_in(NotRecordedPane, cls))
                    yield shown(self.ctx, id=f"{pid}-pane")
        yield Footer()

    def on_mount(self) -> None:
        super().on_mount()
        self.replay_tick()
        self.set_interval(0.5, self.replay_tick)

    def replay_tick(self, force: bool = False) -> None:
        """Feed the recording at the replay time into the models and tell the panes (only when it moved)."""
        at = self.clock.now()
        if not force and at == self._shown_at:
            self.refresh_header()
            return
        self._shown_at = at
        state = self.replay.state_at(at)
        self._version += 1
        state.stats.version = self._version      # a new model: never mistaken for the one drawn before
        self.ctx.monitor.stats = state.stats
        self.ctx.watcher.timeline = state.timeline      # the model as it stood then, its verdict recorded
        if self.panes():
            self._broadcast(lambda pane: pane.stats_changed())
        self.refresh_header()

    # ---- keys -----------------------------------------------------------------------------------------

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        """The replay keys act on the main screen only (in a dialog, ←/→ and space are the field's)."""
        if action in REPLAY_ACTIONS and len(self.screen_stack) > 1:
            return False
        return super().check_action(action, parameters)

    def action_replay_pause(self) -> None:
        self.clock.toggle()
        self.replay_tick(force=True)

    def action_replay_move(self, seconds: float) -> None:
        self.clock.move(seconds)
        self.replay_tick()

    def action_replay_speed(self, step: int) -> None:
        self.clock.faster(step)
        self.refresh_header()

    def action_replay_go(self) -> None:
        question = (f"Go to a time of the recording ({stamp(self.clock.start)} … {stamp(self.clock.end)}): "
                    "HH:MM[:SS] (that day), YYYY-MM-DD HH:MM[:SS], or 15m / 2h before the replay time")
        self.push_screen(PathPrompt(question, stamp(self.clock.now())), self._go_to)

    def _go_to(self, text: str | None) -> None:
        if not text:
            return
        try:
            t = parse_when(text, self.clock.now())
        except ValueError as exc:
            self.notify(safe(str(exc), 300), title="replay", severity="warning")
            return
        if not self.clock.start <= t <= self.clock.end:
            self.notify(f"{safe(text, 60)} is outside the recording: it spans {stamp(self.clock.start)} … "
                        f"{stamp(self.clock.end)}", title="replay", severity="warning")
            return
        self.clock.go(t)
        self.replay_tick()

    def action_events(self) -> None:
        """The incident timeline up to the replay time."""
        cfg = self.ctx.config
        until = self.clock.now()
        self.push_screen(EventsScreen(self.replay.path, cfg.cluster.name, list(cfg.ranks), until=until))
