"""Hosts pane: rank, target, state, latency, host key fingerprint and last error, live; a shell on the
selected host (or in its container) with the cockpit's SSH settings, the cockpit suspended meanwhile."""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Sequence
from typing import TextIO

from rich.text import Text
from textual.app import App, ComposeResult, SuspendNotSupported
from textual.binding import Binding
from textual.widgets import DataTable, Static

from cockpit.hosts.shell_login import SSH_MISSING, ShellRefused, run_attached, shell_argv, shown, ssh_client
from cockpit.hosts.state import LATENCY_EVERY, HostState, HostStatus
from cockpit.recipe.history import mark_host_change
from cockpit.remedy import cockpit_remedy
from cockpit.safetext import neutralise, neutralise_block, safe
from cockpit.tui.context import CockpitContext
from cockpit.tui.pane import Pane
from cockpit.tui.widgets.age import span

STATE_STYLE = {
    HostState.CONNECTED: "ok",
    HostState.CONNECTING: "warn.soft",
    HostState.LOST: "fail",
    HostState.UNREACHABLE: "fail.soft",
    HostState.TIMEOUT: "fail.soft",
    HostState.KEY_UNKNOWN: "unknown",
    HostState.KEY_CHANGED: "alarm",
    HostState.KEY_REVOKED: "alarm",
    HostState.KNOWN_HOSTS_MISSING: "unknown",
    HostState.SSH_CONFIG_UNSAFE: "unknown",
    HostState.AUTH_FAILED: "fail",
    HostState.CLOSED: "muted",
}
COLUMNS = ("rank", "host", "target", "state", "latency", "host key (SHA256)", "last error")


def suspended_run(app: App[object], argv: Sequence[str]) -> int:
    """Hand the terminal to `argv` with the app suspended (Textual's App.suspend), then resume it where it
    was; SuspendNotSupported where the app cannot let go of its screen (web mode, a test driver). A session
    that failed waits for Enter first, so what ssh or docker said is read before the cockpit redraws."""
    with app.suspend():
        status = run_attached(argv)
        if status != 0:
            wait_for_enter(status, sys.__stdin__, sys.__stderr__)
        return status


def wait_for_enter(status: int, stdin: TextIO | None, out: TextIO | None) -> None:
    """"exit status N: press Enter to return to the cockpit", then one line read (EOF or Ctrl-C also
    return)."""
    if stdin is None or out is None:
        return
    try:
        out.write(f"\n[exit status {status}: press Enter to return to the cockpit]")
        out.flush()
        stdin.readline()
    except (OSError, EOFError, KeyboardInterrupt, ValueError):
        return


class HostsPane(Pane):
    """A row per host; the selected host's error and remedy below."""

    TITLE = "Hosts"
    HEADLESS = "r37-cockpit hosts"
    FOCUS = "#hosts-table"
    BINDINGS = [
        Binding("s", "shell", "Shell", id="hosts.shell"),
        Binding("e", "container_shell", "Container shell", id="hosts.container_shell"),
    ]

    DEFAULT_CSS = """
    HostsPane DataTable { height: auto; max-height: 70%; }
    HostsPane #host-detail { padding: 1 1; height: auto; }
    """

    def __init__(self, ctx: CockpitContext, *, id: str | None = None, classes: str | None = None):
        super().__init__(ctx, id=id, classes=classes)
        self._statuses: dict[int, HostStatus] = {r: ctx.fleet[r].status for r in ctx.config.ranks}
        self._shown_cells: dict[int, dict[str, Text | str]] = {}
        self._shown_detail: Text | None = None
        self._latency_held: set[int] = set()    # ranks whose new latency waits for `_draw_latencies`
        self.show_ages = True
        # runs a session's argv with the terminal handed over, returns its exit status (tests: a fake)
        self.run_session: Callable[[App[object], Sequence[str]], int] = suspended_run

    def compose(self) -> ComposeResult:
        table: DataTable[Text | str] = DataTable(id="hosts-table", cursor_type="row", zebra_stripes=True)
        yield table
        yield Static(id="host-detail", markup=False)

    def on_mount(self) -> None:
        table = self.query_one(DataTable)
        for col in COLUMNS:
            table.add_column(col, key=col)
        for rank, status in sorted(self._statuses.items()):
            cells = self._cells(status)
            table.add_row(*cells, key=str(rank))
            self._shown_cells[rank] = dict(zip(COLUMNS, cells, strict=True))
        self._show_detail()
        self.set_interval(LATENCY_EVERY, self._draw_latencies)

    def _cells(self, s: HostStatus) -> list[Text | str]:
        state = s.state.value
        if s.state is not HostState.CONNECTED and self.show_ages:
            state += f" ({span(time.time() - s.since, compact=True)})"
        fp = neutralise((s.fingerprint or "-").removeprefix("SHA256:"))
        err = neutralise((s.error or "").splitlines()[0][:60]) if s.error else ""
        return [str(s.rank), Text(safe(s.hostname or "-", 200)), Text(safe(s.target, 200)),
                Text(state, style=STATE_STYLE[s.state]),
                f"{s.latency_ms:.1f} ms" if s.latency_ms is not None else "-", Text(fp, style="muted"),
                Text(err, style="fail.soft")]

    def host_changed(self, status: HostStatus) -> None:
        self.update_status(status)

    def update_status(self, status: HostStatus) -> None:
        """Redraw one host's row: only the cells whose text changed (an unchanged status, an age that
        shows the same, costs no redraw: perf/watch_cost.py). A change of latency alone waits for the
        next `_draw_latencies`, which draws every host's at once: each host measures its own every
        LATENCY_EVERY seconds, and each change redrew the whole table (four redraws where one does)."""
        self._statuses[status.rank] = status
        shown = self._shown_cells.get(status.rank, {})
        cells = dict(zip(COLUMNS, self._cells(status), strict=True))
        changed = [col for col in COLUMNS if shown.get(col) != cells[col]]
        if changed == ["latency"] and "latency" in shown:
            self._latency_held.add(status.rank)
            return
        self._latency_held.discard(status.rank)
        for col in changed:
            self._put(status.rank, col, cells[col])
        self._show_detail()

    def _put(self, rank: int, col: str, value: Text | str) -> None:
        """One cell drawn, and remembered as shown."""
        self.query_one(DataTable).update_cell(str(rank), col, value, update_width=True)
        self._shown_cells.setdefault(rank, {})[col] = value

    def _draw_latencies(self) -> None:
        """The latencies measured since the last draw, all in one redraw (at most LATENCY_EVERY old)."""
        held, self._latency_held = self._latency_held, set()
        for rank in sorted(held):
            value = self._cells(self._statuses[rank])[COLUMNS.index("latency")]
            if self._shown_cells.get(rank, {}).get("latency") != value:
                self._put(rank, "latency", value)

    def refresh_view(self) -> None:
        """Draw every row and the detail again (the theme or the keymap changed)."""
        self._shown_cells.clear()
        self._shown_detail = None
        for status in self.statuses:
            self.update_status(status)

    def on_data_table_row_highlighted(self, event: DataTable.RowHighlighted) -> None:
        self._show_detail()

    @property
    def selected_rank(self) -> int | None:
        table = self.query_one(DataTable)
        if not self._statuses or table.row_count == 0:
            return None
        return sorted(self._statuses)[min(table.cursor_row, len(self._statuses) - 1)]

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        return self.ctx.allows("hosts", action)

    def action_shell(self) -> None:
        self.open_shell(container=False)

    def action_container_shell(self) -> None:
        self.open_shell(container=True)

    def open_shell(self, *, container: bool) -> None:
        """An interactive session on the selected host (or in its container): the cockpit suspends, the
        operator's terminal runs `ssh`, the cockpit resumes; logged in the command log with its status."""
        rank = self.selected_rank
        if rank is None:
            return
        where = f"rank {rank}'s container" if container else f"rank {rank}"
        if ssh_client() is None:
            self.notify(SSH_MISSING, title=f"no shell on {where}", severity="error", timeout=20)
            return
        try:
            argv = shell_argv(self.ctx.config, rank, container=container)
        except ShellRefused as exc:
            self.notify(neutralise(str(exc))[:600], title=f"no shell on {where}", severity="error",
                        timeout=20)
            return
        started = time.time()
        mark_host_change("container shell" if container else "shell")
        try:
            status = self.run_session(self.app, argv)
        except SuspendNotSupported:
            headless = f"`r37-cockpit ssh {rank}{' --container' if container else ''}`"
            self.notify(cockpit_remedy(f"this cockpit cannot hand its terminal to a shell (web mode or a "
                                       f"test driver): run {headless} in a terminal",
                                       self.ctx.config_path),
                        title=f"no shell on {where}", severity="warning", timeout=20)
            return
        self.ctx.fleet.record_external(rank, shown(argv), started, time.time() - started, status,
                                       note="interactive container shell" if container
                                       else "interactive shell", origin="pane:Hosts")
        self.notify(f"the shell on {where} ended with exit status {status}",
                    severity="information" if status == 0 else "warning")

    def _show_detail(self) -> None:
        rank = self.selected_rank
        if rank is None:
            return
        s = self._statuses[rank]
        text = Text.assemble((f"rank {s.rank}", "bold"), f" — {safe(s.target, 200)} — ",
                             (s.state.value, STATE_STYLE[s.state]))
        if s.code:
            text.append(f" [{s.code}]", style="muted")
        for old in s.known_fingerprints:
            text.append(f"\nknown_hosts holds: {neutralise(old)}")
        if s.fingerprint:
            label = "host offers" if s.known_fingerprints else "host key"
            text.append(f"\n{label}: {neutralise(s.fingerprint)}")
        if s.known_hosts and not s.connected:
            text.append(f"\nchecked against: {safe(s.known_hosts, 400)}")
        if s.error:
            text.append("\nerror: ", style="bold")
            text.append(neutralise_block(s.error[:4000]), style="fail.soft")
        if s.remedy:
            text.append("\nremedy: ", style="bold")
            text.append(neutralise_block(s.remedy[:4000]))
        if text != self._shown_detail:      # an unchanged detail costs no layout pass
            self._shown_detail = text
            self.query_one("#host-detail", Static).update(text)

    @property
    def statuses(self) -> list[HostStatus]:
        return [self._statuses[r] for r in sorted(self._statuses)]
