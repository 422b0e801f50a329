"""The cockpit app: header with cluster health, one pane per number key, footer with keys.

Panes are listed in :data:`PANES` (plain imports); their number keys follow that order. The app loads
the themes (`cockpit.tui.themes`), pushes the active theme's semantic roles onto its console so every
pane's content recolours with the chrome, applies ``[ui.keymap]``, offers every pane action in the
command palette, and turns any failed worker into a notification and the pane's error line.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable, Iterable, Mapping, Sequence
from functools import partial
from pathlib import Path

from rich.text import Text
from textual.app import App, ComposeResult, SystemCommand
from textual.binding import Binding
from textual.screen import Screen
from textual.widget import Widget
from textual.widgets import Footer, TabbedContent, TabPane
from textual.worker import NoActiveWorker, Worker, WorkerState, get_current_worker

from cockpit import startup
from cockpit.config import ClusterConfig
from cockpit.config.clusters import ClusterRef, file_identity
from cockpit.hosts import Fleet, HostStatus
from cockpit.hosts.origin import add_resolver, asking
from cockpit.locations import user_themes_dir
from cockpit.recipe import history
from cockpit.recipe.recording import Recording, path_for, recording_for
from cockpit.recipe.timeline_events import LaunchEvent
from cockpit.safetext import neutralise, safe
from cockpit.telemetry.notify import AlertNotifier, notifier_for
from cockpit.tui import uistate
from cockpit.tui.context import CockpitContext
from cockpit.tui.dialogs import Confirm, EventsScreen, KeyMapScreen
from cockpit.tui.dialogs.clusters import ClusterPicker
from cockpit.tui.header import ClusterHeader
from cockpit.tui.keys import action_name, current_bindings
from cockpit.tui.messages import ClusterChanged, HostStatusChanged, StatsChanged
from cockpit.tui.pane import Pane
from cockpit.tui.panes.bench import BenchPane
from cockpit.tui.panes.chat import ChatPane
from cockpit.tui.panes.commands import CommandsPane
from cockpit.tui.panes.hosts import HostsPane
from cockpit.tui.panes.launch import LaunchPane
from cockpit.tui.panes.logs import LogsPane
from cockpit.tui.panes.preflight import PreflightPane
from cockpit.tui.panes.setup import SetupPane
from cockpit.tui.panes.stats import StatsPane
from cockpit.tui.themes import DEFAULT_THEME, ThemeSet, load_themes

# (id, pane class) in number-key order: key N shows the N-th pane.
PANES: tuple[tuple[str, type[Pane]], ...] = (
    ("hosts", HostsPane),
    ("preflight", PreflightPane),
    ("setup", SetupPane),
    ("launch", LaunchPane),
    ("logs", LogsPane),
    ("stats", StatsPane),
    ("chat", ChatPane),
    ("bench", BenchPane),
    ("commands", CommandsPane),
)
WORKER_REMEDY = ("the pane is usable again: press its key to retry; if it fails again, run `{headless}` "
                 "in a shell for the full error")


def owning_pane(node: object) -> Pane | None:
    """The pane a worker's node is (or is inside), if any."""
    if isinstance(node, Pane):
        return node
    if not isinstance(node, Widget):
        return None
    return next((a for a in node.ancestors if isinstance(a, Pane)), None)


def pane_origin() -> str:
    """Who asks for a host command run by a worker now: "pane:<title>" of the pane the worker belongs
    to ("" outside a pane's worker). The command log's origin (`cockpit.hosts.origin`)."""
    try:
        pane = owning_pane(get_current_worker().node)
    except NoActiveWorker:
        return ""
    return f"pane:{pane.TITLE}" if pane is not None else ""


add_resolver(pane_origin)


def _pane_bindings() -> list[Binding]:
    out = []
    for number, (pid, cls) in enumerate(PANES, start=1):
        out.append(Binding(str(number), f"show_pane('{pid}')", cls.TITLE, id=f"pane.{pid}", show=False))
        # F1…F9 too, also while typing in a text field (terminals send alt+N as a printable character)
        out.append(Binding(f"f{number}", f"show_pane('{pid}')", cls.TITLE, id=f"pane.{pid}.fkey", show=False,
                           priority=True))
    return out


class CockpitApp(App[None]):
    """Opens on a config, connects to every host in the background and shows what it finds."""

    TITLE = "r37-cockpit"
    CSS_PATH = "cockpit.tcss"
    HORIZONTAL_BREAKPOINTS = [(0, "-narrow"), (100, "-wide")]   # cockpit.tcss: tighter tabs when narrow
    BINDINGS = [
        Binding("q", "quit", "Quit", id="app.quit"),
        Binding("question_mark", "keys", "Keys", id="app.keys", key_display="?"),
        Binding("C", "clusters", "Clusters", id="app.clusters"),
        Binding("E", "events", "Events", id="app.events", show=False),
        *_pane_bindings(),
    ]

    def __init__(self, config: ClusterConfig, config_path: Path | None = None, *, connect: bool = True,
                 api_url: str | None = None, read_only: bool = False, themes_dir: Path | None = None,
                 clusters: Sequence[ClusterRef] = ()):
        super().__init__()
        self.config = config
        self.config_path = config_path
        self.connect = connect
        self.api_url, self.read_only_flag = api_url, read_only
        self.clusters = list(clusters)      # every cluster `C` can switch to (this one among them)
        self._active = self._index_of(config_path)
        self.generation = 0                 # +1 per switch: messages of the cluster before are dropped
        self._panes: list[Pane] = []
        self._header: ClusterHeader | None = None
        self.recording: Recording | None = None   # the flight recorder of the open cluster, while connected
        self.fleet = Fleet(config)
        self.ctx = CockpitContext(config, config_path, self.fleet, api_url=api_url, read_only=read_only)
        self.keymap: dict[str, str] = dict(config.ui.keymap or {})
        self.themes: ThemeSet = load_themes(themes_dir if themes_dir is not None else user_themes_dir())
        for theme in self.themes.themes.values():
            self.register_theme(theme.textual)
        self._roles_pushed = False
        self._notifier: AlertNotifier | None = None
        self.theme = DEFAULT_THEME

    def compose(self) -> ComposeResult:
        yield ClusterHeader(id="cluster-header")
        with TabbedContent(id="panes"):
            for number, (pid, cls) in enumerate(PANES, start=1):
                with TabPane(f"{number} {cls.TITLE}", id=pid):
                    yield cls(self.ctx, id=f"{pid}-pane")
        yield Footer()

    def on_mount(self) -> None:
        self._apply_ui_settings()
        self.refresh_header()
        self._connect()
        log = history.current()
        if log is not None and log.warning:
            self.notify(safe(log.warning, 600), title="command log", severity="warning", timeout=30)
        self.set_interval(1.0, self._tick)
        self.call_after_refresh(self._freeze_startup_objects)

    def _connect(self) -> None:
        """Start the fleet, the live model and the stats monitor of the active cluster."""
        if not self.connect:
            return
        # Each message carries the generation of the cluster that subscribed, not the one current when it
        # is sent: the old fleet's last reports (its hosts closing) are dropped after a switch.
        gen = self.generation

        def host_status(status: HostStatus) -> None:
            self.post_message(HostStatusChanged(status, gen))

        def cluster_event(event: LaunchEvent) -> None:
            self.post_message(ClusterChanged(event, gen))

        def stats() -> None:
            self.post_message(StatsChanged(gen))

        self.fleet.subscribe(host_status)
        with asking("fleet"):       # the tasks started here ask under these names (the command log)
            self.fleet.start()
        self.ctx.watcher.subscribe(cluster_event)
        with asking("watcher"):
            self.ctx.watcher.start()
        self.ctx.monitor.subscribe(stats)
        notifier = self._notifier = notifier_for(self.config.alerts, self.config.cluster.name)
        if notifier is not None:        # [alerts] command: every alert raised or cleared, off the UI's path
            monitor = self.ctx.monitor
            notifier.start()

            def judged() -> None:
                notifier.observe(monitor.stats.alerts)

            monitor.subscribe(judged)
        with asking("stats sampler"):
            self.ctx.monitor.start()
        self.recording = recording_for(self.ctx.config, "tui", self._recording_warning)
        if self.recording is not None:
            self.recording.attach_watcher(self.ctx.watcher)
            self.recording.attach_monitor(self.ctx.monitor)

    def _recording_warning(self, message: str) -> None:
        """A warning of the recorder's writer thread (set aside, cannot write), as a notification."""
        with contextlib.suppress(Exception):
            self.call_from_thread(self.notify, safe(message, 600), title="recording", severity="warning",
                                  timeout=30)

    async def _disconnect(self) -> None:
        if self._notifier is not None:
            await self._notifier.close()
            self._notifier = None
        await self.ctx.monitor.close()
        await self.ctx.watcher.close()
        if self.recording is not None:
            recording, self.recording = self.recording, None
            await asyncio.to_thread(recording.close)
        await self.fleet.close()

    def _freeze_startup_objects(self) -> None:
        """The first frame is drawn: the start-up is over (`cockpit.startup`). Widgets and modules live as
        long as the app: frozen, they stay out of full GC passes, which otherwise stall the UI ~90 ms every
        second or so under a log flood (perf/logs.py --gc-freeze)."""
        startup.end(freeze=True)

    async def on_unmount(self) -> None:
        await self._disconnect()

    # ---- clusters -------------------------------------------------------------------------------------

    def active_cluster(self) -> int | None:
        """The index of the open cluster in `clusters` (None when the app was given none)."""
        return self._active

    def _index_of(self, path: Path | None) -> int | None:
        """Where the cluster file `path` is in `clusters` (the same file, however it is spelt)."""
        here = _identity(path)
        return next((i for i, ref in enumerate(self.clusters) if _identity(ref.path) == here), None)

    def cluster_title(self) -> str:
        """The header's name: the cluster's, with its place when there are several ("r37 · 1/3")."""
        index = self.active_cluster()
        name = self.config.cluster.name
        return f"{name} · {index + 1}/{len(self.clusters)}" if index is not None and len(self.clusters) > 1 \
            else name

    def action_clusters(self) -> None:
        if len(self.clusters) < 2:
            self.notify("this cockpit knows one cluster: put more cluster files in cluster.d/ beside "
                        "cluster.toml, or give --config again", title="clusters")
            return
        self.push_screen(ClusterPicker(self.clusters, self._active), self._cluster_chosen)

    def _cluster_chosen(self, ref: ClusterRef | None) -> None:
        if ref is None or self._index_of(ref.path) == self._active:
            return
        if ref.error is not None:
            problems = "\n".join(safe(line, 300) for line in ref.error.render().splitlines()[:5])
            self.notify(problems, title=f"cluster {safe(ref.name, 60)} cannot be opened",
                        severity="error", timeout=20)
            return
        def switch(yes: bool | None = True) -> None:
            if yes:
                self.run_worker(self.switch_cluster(ref), exclusive=True, group="clusters")

        why = self.busy()
        if why:
            self.push_screen(Confirm(f"Switch to {safe(ref.name, 60)} now? {why}.", yes="switch", no="stay"),
                             switch)
        else:
            switch()

    async def switch_cluster(self, ref: ClusterRef) -> None:
        """Close this cluster's connections, open `ref`'s, and show its panes on the same pane as now."""
        config = ref.loaded()
        tabs = self.query(TabbedContent)
        shown = tabs.first().active if tabs else ""
        self.generation += 1                # from now on, what the old fleet reports is dropped
        await self._disconnect()
        self.config, self.config_path = config, ref.path
        self._active = self._index_of(ref.path)
        self.fleet = Fleet(config)
        self.ctx = CockpitContext(config, ref.path, self.fleet, api_url=self.api_url,
                                  read_only=self.read_only_flag)
        await self.recompose()
        self._panes = []
        self._connect()
        self.refresh_header()
        if shown:
            self.action_show_pane(shown)
        self.notify(f"now on cluster {safe(config.cluster.name, 60)} ({safe(str(ref.path), 200)})",
                    title="clusters")

    # ---- panes ----------------------------------------------------------------------------------------

    def pane(self, pane_id: str) -> Pane:
        return self.query_one(f"#{pane_id}-pane", Pane)

    def panes(self) -> list[Pane]:
        """Every pane (kept from the last look while they stay attached: a DOM query per model event
        and per tick was a visible share of the watching cockpit's CPU, perf/watch_cost.py)."""
        if self._panes and self._panes[0].is_attached:
            return self._panes
        self._panes = list(self.query(Pane))
        return self._panes

    def shown_pane(self) -> Pane | None:
        tabs = self.query(TabbedContent)
        if not tabs or not tabs.first().active:
            return None
        found = self.query(f"#{tabs.first().active}-pane")
        return found.first(Pane) if found else None

    def action_show_pane(self, pane_id: str) -> None:
        self.query_one(TabbedContent).active = pane_id
        self.pane(pane_id).take_focus()  # now, not after a refresh: no key may land on the old pane

    # ---- the live model -------------------------------------------------------------------------------

    def _broadcast(self, tell: Callable[[Pane], None]) -> None:
        """Tell every composed pane (a pane not yet composed, or gone while closing, draws from the model
        when it is); nothing while the app shuts down: its widgets are being taken down, and a pane half
        gone has nothing left to draw on."""
        if not self.is_running:
            return
        for pane in self.panes():
            if pane.composed:
                tell(pane)

    def on_cluster_changed(self, message: ClusterChanged) -> None:
        """The live model changed: every pane and the header render it again."""
        if message.cluster != self.generation:
            return
        self._broadcast(lambda pane: pane.model_changed(message.event))
        self.refresh_header()

    def on_stats_changed(self, message: StatsChanged) -> None:
        """The monitor judged again: every pane (a hidden one catches up when shown) and the header."""
        if message.cluster != self.generation:
            return
        self._broadcast(lambda pane: pane.stats_changed())
        self.refresh_header()

    def on_host_status_changed(self, message: HostStatusChanged) -> None:
        if message.cluster == self.generation:
            self.show_status(message.status)

    def show_status(self, status: HostStatus) -> None:
        """Render one host's new status everywhere it shows (nowhere once the app is closing: the fleet
        closes in `on_unmount`, after the panes are gone, and its hosts still report CLOSED)."""
        if not self.panes():
            return
        self._broadcast(lambda pane: pane.host_changed(status))
        self.refresh_header()

    def _tick(self) -> None:
        if not self.is_running:
            return
        for notice in self.ctx.watcher.ledger.pop_warnings():   # a corrupt launch ledger kept aside, …
            self.notify(safe(notice.message), title=notice.code, severity="warning", timeout=30)
        if not self.panes():
            return                          # between two clusters' panes
        for status in self.fleet.statuses:
            if not status.connected:            # the ages of non-connected states move on
                self.show_status(status)
        self.refresh_header()

    def refresh_header(self) -> None:
        header = self._header
        if header is None or not header.is_attached:      # kept, as the panes are: no DOM walk per tick
            found = self.query(ClusterHeader)
            header = self._header = found.first() if found else None
        if header is None or not self.panes():
            return                          # between two clusters' panes (a switch recomposes), closing
        header.show(self.cluster_title(), self.fleet.statuses, self.ctx.watcher.timeline,
                    self.ctx.watcher.looked(), self.ctx.monitor.stats.alerts, read_only=self.ctx.read_only,
                    replay=self.ctx.replay)

    # ---- quitting -------------------------------------------------------------------------------------

    def busy(self) -> str:
        """What would be cut short by quitting now ("" when nothing is): every pane is asked."""
        return "; ".join(why for pane in self.panes() if (why := pane.busy()))

    async def action_quit(self) -> None:
        why = self.busy()
        if not why:
            self.exit()
            return
        self.push_screen(Confirm(f"Quit now? {why}.", yes="quit", no="stay"),
                         lambda yes: self.exit() if yes else None)

    # ---- themes and keys ------------------------------------------------------------------------------

    def _apply_ui_settings(self) -> None:
        """[ui] theme from cluster.toml, else the one picked last (remembered per user), else the default;
        broken theme files are named with their reason."""
        for problem in self.themes.problems:
            self.notify(safe(str(problem), 600), title="theme file skipped", severity="warning", timeout=30)
        if self.keymap:
            self.set_keymap(self.keymap)
        theme = self.config.ui.theme or uistate.load().get("theme")
        if theme and theme in self.available_themes:
            self.theme = theme
        elif theme:
            self.notify(f"unknown theme {safe(theme, 80)!r}; keeping {self.theme}", severity="warning")
        self.theme_changed_signal.subscribe(self, lambda t: uistate.save({"theme": t.name}))

    def watch_theme(self, name: str) -> None:
        """Swap the semantic roles on the console before the screen repaints in the new theme."""
        found = self.themes.themes.get(name)
        if found is None:
            return
        if self._roles_pushed:
            self.console.pop_theme()
        self.console.push_theme(found.roles)
        self._roles_pushed = True
        self.call_after_refresh(self._redraw_panes)

    def _redraw_panes(self) -> None:
        for pane in self.query(Pane):
            pane.refresh_view()
        for widget in self.screen.query("*"):
            widget.refresh()

    def set_keymap(self, keymap: Mapping[str, str]) -> None:
        """Remap keys by binding id; hints and the key map follow."""
        self.keymap = dict(keymap)
        super().set_keymap(keymap)
        if self.is_running:
            self.call_after_refresh(self._redraw_panes)

    def key_rows(self, node: object) -> list[tuple[str, str, str]]:
        return [(key, b.description or b.action, b.id or "-") for b, key in current_bindings(node)]  # type: ignore[arg-type]

    def action_events(self) -> None:
        """The incident timeline of the open cluster, from its recording (`r37-cockpit events`)."""
        recording = self.recording
        self.push_screen(EventsScreen(recording.path if recording is not None else path_for(self.ctx.config),
                                      self.ctx.config.cluster.name, list(self.ctx.config.ranks),
                                      flush=recording.recorder.flush if recording is not None else None))

    def action_keys(self) -> None:
        sections: list[tuple[str, list[tuple[str, str, str]]]] = []
        pane = self.shown_pane()
        if pane is not None:
            sections.append((f"{pane.TITLE} pane", self.key_rows(pane)))
        app_rows = self.key_rows(self) + [(b.key_display or b.key, b.description or b.action, b.id or "-")
                                          for b in Screen.BINDINGS if isinstance(b, Binding)]
        sections.append(("App (every pane)", app_rows))
        self.push_screen(KeyMapScreen(sections))

    def get_system_commands(self, screen: Screen) -> Iterable[SystemCommand]:
        """Textual's own commands, every pane (by number) and every action of every pane, which runs the
        same handler as its key (disabled actions, e.g. in read-only mode, are not offered)."""
        yield from super().get_system_commands(screen)
        for number, (pid, cls) in enumerate(PANES, start=1):
            yield SystemCommand(f"Pane: {cls.TITLE}", f"Show the {cls.TITLE} pane (key {number})",
                                partial(self.action_show_pane, pid))
        yield SystemCommand("Events", "The incident timeline from the cluster's recording (key E)",
                            self.action_events)
        active = self.active_cluster()
        for i, ref in enumerate(self.clusters):
            if i != active and len(self.clusters) > 1:
                yield SystemCommand(f"Cluster: {safe(ref.name, 60)}", f"Switch to {safe(str(ref.path), 120)} "
                                    "(key C lists them)", partial(self._cluster_chosen, ref))
        for pid, _cls in PANES:
            found = self.query(f"#{pid}-pane")
            if not found:
                continue
            pane = found.first(Pane)
            for binding, key in current_bindings(pane):
                label = binding.description or action_name(binding.action)
                yield SystemCommand(f"{pane.TITLE}: {label}", f"key {key} · {binding.id or binding.action}",
                                    partial(self._run_pane_action, pid, binding.action))

    async def _run_pane_action(self, pane_id: str, action: str) -> None:
        self.action_show_pane(pane_id)
        await self.pane(pane_id).run_action(action)

    # ---- worker errors --------------------------------------------------------------------------------

    def on_worker_state_changed(self, event: Worker.StateChanged) -> None:
        """No worker error is silent and none closes the app: the pane's name, the error and a remedy go
        to a notification and the pane's error line; the next worker the pane starts clears that line."""
        pane = owning_pane(event.worker.node)
        if event.state is WorkerState.RUNNING and pane is not None and pane.worker_error is not None:
            pane.show_worker_error(None)
        if event.state is not WorkerState.ERROR:
            return
        error = event.worker.error
        what = (event.worker.name or "a task").strip("_").replace("_", " ")
        where = pane.TITLE if pane is not None else "cockpit"
        message = neutralise(f"{type(error).__name__}: {error}" if error is not None else "failed")[:600]
        remedy = getattr(error, "remedy", "") or WORKER_REMEDY.format(
            headless=pane.HEADLESS if pane is not None and pane.HEADLESS else "r37-cockpit status")
        self.notify(f"{message}\nremedy: {neutralise(remedy)[:600]}", title=f"{where}: {what} failed",
                    severity="error", timeout=30)
        if pane is not None:
            pane.show_worker_error(Text.assemble((f"{what} failed: ", "fail"), (message, "fail.soft"),
                                                 ("  remedy: ", "bold"), (neutralise(remedy)[:600], "muted")))


def _identity(path: Path | None) -> Path | None:
    return None if path is None else file_identity(path)
