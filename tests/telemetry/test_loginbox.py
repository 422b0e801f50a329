"""The log readers' inboxes (telemetry, not TUI): bounded with the oldest lines dropped and counted, and a
slice takes the same stretch of time from every rank."""

from __future__ import annotations

import importlib
from pathlib import Path

from cockpit.telemetry.loginbox import Inbox, take_slice
from cockpit.telemetry.logline import LogLine


def test_an_inbox_is_bounded_and_counts_what_it_dropped() -> None:
    box = Inbox(capacity=3)
    box.extend([LogLine(ts, 0, f"line {ts}") for ts in range(5)])
    assert len(box) == 3 and box.lost == 2
    assert box.take(2) == ([2, 3], ["line 2", "line 3"])
    assert box.take(10) == ([4], ["line 4"]) and len(box) == 0


def test_a_slice_takes_the_same_stretch_of_time_from_every_rank() -> None:
    fast, slow = Inbox(100), Inbox(100)
    for ts in range(10):
        fast.push(ts, f"fast {ts}")
    for ts in (0, 5, 9):
        slow.push(ts, f"slow {ts}")
    got = take_slice({0: fast, 1: slow}, limit=4)
    assert got[0][0] == [0, 1] and got[1][0] == [0]     # up to the same time on both ranks
    assert len(fast) == 8 and len(slow) == 2
    assert take_slice({0: Inbox(5)}, 10) == {}


def test_the_logs_pane_uses_the_telemetry_inbox() -> None:
    logs = importlib.import_module("cockpit.tui.panes.logs")
    assert logs.Inbox is Inbox and "class Inbox" not in Path(logs.__file__).read_text()
