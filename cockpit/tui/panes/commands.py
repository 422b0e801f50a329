"""Commands pane: every command this cockpit ran on a host, live (newest at the bottom, followed unless
the cursor was moved up): time, rank, who asked, exit, duration and the exact line. Filter by rank and by
text; the selected row's full line shows below the table, and a key copies it. Lines are redacted and
neutralised (`cockpit.recipe.history.redact`, `cockpit.safetext`); the session file has the same."""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable
from pathlib import Path

from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.message import Message
from textual.widgets import DataTable, Input, Static
from textual.widgets.data_table import RowKey

from cockpit.hosts import CommandRecord
from cockpit.hosts.fleet import COMMAND_LOG_CAP
from cockpit.recipe.history import failed as command_failed
from cockpit.recipe.history import matches, outcome_label, redact
from cockpit.safetext import clip, neutralise, neutralise_block, safe
from cockpit.tui.context import CockpitContext
from cockpit.tui.pane import Pane
from cockpit.tui.styles import rank_role
from cockpit.tui.widgets.statusline import StatusLine

COLUMNS = ("time", "rank", "origin", "exit", "duration", "line")
LINE_CELL = 160     # characters of a line in the table (the detail below shows all of it)
DETAIL_MAX = 8_000  # characters of the selected line shown below the table


class CommandRecorded(Message):
    """The fleet recorded a command (posted from the fleet's callback)."""

    def __init__(self, record: CommandRecord):
        super().__init__()
        self.record = record


OUTCOME_ROLE = {"timeout": "warn", "lost": "fail", "stream": "muted", "—": "muted", "0": "ok.soft"}


def outcome(rec: CommandRecord) -> tuple[str, str]:
    """The exit column's text (the command log's one rule) and role: ok, failed, timeout, lost; a stream
    has no exit."""
    label = outcome_label(rec.exit_status, rec.note)
    return label, OUTCOME_ROLE.get(label, "fail")


def shown_line(rec: CommandRecord) -> str:
    return neutralise(redact(rec.command))


class CommandsPane(Pane):
    """The command log of this session: a table, a text filter, the selected line and a status line."""

    TITLE = "Commands"
    HEADLESS = "r37-cockpit history last"
    FOCUS = "#commands-table"
    HINTS = ("cycle_rank", "filter", "copy", "follow")

    BINDINGS = [
        Binding("r", "cycle_rank", "Rank", id="commands.rank"),
        Binding("slash", "filter", "Filter", id="commands.filter", key_display="/"),
        Binding("escape", "clear_filter", "Clear filter", id="commands.clear_filter", show=False),
        Binding("c", "copy", "Copy line", id="commands.copy"),
        Binding("f,end", "follow", "Follow", id="commands.follow"),
        Binding("b", "report", "Support bundle", id="commands.report", show=False),   # and the palette
    ]
    DEFAULT_CSS = """
    CommandsPane #commands-filter { height: 3; }
    CommandsPane #commands-table { height: 1fr; }
    CommandsPane #commands-line { height: auto; max-height: 6; padding: 0 1; }
    CommandsPane #commands-status { padding: 0 1; }
    """

    clock: Callable[[float], time.struct_time] = staticmethod(time.localtime)
    """How the time column reads a record's start (local time)."""
    report_clock: Callable[[], float] = staticmethod(time.time)
    """The support bundle's time (its name)."""

    def __init__(self, ctx: CockpitContext, *, id: str | None = None, classes: str | None = None):
        super().__init__(ctx, id=id, classes=classes)
        self.records: deque[CommandRecord] = deque(maxlen=COMMAND_LOG_CAP)
        self.rank: int | None = None      # None: every rank
        self.text = ""
        self.listed: list[CommandRecord] = []
        self.failed = 0                   # of `records` (kept as records come and go)
        self._keys: list[RowKey] = []     # the table's row of each listed record
        self._stop_listening = lambda: None

    def compose(self) -> ComposeResult:
        yield Input(id="commands-filter", placeholder="text in the line or origin; Enter applies")
        yield DataTable(id="commands-table", cursor_type="row", zebra_stripes=True)
        yield Static(id="commands-line", markup=False)
        yield StatusLine(id="commands-status")

    def on_mount(self) -> None:
        table = self.query_one(DataTable)
        for col in COLUMNS:
            table.add_column(col, key=col)
        for rec in self.ctx.fleet.command_log:
            if rec.done:
                self.records.append(rec)
        self._stop_listening = self.ctx.fleet.on_command(self._recorded)
        self.rebuild()

    def on_unmount(self) -> None:
        self._stop_listening()

    def _recorded(self, rec: CommandRecord) -> None:
        if rec.done:
            self.post_message(CommandRecorded(rec))

    def on_command_recorded(self, message: CommandRecorded) -> None:
        self.add(message.record)

    # ---- the model -----------------------------------------------------------------------------------

    def matches(self, rec: CommandRecord) -> bool:
        ranks = () if self.rank is None else (self.rank,)
        return matches(rec.rank, rec.command, rec.origin, ranks, self.text)

    def add(self, rec: CommandRecord) -> None:
        """One more finished command; the table follows it when the cursor was on the last row. At the
        cap the oldest record leaves, and its row with it (the rest of the table stays)."""
        table = self.query_one(DataTable)
        following = table.row_count == 0 or table.cursor_row >= table.row_count - 1
        if len(self.records) == self.records.maxlen:
            oldest = self.records[0]
            self.failed -= command_failed(oldest.exit_status, oldest.note)
            if self.listed and self.listed[0] is oldest:
                del self.listed[0]
                table.remove_row(self._keys.pop(0))
                if not following and table.cursor_row > 0:
                    table.move_cursor(row=table.cursor_row - 1)   # the same command stays selected
        self.records.append(rec)
        self.failed += command_failed(rec.exit_status, rec.note)
        if self.matches(rec):
            self.listed.append(rec)
            self._keys.append(table.add_row(*self._cells(rec)))
            if following:
                table.move_cursor(row=table.row_count - 1)
        self._show_status()

    def rebuild(self) -> None:
        """The table again from the records, by the filters (the cursor goes to the newest row)."""
        table = self.query_one(DataTable)
        table.clear()
        self.listed = [rec for rec in self.records if self.matches(rec)]
        self._keys = [table.add_row(*self._cells(rec)) for rec in self.listed]
        self.failed = sum(command_failed(r.exit_status, r.note) for r in self.records)
        if self.listed:
            table.move_cursor(row=len(self.listed) - 1)
        self._show_detail(self.selected())
        self._show_status()

    def _cells(self, rec: CommandRecord) -> list[Text]:
        label, role = outcome(rec)
        duration = "" if rec.duration is None else f"{rec.duration:.2f}s"
        return [Text(time.strftime("%H:%M:%S", self.clock(rec.started)), style="muted"),
                Text(str(rec.rank), style=rank_role(rec.rank)),
                Text(neutralise(rec.origin) or "—", style="" if rec.origin else "muted"),
                Text(label, style=role), Text(duration, style="muted"),
                Text(clip(shown_line(rec), LINE_CELL))]

    def selected(self) -> CommandRecord | None:
        table = self.query_one(DataTable)
        if not self.listed or not 0 <= table.cursor_row < len(self.listed):
            return None
        return self.listed[table.cursor_row]

    @on(DataTable.RowHighlighted, "#commands-table")
    def _highlighted(self, event: DataTable.RowHighlighted) -> None:
        self._show_detail(self.selected())

    def _show_detail(self, rec: CommandRecord | None) -> None:
        line = self.query_one("#commands-line", Static)
        if rec is None:
            line.update(Text("no command selected", style="muted") if self.records else Text(
                "no command has run on a host yet in this session", style="muted"))
            return
        label, role = outcome(rec)
        text = Text.assemble((f"rank {rec.rank}", "bold"), "  ", (label, role), "  ",
                             (neutralise(rec.origin) or "—", "muted"), "\n")
        text.append(neutralise_block(clip(redact(rec.command), DETAIL_MAX)))
        line.update(text)

    def _show_status(self) -> None:
        if not self.is_mounted:
            return
        rank = "all ranks" if self.rank is None else f"rank {self.rank}"
        total = len(self.records)
        listed = len(self.listed)
        count = f"{listed} of {total} commands" if listed != total else f"{total} commands"
        parts = [Text(count), Text(rank)]
        if self.text:
            parts.append(Text(f"filter: {neutralise(self.text)}", style="warn.soft"))
        if self.failed:
            parts.append(Text(f"{self.failed} failed", style="fail"))
        self.query_one(StatusLine).show([(parts, " · "), (self.key_hint_parts(), "  ")])

    def refresh_view(self) -> None:
        if self.is_mounted:
            self.rebuild()

    # ---- actions -------------------------------------------------------------------------------------

    def action_cycle_rank(self) -> None:
        """all → each rank of the cluster in order → all."""
        order: list[int | None] = [None, *self.ctx.config.ranks]
        self.rank = order[(order.index(self.rank) + 1) % len(order)] if self.rank in order else None
        self.rebuild()

    def action_filter(self) -> None:
        self.query_one("#commands-filter", Input).focus()

    def action_clear_filter(self) -> None:
        box = self.query_one("#commands-filter", Input)
        box.value = ""
        if self.text:
            self.text = ""
            self.rebuild()
        self.query_one(DataTable).focus()

    @on(Input.Submitted, "#commands-filter")
    def _filter_submitted(self, event: Input.Submitted) -> None:
        event.stop()
        self.apply_filter(event.value)
        self.query_one(DataTable).focus()

    def apply_filter(self, text: str) -> None:
        text = text.strip()[:200]
        if text != self.text:
            self.text = text
            self.rebuild()

    def action_copy(self) -> None:
        rec = self.selected()
        if rec is None:
            self.notify("no command selected", severity="warning")
            return
        self.app.copy_to_clipboard(redact(rec.command))
        self.notify("command line copied to the clipboard", timeout=3)

    def action_follow(self) -> None:
        table = self.query_one(DataTable)
        if table.row_count:
            table.move_cursor(row=table.row_count - 1)

    # ---- the support bundle (`r37-cockpit report`) -----------------------------------------------------

    def action_report(self) -> None:
        """Ask, then write a redacted support bundle into the state directory's `reports/`."""
        from cockpit.locations import state_dir
        from cockpit.recipe.report import bundle_name
        from cockpit.tui.dialogs import Confirm
        now = self.report_clock()
        path = state_dir() / "reports" / f"{bundle_name(self.ctx.config.cluster.name, now)}.tar.gz"
        question = f"Write a support bundle to {path}?"
        detail = ("It holds versions, cluster.toml, preflight and status, each rank's docker inspect, "
                  "nvidia-smi -q, fabric facts and log lines around the first failure, and the command log. "
                  "Read-only on the hosts. Secrets, host names, IPs and user names are replaced "
                  "(`r37-cockpit report --no-redact-hosts` keeps hosts).")

        def answered(yes: bool | None) -> None:
            if yes:
                self._write_report(path, now)

        self.app.push_screen(Confirm(question, yes="write it", no="cancel", detail=detail), answered)

    @work(exclusive=True, group="report", exit_on_error=False)
    async def _write_report(self, path: Path, now: float) -> None:
        from cockpit.locations import state_dir
        from cockpit.recipe.report import gather, redactor_for, write_bundle
        self.app.notify("collecting the support bundle …", title="support bundle")
        bundle = await gather(self.ctx.fleet, self.ctx.config, self.ctx.config_path, state_dir=state_dir(),
                              now=now)
        path.parent.mkdir(parents=True, exist_ok=True)
        written, files = write_bundle(bundle, redactor_for(self.ctx.config, bundle, redact_hosts=True), path,
                                      True)
        missing = f"; not readable: {len(bundle.problems)} part(s)" if bundle.problems else ""
        self.app.notify(f"wrote {safe(str(written), 300)} ({len(files)} files, redacted){missing}",
                        title="support bundle", timeout=30)
