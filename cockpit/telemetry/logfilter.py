"""Filtering and highlighting of log lines: regex (inverse with `!`), context lines, first error.

- `LineFilter.parse("NCCL|Traceback")` keeps matching lines, `LineFilter.parse("!INFO")` the others;
  smart case: a pattern without capitals ignores case.
- `FilteredView` holds the filtered lines of a source with N context lines around each match and a
  separator between groups (like `grep -C N`); it is built once, then fed only the new lines.
- `is_probe_line` tells the engine's access-log lines of the cockpit's own looks (`PROBE_QUERY`).
- `Signatures` classifies a line as a failure or a phase line by the rules its caller gives (the TUI
  gives the recipe's: telemetry sits below `cockpit.recipe` and imports nothing of it).
"""

from __future__ import annotations

import re
from collections import deque
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

from cockpit.constants import PROBE_QUERY
from cockpit.telemetry.logline import LogLine

MATCH, CONTEXT, SEPARATOR = 1, 2, 3
# in uvicorn's access line: `INFO:     127.0.0.1:44562 - "GET /health?r37-cockpit=probe HTTP/1.1" 200 OK`
_PROBE_REQUEST = f"?{PROBE_QUERY} HTTP/"


def is_probe_line(text: str) -> bool:
    """An access-log line of one of the cockpit's own looks at the engine (`/health`, `/v1/models`,
    `/metrics` through the tunnel ask with `PROBE_QUERY`), not an operator's request."""
    return _PROBE_REQUEST in text


class FilterError(ValueError):
    """A filter that does not compile; the message says why."""


@dataclass(frozen=True)
class LineFilter:
    """A regex that keeps matching lines, or (inverse) the lines that do not match."""

    text: str
    regex: re.Pattern[str]
    inverse: bool = False

    @classmethod
    def parse(cls, text: str) -> LineFilter:
        inverse = text.startswith("!")
        pattern = text[1:] if inverse else text
        if not pattern:
            raise FilterError("empty pattern")
        flags = 0 if any(c.isupper() for c in pattern) else re.IGNORECASE
        try:
            regex = re.compile(pattern, flags)
        except re.error as exc:
            raise FilterError(f"bad regex {pattern!r}: {exc}") from None
        return cls(text, regex, inverse)

    def keeps(self, text: str) -> bool:
        return (self.regex.search(text) is None) if self.inverse else (self.regex.search(text) is not None)


class StreamFilter:
    """`grep -C N` over a stream of lines, fed in order: yields (line, kind) entries."""

    def __init__(self, flt: LineFilter, context: int = 0):
        self.flt = flt
        self.context = max(0, context)
        self._before: deque[LogLine] = deque(maxlen=self.context or 1)
        self._after = 0
        self._emitted_any = False
        self._gap = False  # lines were skipped since the last emitted one
        self.matches = 0

    def feed(self, lines: Iterable[LogLine]) -> list[tuple[LogLine | None, int]]:
        out: list[tuple[LogLine | None, int]] = []
        keeps, ctx, before = self.flt.keeps, self.context, self._before
        for line in lines:
            if keeps(line.text):
                self.matches += 1
                if ctx and before:
                    if self._gap and self._emitted_any:
                        out.append((None, SEPARATOR))
                    out.extend((b, CONTEXT) for b in before)
                    before.clear()
                elif self._gap and self._emitted_any and ctx:
                    out.append((None, SEPARATOR))
                out.append((line, MATCH))
                self._emitted_any, self._gap, self._after = True, False, ctx
            elif self._after > 0:
                out.append((line, CONTEXT))
                self._after -= 1
            elif ctx:
                if len(before) == before.maxlen:
                    self._gap = True
                before.append(line)
        return out


class FilteredView:
    """The entries a filter keeps from a source; rebuilt on demand, then fed new lines."""

    def __init__(self, flt: LineFilter, context: int = 0):
        self.flt = flt
        self.context = context
        self.lines: deque[LogLine | None] = deque()
        self.kinds: deque[int] = deque()
        self._stream = StreamFilter(flt, context)

    @property
    def matches(self) -> int:
        return self._stream.matches

    def rebuild(self, source: Iterable[LogLine]) -> None:
        self.lines.clear()
        self.kinds.clear()
        self._stream = StreamFilter(self.flt, self.context)
        self.feed(source)

    def feed(self, lines: Iterable[LogLine]) -> int:
        entries = self._stream.feed(lines)
        for line, kind in entries:
            self.lines.append(line)
            self.kinds.append(kind)
        return len(entries)

    def trim(self, holds: Callable[[LogLine], bool]) -> int:
        """Drop leading entries whose line left the source (and separators before them)."""
        n = 0
        while self.lines:
            first = self.lines[0]
            if first is not None and holds(first):
                break
            self.lines.popleft()
            self.kinds.popleft()
            n += 1
        return n

    def __len__(self) -> int:
        return len(self.lines)


class Signatures:
    """Which log lines are failures and which announce a launch phase, by the caller's rules.

    Telemetry knows no signatures of its own: the TUI passes the recipe's (`cockpit.recipe.phases`:
    `match_failure(text)`, `match_phase(text, rank)`, each already prefiltered by its rules' required
    literals, so scanning a long buffer stays cheap). A rule's answer counts when it is not None."""

    def __init__(self, match_failure: Callable[[str], object], match_phase: Callable[[str, int], object]):
        self._match_failure = match_failure
        self._match_phase = match_phase

    def is_failure(self, text: str) -> bool:
        return self._match_failure(text) is not None

    def is_phase(self, text: str, rank: int = 0) -> bool:
        return self._match_phase(text, rank) is not None

    def classify(self, text: str, rank: int = 0) -> str | None:
        """"failure", "phase" or None."""
        if self.is_failure(text):
            return "failure"
        if self.is_phase(text, rank):
            return "phase"
        return None

    def first_failure(self, lines: Sequence[LogLine | None], start: int = 0) -> int | None:
        """Index of the first failure line at or after `start`, or None."""
        match = self._match_failure
        rest = iter(lines) if start <= 0 else (lines[i] for i in range(start, len(lines)))
        for i, line in enumerate(rest, max(start, 0)):
            if line is not None and match(line.text) is not None:
                return i
        return None
