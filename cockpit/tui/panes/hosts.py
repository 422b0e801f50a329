"""Hosts pane: rank, target, state, latency, host key fingerprint and last error, live."""

from __future__ import annotations

import time

from rich.text import Text
from textual.app import ComposeResult
from textual.widgets import DataTable, Static

from cockpit.hosts.state import HostState, HostStatus
from cockpit.safetext import neutralise, neutralise_block, safe
from cockpit.tui.context import CockpitContext
from cockpit.tui.pane import Pane

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


def _age(since: float, now: float) -> str:
    secs = max(0, int(now - since))
    if secs < 120:
        return f"{secs}s"
    return f"{secs // 60}m" if secs < 7200 else f"{secs // 3600}h"


class HostsPane(Pane):
    """A row per host; the selected host's error and remedy below."""

    TITLE = "Hosts"
    HEADLESS = "r37-cockpit hosts"
    FOCUS = "#hosts-table"

    DEFAULT_CSS = """
    HostsPane DataTable { height: auto; max-height: 70%; }
    HostsPane #host-detail { padding: 1 1; height: auto; }
    """

    def __init__(self, ctx: CockpitContext, *, id: str | None = None, classes: str | None = None):
        super().__init__(ctx, id=id, classes=classes)
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
                f"{s.latency_ms:.1f} ms" if s.latency_ms is not None else "-", Text(fp, style="muted"),
                Text(err, style="fail.soft")]

    def update_status(self, status: HostStatus) -> None:
        self._statuses[status.rank] = status
        table = self.query_one(DataTable)
        for col, value in zip(COLUMNS, self._cells(status), strict=True):
            table.update_cell(str(status.rank), col, value, update_width=True)
        self._show_detail()

    def refresh_view(self) -> None:
        for status in self.statuses:
            self.update_status(status)

    def on_data_table_row_highlighted(self, event: DataTable.RowHighlighted) -> None:
        self._show_detail()

    def _show_detail(self) -> None:
        table = self.query_one(DataTable)
        if not self._statuses or table.row_count == 0:
            return
        rank = sorted(self._statuses)[min(table.cursor_row, len(self._statuses) - 1)]
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
        self.query_one("#host-detail", Static).update(text)

    @property
    def statuses(self) -> list[HostStatus]:
        return [self._statuses[r] for r in sorted(self._statuses)]
