"""Bounded inboxes between the log readers and whoever shows the lines (the Logs pane flushes them).

A reader (one per rank, following `docker logs -f -t`) only appends to its :class:`Inbox`; the consumer
takes the same stretch of time from every inbox (:func:`take_slice`), so a backlog on one rank does not
reach the merged view late. Not TUI code: plain columns of timestamps and texts.
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Sequence

from cockpit.telemetry.logline import LogLine


class Inbox:
    """One reader's lines waiting for the next flush, as columns (no object per line lives on: a queue
    of tuples kept the garbage collector busy); bounded, the oldest lines go first (counted in `lost`)."""

    __slots__ = ("capacity", "lost", "stamps", "texts")

    def __init__(self, capacity: int):
        self.capacity = capacity
        self.stamps: list[int] = []
        self.texts: list[str] = []
        self.lost = 0

    def __len__(self) -> int:
        return len(self.texts)

    def push(self, ts: int, text: str) -> None:
        self.stamps.append(ts)
        self.texts.append(text)
        if len(self.texts) > self.capacity + 1024:
            self._bound()

    def extend(self, lines: Sequence[LogLine]) -> None:
        self.stamps.extend(line.ts for line in lines)
        self.texts.extend(line.text for line in lines)
        if len(self.texts) > self.capacity:
            self._bound()

    def _bound(self) -> None:
        extra = len(self.texts) - self.capacity
        del self.stamps[:extra], self.texts[:extra]
        self.lost += extra

    def take(self, count: int) -> tuple[list[int], list[str]]:
        """The oldest `count` lines, removed."""
        if count >= len(self.texts):
            out = (self.stamps, self.texts)
            self.stamps, self.texts = [], []
            return out
        out = (self.stamps[:count], self.texts[:count])
        del self.stamps[:count], self.texts[:count]
        return out


def take_slice(inboxes: dict[int, Inbox], limit: int) -> dict[int, tuple[list[int], list[str]]]:
    """At most about `limit` lines from the inboxes, the same stretch of time from each (so a backlog
    does not turn into lines that arrive late for the merged view)."""
    waiting = {rank: inbox for rank, inbox in inboxes.items() if inbox}
    if not waiting:
        return {}
    share = max(1, limit // len(waiting))
    cut = min((inbox.stamps[share - 1] for inbox in waiting.values() if len(inbox) > share), default=None)
    out = {}
    for rank, inbox in waiting.items():
        count = len(inbox) if cut is None else min(bisect_right(inbox.stamps, cut), limit)
        if count:
            out[rank] = inbox.take(count)
    return out
