"""Filtering and highlighting of log lines: regex (inverse with `!`), context lines, first error.

- `LineFilter.parse("NCCL|Traceback")` keeps matching lines, `LineFilter.parse("!INFO")` the others;
  smart case: a pattern without capitals ignores case.
- `FilteredView` holds the filtered lines of a source with N context lines around each match and a
  separator between groups (like `grep -C N`); it is built once, then fed only the new lines.
- `Signatures` classifies a line as a failure or a phase line. It uses the recipe's patterns
  (`cockpit.recipe.phases`) when that module is there, else the DOMAIN §2 list below.
"""

from __future__ import annotations

import importlib
import re
from collections import deque
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

from cockpit.telemetry.logs import LogLine

MATCH, CONTEXT, SEPARATOR = 1, 2, 3

# DOMAIN §2: failure signatures and the progress lines of a launch (the fallback list).
FAILURE_PATTERNS: tuple[str, ...] = (
    r"NCCL WARN", r"Traceback \(most recent call last\)", r"\bTraceback\b", r"out of memory",
    r"\bKilled\b", r"ibv_modify_qp failed", r"NET/IB: Got completion from peer", r"unhandled system error",
    r"wrap_ibv_reg_mr_iova2", r"No common block size", r"TCPStore recvValue failed",
    r"Too many open files", r"Engine core initialization failed", r"\bERROR\b", r"CUDA error",
)
PHASE_PATTERNS: tuple[str, ...] = (
    r"DP group leader", r"world_size=\d+", r"Engram DISK mode", r"Loading weights took",
    r"Model loading took", r"GPU KV cache size", r"Available KV cache", r"Graph capturing finished",
    r"Application startup complete", r"Uvicorn running on", r"Loading safetensors checkpoint shards",
    r"Capturing CUDA graph",
)


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
        while self.lines and (self.lines[0] is None or not holds(self.lines[0])):  # type: ignore[arg-type]
            self.lines.popleft()
            self.kinds.popleft()
            n += 1
        return n

    def __len__(self) -> int:
        return len(self.lines)


def _union(patterns: Sequence[str]) -> re.Pattern[str]:
    return re.compile("|".join(f"(?:{p})" for p in patterns))


def _scoped(pattern: re.Pattern[str]) -> str:
    """A compiled pattern as a union member that keeps its own flags."""
    flags = "".join(f for f, bit in (("i", re.IGNORECASE), ("s", re.DOTALL), ("m", re.MULTILINE))
                    if pattern.flags & bit)
    return f"(?{flags}:{pattern.pattern})" if flags else f"(?:{pattern.pattern})"


class Signatures:
    """Failure and phase lines. With the recipe's rules (`cockpit.recipe.phases`) a line is a failure
    when `match_failure` says so (benign look-alikes excluded) and a phase line when `match_phase` does;
    a single union regex prefilters, so scanning a long buffer stays cheap."""

    def __init__(self, failures: Sequence[str] = FAILURE_PATTERNS, phases: Sequence[str] = PHASE_PATTERNS,
                 *, match_failure: Callable[[str], object] | None = None,
                 match_phase: Callable[[str, int], object] | None = None):
        self.failure = _union(failures)
        self.phase = _union(phases)
        self._match_failure = match_failure
        self._match_phase = match_phase

    @classmethod
    def load(cls) -> Signatures:
        """The recipe's rules if `cockpit.recipe.phases` is there, else the built-in DOMAIN §2 list."""
        try:
            mod = importlib.import_module("cockpit.recipe.phases")
            failure_rules = mod.FAILURE_RULES
            phase_rules = mod.PHASE_RULES
            match_failure, match_phase = mod.match_failure, mod.match_phase
        except (ImportError, AttributeError):
            return cls()
        # rules anchored at `^` apply to the message without vLLM's prefix: prefilter them generically
        failures = [_scoped(r.pattern) for r in failure_rules if not r.pattern.pattern.startswith("^")]
        failures.append(r"[A-Z]\w*(?:Error|Exception): ")
        phases = [_scoped(r.pattern) for r in phase_rules]
        return cls(failures, phases, match_failure=match_failure, match_phase=match_phase)

    def is_failure(self, text: str) -> bool:
        if self.failure.search(text) is None:
            return False
        return self._match_failure is None or self._match_failure(text) is not None

    def is_phase(self, text: str, rank: int = 0) -> bool:
        if self._match_phase is not None:
            return self._match_phase(text, rank) is not None
        return self.phase.search(text) is not None

    def classify(self, text: str, rank: int = 0) -> str | None:
        """"failure", "phase" or None."""
        if self.is_failure(text):
            return "failure"
        if self.is_phase(text, rank):
            return "phase"
        return None

    def first_failure(self, lines: Sequence[LogLine | None], start: int = 0) -> int | None:
        """Index of the first failure line at or after `start`, or None."""
        search = self.failure.search
        rest = iter(lines) if start <= 0 else (lines[i] for i in range(start, len(lines)))
        for i, line in enumerate(rest, max(start, 0)):
            if line is not None and search(line.text) and self.is_failure(line.text):
                return i
        return None
