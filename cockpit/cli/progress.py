"""A live block of progress lines for headless commands on a terminal (`launch`, `setup`).

One line per key (a rank, the API) is rewritten in place with ANSI cursor movement; lines that matter
(failures, verdicts, warnings, the summary) are printed permanently above the block. Every live line is
neutralised and cut to the terminal width, so each takes exactly one row and the cursor arithmetic holds.
After every write the cursor stands below the block (a Ctrl-C leaves the screen tidy).

`live_output(stream, verbose=…, json=…)` says whether to use one: only on a TTY, never with `--json`
or `-v/--verbose` (those print every line, as before).
"""

from __future__ import annotations

import shutil
import unicodedata
from collections.abc import Callable
from typing import TextIO

from cockpit.safetext import neutralise

CLEAR_LINE = "\x1b[2K"
CLEAR_BELOW = "\x1b[J"
ELLIPSIS = "…"

Key = int | str   # a rank, or a name such as "api" (after the ranks)


def _up(n: int) -> str:
    """Cursor to the start of the line `n` rows up (none: the cursor is already at a line start)."""
    return f"\x1b[{n}F" if n else ""


def cell_width(ch: str) -> int:
    if unicodedata.combining(ch):
        return 0
    return 2 if unicodedata.east_asian_width(ch) in ("W", "F") else 1


def fit(text: str, width: int) -> str:
    """`text` cut to `width` terminal cells (with a trailing … when cut)."""
    if width <= 0:
        return ""
    if sum(cell_width(c) for c in text) <= width:
        return text
    out, used = [], 0
    for ch in text:
        w = cell_width(ch)
        if used + w > width - 1:
            break
        out.append(ch)
        used += w
    return "".join(out) + ELLIPSIS


def live_output(stream: TextIO, *, verbose: bool = False, json: bool = False) -> bool:
    """A live block on `stream`: a terminal, and neither `--json` nor `--verbose`."""
    if verbose or json:
        return False
    try:
        return stream.isatty()
    except (AttributeError, ValueError):   # a closed or odd stream
        return False


def terminal_width() -> int:
    return shutil.get_terminal_size((80, 24)).columns


def _order(key: Key) -> tuple[int, int, str]:
    return (0, key, "") if isinstance(key, int) else (1, 0, key)


class LiveBlock:
    """The live lines, in key order, below everything printed permanently."""

    def __init__(self, stream: TextIO, width: Callable[[], int] = terminal_width):
        self.stream = stream
        self.width = width
        self.lines: dict[Key, str] = {}
        self._drawn = 0   # rows of the block on screen, just above the cursor

    def _block(self) -> str:
        # one cell short of the width: a line that fills the last column would wrap on some terminals
        width = max(1, self.width() - 1)
        keys = sorted(self.lines, key=_order)
        return "".join(f"{CLEAR_LINE}{fit(neutralise(self.lines[k]), width)}\n" for k in keys)

    def _write(self, above: str = "") -> None:
        body = self._block()
        self.stream.write(_up(self._drawn) + (CLEAR_BELOW + above if above else "") + body
                          + ("" if above or len(self.lines) >= self._drawn else CLEAR_BELOW))
        self.stream.flush()
        self._drawn = len(self.lines)

    def update(self, key: Key, text: str) -> None:
        """Set the live line of `key` (a new key adds a line) and redraw."""
        if self.lines.get(key) == text:
            return
        self.lines[key] = text
        self._write()

    def remove(self, key: Key) -> None:
        if self.lines.pop(key, None) is not None:
            self._write()

    def print(self, text: str) -> None:
        """Permanent line(s) above the block (the caller neutralises host text in them)."""
        self._write(text if text.endswith("\n") else text + "\n")

    def close(self) -> None:
        """Leave the block on screen as it is, the cursor below it; later output goes after it."""
        self._drawn = 0
        self.lines.clear()
