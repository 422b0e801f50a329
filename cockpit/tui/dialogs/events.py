"""The incident timeline (`E`, or "Events" in the palette): what the cluster's recording holds, in order —
verdicts, rank conditions, failures, hosts lost and back, alerts, who launched, stopped or relaunched —
the same rows `r37-cockpit events` prints. `r` shows one rank at a time (and the cluster's own events),
`u` reads the recording again; the newest event is selected."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from pathlib import Path

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import DataTable, Static

from cockpit.safetext import safe
from cockpit.telemetry.recorder import Event, RecordingUnreadable, read_events
from cockpit.tui.keys import hints

MAX_SHOWN = 2000              # the newest events shown

KIND_STYLES = {"failure": "fail", "host-lost": "fail", "alert-raised": "warn", "xid": "fail",
               "verdict": "accent",
               "launch": "command", "stop": "command", "relaunch": "command", "bench": "command",
               "host-back": "ok.soft", "alert-cleared": "ok.soft", "recorder": "muted", "phase": "muted"}


def verdict_style(e: Event) -> str:
    state = str(e.data.get("state", ""))
    if state in ("down", "hung", "host-lost"):
        return "alarm"
    if state == "ready":
        return "ok"
    return KIND_STYLES.get(e.kind, "")


class EventsScreen(ModalScreen[None]):
    BINDINGS = [
        Binding("escape,q", "dismiss", "Close", id="events.close"),
        Binding("r", "next_rank", "Rank", id="events.rank"),
        Binding("u", "reload", "Read again", id="events.reload"),
    ]
    DEFAULT_CSS = """
    EventsScreen { align: center middle; }
    EventsScreen > Vertical { width: 100%; max-width: 150; height: 95%; border: round $accent;
                              background: $surface; padding: 0 1; }
    EventsScreen DataTable { height: 1fr; }
    """

    def __init__(self, path: Path, cluster: str, ranks: list[int],
                 flush: Callable[[], object] | None = None, until: float | None = None) -> None:
        """`path`: the cluster's recording; `flush`: commits what the running recorder holds (called in a
        thread before every read); `until`: only the events up to then (a replay's time)."""
        super().__init__()
        self.path = path
        self.cluster = cluster
        self.ranks = ranks
        self.flush = flush
        self.until = until
        self.rank: int | None = None
        self.events: list[Event] = []
        self.problem = ""

    def compose(self) -> ComposeResult:
        with Vertical():
            yield Static(id="events-title", markup=False)
            table: DataTable[Text | str] = DataTable(cursor_type="row", id="events-table")
            table.add_columns("time", "rank", "kind", "what")
            yield table
            yield Static(hints(self), markup=False)

    async def on_mount(self) -> None:
        await self.load()

    async def load(self) -> None:
        self.problem = ""
        try:
            self.events = await asyncio.to_thread(self._read)
        except FileNotFoundError:
            self.events, self.problem = [], "nothing recorded yet"
        except RecordingUnreadable as exc:
            self.events, self.problem = [], f"the recording cannot be read: {exc}"
        self.render_rows()

    def _read(self) -> list[Event]:
        if self.flush is not None:
            self.flush()
        return read_events(self.path, rank=self.rank, until=self.until, limit=MAX_SHOWN, newest=True)

    def render_rows(self) -> None:
        title = Text.assemble(("Events", "bold"), f" — cluster {safe(self.cluster, 60)}",
                              (f" · rank {self.rank} and the cluster's own" if self.rank is not None
                               else " · every rank"))
        if self.problem:
            title.append(f" · {safe(self.problem, 300)}", style="warn")
        elif self.events:
            first, last = self.events[0].t, self.events[-1].t
            title.append(f"\n{len(self.events)} events, {_when(first)} … {_when(last)}", style="muted")
        else:
            title.append(" · no event in the recording", style="muted")
        title.append(f" · {safe(self.path.name, 200)}", style="muted")
        self.query_one("#events-title", Static).update(title)
        table = self.query_one("#events-table", DataTable)
        table.clear()
        day = None
        for e in self.events:
            stamp = time.localtime(e.t)
            this_day = time.strftime("%Y-%m-%d %A", stamp)
            if this_day != day:                    # a row of its own when the day changes
                table.add_row(Text("────────", style="muted"), "", "", Text(this_day, style="accent"))
                day = this_day
            style = verdict_style(e) if e.kind == "verdict" else KIND_STYLES.get(e.kind, "")
            if e.kind == "condition" and e.data.get("to") in ("failed", "unknown"):
                style = "fail"
            table.add_row(Text(time.strftime("%H:%M:%S", stamp), style="muted"),
                          "—" if e.rank is None else str(e.rank), Text(e.kind, style=style),
                          Text(safe(e.summary, 400), style=style))
        if self.events:
            table.move_cursor(row=table.row_count - 1)

    async def action_next_rank(self) -> None:
        order: list[int | None] = [None, *self.ranks]
        self.rank = order[(order.index(self.rank) + 1) % len(order)] if self.rank in order else None
        await self.load()

    async def action_reload(self) -> None:
        await self.load()


def _when(t: float) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(t))
