"""The cockpit app: header with cluster health, one pane per number key, footer with keys."""

from __future__ import annotations

import gc
import importlib
import importlib.util
from collections.abc import Iterable
from pathlib import Path

from textual.app import App, ComposeResult, SystemCommand
from textual.binding import Binding
from textual.screen import Screen
from textual.widget import Widget
from textual.widgets import Footer, TabbedContent, TabPane

from cockpit.config import ClusterConfig
from cockpit.hosts import Fleet, HostStatus
from cockpit.recipe.timeline import ApiChanged
from cockpit.safetext import safe
from cockpit.tui import uistate
from cockpit.tui.confirm import ConfirmQuit
from cockpit.tui.context import CockpitContext
from cockpit.tui.header import ClusterHeader
from cockpit.tui.keys import KeyMapScreen
from cockpit.tui.messages import ClusterChanged, HostStatusChanged
from cockpit.tui.panes.chat import ChatPane
from cockpit.tui.panes.hosts import HostsPane
from cockpit.tui.panes.launch import LaunchPane
from cockpit.tui.panes.setup import SetupPane

# id, tab title, "module:Class". A pane module that is not there (yet) is simply not shown.
PANE_REGISTRY: list[tuple[str, str, str]] = [
    ("hosts", "Hosts", "cockpit.tui.panes.hosts:HostsPane"),
    ("preflight", "Preflight", "cockpit.tui.panes.preflight:PreflightPane"),
    ("setup", "Setup", "cockpit.tui.panes.setup:SetupPane"),
    ("launch", "Launch", "cockpit.tui.panes.launch:LaunchPane"),
    ("logs", "Logs", "cockpit.tui.panes.logs:LogsPane"),
    ("stats", "Stats", "cockpit.tui.panes.stats:StatsPane"),
    ("chat", "Chat", "cockpit.tui.panes.chat:ChatPane"),
    ("bench", "Bench", "cockpit.tui.panes.bench:BenchPane"),
]


def available_panes() -> list[tuple[str, str, type[Widget]]]:
    """(id, "N Title", class) of every pane present; N is its fixed place in the registry."""
    panes = []
    for number, (pid, title, ref) in enumerate(PANE_REGISTRY, start=1):
        module_name, cls_name = ref.split(":")
        if importlib.util.find_spec(module_name) is None:
            continue
        panes.append((pid, f"{number} {title}", getattr(importlib.import_module(module_name), cls_name)))
    return panes


PANES = available_panes()


class CockpitApp(App[None]):
    """Opens on a config, connects to every host in the background and shows what it finds."""

    TITLE = "r37-cockpit"
    CSS_PATH = "cockpit.tcss"
    BINDINGS = [
        Binding("q", "quit", "Quit", id="app.quit"),
        Binding("question_mark", "keys", "Keys", id="app.keys", key_display="?"),
        *[Binding(label.split()[0], f"show_pane('{pid}')", label.split(maxsplit=1)[1],
                  id=f"pane.{pid}", show=False) for pid, label, _ in PANES],
        # F1…F8 too, also while typing in a text field (terminals send alt+N as a printable character)
        *[Binding(f"f{label.split()[0]}", f"show_pane('{pid}')", label.split(maxsplit=1)[1],
                  id=f"pane.{pid}.fkey", show=False, priority=True) for pid, label, _ in PANES],
    ]

    def __init__(self, config: ClusterConfig, config_path: Path | None = None, *, connect: bool = True,
                 api_url: str | None = None, read_only: bool = False):
        super().__init__()
        self.config = config
        self.config_path = config_path
        self.connect = connect
        self.fleet = Fleet(config)
        self.ctx = CockpitContext(config, config_path, self.fleet, api_url=api_url, read_only=read_only)

    def compose(self) -> ComposeResult:
        yield ClusterHeader(id="cluster-header")
        with TabbedContent(id="panes"):
            for pid, label, cls in PANES:
                with TabPane(label, id=pid):
                    yield cls(self.ctx, id=f"{pid}-pane")
        yield Footer()

    def on_mount(self) -> None:
        self._apply_ui_settings()
        self.refresh_header()
        if self.connect:
            self.fleet.subscribe(lambda status: self.post_message(HostStatusChanged(status)))
            self.fleet.start()
            self.ctx.watcher.subscribe(lambda event: self.post_message(ClusterChanged(event)))
            self.ctx.watcher.start()
        self.set_interval(1.0, self._tick)
        self.call_after_refresh(self._freeze_startup_objects)

    def _freeze_startup_objects(self) -> None:
        """Widgets and modules live as long as the app: keep them out of full GC passes, which otherwise
        stall the UI ~90 ms every second or so under a log flood (bench/perf/logs.py --gc-freeze)."""
        gc.collect()
        gc.freeze()

    async def on_unmount(self) -> None:
        await self.ctx.watcher.close()
        await self.fleet.close()

    def on_cluster_changed(self, message: ClusterChanged) -> None:
        """The live model changed: the header and the launch pane render it again."""
        panes = self.query(LaunchPane)
        if not panes:
            return
        panes.first().apply(message.event)  # type: ignore[arg-type]
        if isinstance(message.event, ApiChanged):
            for chat in self.query(ChatPane):
                chat.api_changed()
        self.refresh_header()

    def busy(self) -> str:
        """What would be cut short by quitting now ("" when nothing is)."""
        launch = self.query(LaunchPane)
        if launch and launch.first().launching:
            return "a launch is in progress (its containers keep booting on the hosts)"
        setup = self.query(SetupPane)
        if setup and setup.first().running:
            return "a setup job is running (quitting cancels its remote commands)"
        return ""

    async def action_quit(self) -> None:
        why = self.busy()
        if not why:
            self.exit()
            return
        self.push_screen(ConfirmQuit(why), lambda yes: self.exit() if yes else None)

    def on_host_status_changed(self, message: HostStatusChanged) -> None:
        self.show_status(message.status)

    def show_status(self, status: HostStatus) -> None:
        """Render one host's new status everywhere it shows (nowhere once the app is closing: the fleet
        closes in `on_unmount`, after the panes are gone, and its hosts still report CLOSED)."""
        panes = self.query(HostsPane)
        if not panes:
            return
        panes.first().update_status(status)
        self.refresh_header()

    def _tick(self) -> None:
        if not self.is_running:
            return
        for notice in self.ctx.watcher.ledger.pop_warnings():   # a corrupt launch ledger kept aside, …
            self.notify(safe(notice.message), title=notice.code, severity="warning", timeout=30)
        pane = self.query_one(HostsPane)
        for status in pane.statuses:
            if not status.connected:
                pane.update_status(status)  # ages of non-connected states move on
        self.refresh_header()

    def _apply_ui_settings(self) -> None:
        """[ui] keymap and theme from cluster.toml; a theme picked at run time is remembered per user."""
        if self.config.ui.keymap:
            self.set_keymap(dict(self.config.ui.keymap))
        theme = self.config.ui.theme or uistate.load().get("theme")
        if theme and theme in self.available_themes:
            self.theme = theme
        elif theme:
            self.notify(f"unknown theme {theme!r}; keeping {self.theme}", severity="warning")
        self.theme_changed_signal.subscribe(self, lambda t: uistate.save({"theme": t.name}))

    def refresh_header(self) -> None:
        self.query_one(ClusterHeader).show(self.config.cluster.name, self.query_one(HostsPane).statuses,
                                           self.ctx.watcher.timeline, self.ctx.watcher.looked())

    def action_show_pane(self, pane_id: str) -> None:
        self.query_one(TabbedContent).active = pane_id
        self._focus_pane(pane_id)  # now, not after a refresh: nothing may land on the old pane meanwhile

    def _focus_pane(self, pane_id: str) -> None:
        """Keys go to the pane just shown: its `FOCUS` widget if it names one (a pane you type into),
        else whatever it focused itself, else its first focusable widget."""
        tab = self.query_one(f"#{pane_id}", TabPane)
        pane = next(iter(tab.children), None)
        selector = getattr(pane, "FOCUS", None)
        if pane is not None and selector:
            pane.query_one(selector).focus()
            return
        if self.focused is not None and tab in self.focused.ancestors:
            return
        for widget in tab.query("*"):
            if widget.focusable:
                widget.focus()
                return

    def action_keys(self) -> None:
        rows = []
        for binding in [*self.BINDINGS, *Screen.BINDINGS]:
            if isinstance(binding, Binding):
                key = binding.key_display or binding.key
                rows.append((key, binding.description or binding.action, binding.id or "-"))
        self.push_screen(KeyMapScreen(rows))

    def get_system_commands(self, screen: Screen) -> Iterable[SystemCommand]:
        yield from super().get_system_commands(screen)
        for pid, label, _ in PANES:
            number, title = label.split(maxsplit=1)
            yield SystemCommand(f"Pane: {title}", f"Show the {title} pane (key {number})",
                                lambda pid=pid: self.action_show_pane(pid))
