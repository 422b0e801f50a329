"""Hosts pane: rank, target, state, latency, host key fingerprint and last error, live."""

from __future__ import annotations

import time

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Vertical
from textual.widgets import DataTable, Static

from cockpit.hosts.state import HostState, HostStatus
from cockpit.safetext import neutralise, neutralise_block, safe
from cockpit.tui.context import CockpitContext

STATE_STYLE = {
    HostState.CONNECTED: "bold green",
    HostState.CONNECTING: "yellow",
    HostState.LOST: "bold red",
    HostState.UNREACHABLE: "red",
    HostState.TIMEOUT: "red",
    HostState.KEY_UNKNOWN: "bold magenta",
    HostState.KEY_CHANGED: "bold white on red",
    HostState.KEY_REVOKED: "bold white on red",
    HostState.KNOWN_HOSTS_MISSING: "bold magenta",
    HostState.SSH_CONFIG_UNSAFE: "bold magenta",
    HostState.AUTH_FAILED: "bold red",
    HostState.CLOSED: "dim",
}
COLUMNS = ("rank", "host", "target", "state", "latency", "host key (SHA256)", "last error")


def _age(since: float, now: float) -> str:
    secs = max(0, int(now - since))
    if secs < 120:
        return f"{secs}s"
    return f"{secs // 60}m" if secs < 7200 else f"{secs // 3600}h"


class HostsPane(Vertical):
    """A row per host; the selected host's error and remedy below."""

    DEFAULT_CSS = """
    HostsPane DataTable { height: auto; max-height: 70%; }
    HostsPane #host-detail { padding: 1 1; height: auto; }
    """

    def __init__(self, ctx: CockpitContext, **kwargs: object):
        super().__init__(**kwargs)  # type: ignore[arg-type]
        self._statuses: dict[int, HostStatus] = {r: ctx.fleet[r].status for r in ctx.config.ranks}
        self.show_ages = True

    def compose(self) -> ComposeResult:
        table: DataTable[Text | str] = DataTable(id="hosts-table", cursor_type="row", zebra_stripes=True)
        yield table
        yield Static(id="host-detail", markup=False)

    def on_mount(self) -> None:
        table = self.query_one(DataTable)
        for col in COLUMNS:
            table.add_column(col, key=col)
        for rank, status in sorted(self._statuses.items()):
            table.add_row(*self._cells(status), key=str(rank))
        self._show_detail()

    def _cells(self, s: HostStatus) -> list[Text | str]:
        state = s.state.value
        if s.state is not HostState.CONNECTED and self.show_ages:
            state += f" ({_age(s.since, time.time())})"
        fp = neutralise((s.fingerprint or "-").removeprefix("SHA256:"))
        err = neutralise((s.error or "").splitlines()[0][:60]) if s.error else ""
        return [str(s.rank), Text(safe(s.hostname or "-", 200)), Text(safe(s.target, 200)),
                Text(state, style=STATE_STYLE[s.state]),
                f"{s.latency_ms:.1f} ms" if s.latency_ms is not None else "-", Text(fp, style="dim"),
                Text(err, style="red")]

    def update_status(self, status: HostStatus) -> None:
        self._statuses[status.rank] = status
        table = self.query_one(DataTable)
        for col, value in zip(COLUMNS, self._cells(status), strict=True):
            table.update_cell(str(status.rank), col, value, update_width=True)
        self._show_detail()

    def on_data_table_row_highlighted(self, event: DataTable.RowHighlighted) -> None:
        self._show_detail()

    def _show_detail(self) -> None:
        table = self.query_one(DataTable)
        if not self._statuses or table.row_count == 0:
            return
        rank = sorted(self._statuses)[min(table.cursor_row, len(self._statuses) - 1)]
        s = self._statuses[rank]
        head = f"rank {s.rank} — {safe(s.target, 200)} — {s.state.value}"
        lines = [head + (f" [{s.code}]" if s.code else "")]
        for old in s.known_fingerprints:
            lines.append(f"known_hosts holds: {neutralise(old)}")
        if s.fingerprint:
            label = "host offers" if s.known_fingerprints else "host key"
            lines.append(f"{label}: {neutralise(s.fingerprint)}")
        if s.known_hosts and not s.connected:
            lines.append(f"checked against: {safe(s.known_hosts, 400)}")
        if s.error:
            lines.append(f"error: {neutralise_block(s.error[:4000])}")
        if s.remedy:
            lines.append(f"remedy: {neutralise_block(s.remedy[:4000])}")
        self.query_one("#host-detail", Static).update(Text("\n".join(lines)))

    @property
    def statuses(self) -> list[HostStatus]:
        return [self._statuses[r] for r in sorted(self._statuses)]
