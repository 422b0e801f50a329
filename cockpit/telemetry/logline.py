"""One container log line: `LogLine`, docker's RFC3339Nano timestamps parsed and formatted, a
`docker logs -t` line parsed (`line_from_raw`, control characters neutralised), and lines formatted for
the headless `logs` output and saved to a file (`save_lines`, atomically via `cockpit.files`).
"""

from __future__ import annotations

import calendar
import os
import time
from collections.abc import Iterable
from datetime import datetime
from typing import NamedTuple

from cockpit.files import AtomicFile
from cockpit.safetext import neutralise


class LogLine(NamedTuple):
    """One container log line. The merged view orders by (timestamp, rank), a rank's lines with the
    same timestamp in arrival order."""

    ts: int      # ns since the epoch (UTC)
    rank: int
    text: str    # neutralised: no control characters left



# ---- timestamps ----------------------------------------------------------------------------------

_SECONDS_CACHE: dict[str, int] = {}


def parse_timestamp(stamp: str) -> int | None:
    """RFC3339 / RFC3339Nano (`2026-11-29T22:59:17.123456789Z`, or with an offset) to ns since the epoch."""
    head = stamp[:19]
    secs = _SECONDS_CACHE.get(head)
    if secs is None:
        if len(head) < 19 or head[4] != "-" or head[10] != "T":
            return None
        try:
            secs = calendar.timegm(time.strptime(head, "%Y-%m-%dT%H:%M:%S"))
        except ValueError:
            return None
        if len(_SECONDS_CACHE) > 4096:
            _SECONDS_CACHE.clear()
        _SECONDS_CACHE[head] = secs
    rest = stamp[19:]
    if rest[:1] == "." and rest[-1:] == "Z" and rest[1:-1].isascii() and rest[1:-1].isdigit():  # docker's
        return secs * 1_000_000_000 + int((rest[1:-1] + "00000000")[:9])
    frac = ""
    if rest[:1] == ".":
        end = 1
        while end < len(rest) and rest[end] in "0123456789":
            end += 1
        frac, rest = rest[1:end], rest[end:]
    if rest != "Z":
        try:
            offset = datetime.fromisoformat("2000-01-01T00:00:00" + rest).utcoffset()
        except ValueError:
            return None
        if offset is None:
            return None
        secs -= int(offset.total_seconds())
    return secs * 1_000_000_000 + (int((frac + "000000000")[:9]) if frac else 0)


def format_timestamp(ns: int) -> str:
    """Docker's fixed-width RFC3339Nano in UTC (what `--since` and saved files use)."""
    secs, frac = divmod(ns, 1_000_000_000)
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(secs)) + f".{frac:09d}Z"


def short_timestamp(ns: int) -> str:
    """`HH:MM:SS.ffffff` UTC, for the timestamp column."""
    secs, frac = divmod(ns, 1_000_000_000)
    return time.strftime("%H:%M:%S", time.gmtime(secs)) + f".{frac // 1000:06d}"


def parse_stamped(raw: str) -> tuple[int, str] | None:
    """Split a `docker logs -t` line into (ns, raw text); None if it carries no timestamp."""
    stamp, sep, text = raw.partition(" ")
    if not sep and not stamp.endswith("Z"):
        return None
    ts = parse_timestamp(stamp)
    return None if ts is None else (ts, text)



# ---- output --------------------------------------------------------------------------------------

def format_line(line: LogLine, *, rank: bool = True) -> str:
    """`RANK  TIMESTAMP  TEXT` (the headless `logs` output and the saved-file format)."""
    stamp = format_timestamp(line.ts)
    return f"{line.rank}  {stamp}  {line.text}" if rank else f"{stamp}  {line.text}"


def line_from_raw(rank: int, raw: str) -> LogLine | None:
    """A `docker logs -t` output line as a LogLine (None if it has no timestamp prefix)."""
    if raw[29:31] == "Z " and raw[19:20] == ".":  # docker's fixed-width stamp: the fast path
        secs = _SECONDS_CACHE.get(raw[:19])
        frac = raw[20:29]
        if secs is not None and frac.isascii() and frac.isdigit():   # isdigit alone takes superscripts
            text = raw[31:]
            return LogLine(secs * 1_000_000_000 + int(frac), rank,
                           text if text.isprintable() else neutralise(text))
    parsed = parse_stamped(raw)
    return None if parsed is None else LogLine(parsed[0], rank, neutralise(parsed[1]))


SAVE_BATCH = 1024   # lines encoded and written at a time


def save_lines(path: str | os.PathLike[str], lines: Iterable[LogLine | None], *, overwrite: bool = False,
               rank: bool = True) -> int:
    """Write lines to `path` atomically (`cockpit.files.AtomicFile`: temp file beside it, then link/rename).

    Without `overwrite` an existing file is never replaced (FileExistsError), even if it appears while
    writing. Created 0o666 less the umask, as `docker logs > FILE` would be. Returns the number of lines
    written; `None` entries (filter separators) are written as `--`.
    """
    count = 0
    batch: list[str] = []
    with AtomicFile(os.path.abspath(os.fspath(path)), overwrite=overwrite) as out:
        for line in lines:
            if line is None:
                batch.append("--\n")
            else:
                batch.append(format_line(line, rank=rank) + "\n")
                count += 1
            if len(batch) == SAVE_BATCH:
                out.write("".join(batch))
                batch.clear()
        out.write("".join(batch))
        out.commit()
    return count
