"""Container logs: per-rank followers of `docker logs -f -t` and a bounded, time-ordered store.

- `follow(host, ...)` runs `docker logs -t [-f] [--since T] [--tail N] CONTAINER` on one long-lived SSH
  channel and yields `LogLine`s (RFC3339Nano prefix parsed to ns, control characters neutralised) and
  `FollowEvent`s (following, lost, resumed, ended, error). After a lost host it waits for the reconnect
  and resumes with `--since` the last timestamp seen, dropping the lines it already yielded.
- `LogStore` keeps a bounded ring buffer per rank (oldest lines dropped, counted) and a merged view of
  all ranks ordered by timestamp, kept by merging each batch into the tail (no re-sort).
"""

from __future__ import annotations

import asyncio
import calendar
import contextlib
import os
import re
import tempfile
import time
from collections import Counter, deque
from collections.abc import AsyncIterator, Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime
from itertools import chain
from operator import le
from typing import NamedTuple, Protocol

from cockpit.constants import CONTAINER_NAME
from cockpit.hosts.shell import ShellCommand, command
from cockpit.hosts.state import HostUnavailable

DEFAULT_CAPACITY = 200_000
NO_CONTAINER = "No such container"
RETRY_START = 0.5   # s before following again after a lost host, doubling up to RETRY_MAX
RETRY_MAX = 5.0


class LogLine(NamedTuple):
    """One container log line. Tuples order by (timestamp, rank, text): the merged order."""

    ts: int      # ns since the epoch (UTC)
    rank: int
    text: str    # neutralised: no control characters left


# ---- text ----------------------------------------------------------------------------------------

_SGR = re.compile(r"\x1b\[[0-9;:]*m")
_CTRL = re.compile(r"[\x00-\x08\x0a-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069]")
_VISIBLE = {c: chr(0x2400 + c) for c in range(0x20)}
_VISIBLE[0x7F] = "\u2421"
_VISIBLE.update({c: f"\\x{c:02x}" for c in range(0x80, 0xA0)})
_VISIBLE.update({c: f"\\u{c:04x}" for c in (0x2028, 0x2029, *range(0x202A, 0x202F), *range(0x2066, 0x206A))})
_VISIBLE.pop(0x09)


def neutralise(text: str) -> str:
    """Host text made safe for a terminal: colour codes dropped, other controls shown as symbols.

    A trailing CR (CRLF output) is removed, tabs become spaces, ESC/CR/BEL/… become their visible
    Unicode control pictures (␛ ␍ ␇), C1 controls and bidi overrides become `\\xNN` / `\\uNNNN`.
    """
    if text.isprintable():
        return text
    if text.endswith("\r"):
        text = text.rstrip("\r")
    if "\t" in text:
        text = text.expandtabs(8)
    if _CTRL.search(text) is None:
        return text
    text = _SGR.sub("", text)
    return text.translate(_VISIBLE)


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
    if rest[:1] == "." and rest[-1:] == "Z" and rest[1:-1].isdigit():  # docker's own form
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


# ---- the store -----------------------------------------------------------------------------------

class RankBuffer:
    """A rank's ring buffer: the newest `capacity` lines in arrival order, with a dropped count."""

    __slots__ = ("last_ts", "lines", "rank", "received")

    def __init__(self, rank: int, capacity: int = DEFAULT_CAPACITY):
        if capacity < 1:
            raise ValueError("capacity must be at least 1")
        self.rank = rank
        self.lines: deque[LogLine] = deque(maxlen=capacity)
        self.received = 0
        self.last_ts = 0

    @property
    def capacity(self) -> int:
        return self.lines.maxlen or 0

    @property
    def dropped(self) -> int:
        return self.received - len(self.lines)

    def add(self, lines: Iterable[LogLine]) -> list[LogLine]:
        """Append; a timestamp that goes back (a clock step) is clamped so the buffer stays ordered."""
        out = lines if isinstance(lines, list) else list(lines)
        if not out:
            return out
        stamps = [line.ts for line in out]
        if stamps[0] < self.last_ts or not all(map(le, stamps, stamps[1:])):
            out, last = [], self.last_ts
            for line in lines:
                if line.ts < last:
                    line = LogLine(last, line.rank, line.text)
                last = line.ts
                out.append(line)
        self.last_ts = out[-1].ts
        self.lines.extend(out)
        self.received += len(out)
        return out

    def holds(self, line: LogLine) -> bool:
        """Whether `line` (once added here) is still in the buffer, i.e. not dropped as oldest."""
        return bool(self.lines) and line >= self.lines[0]


class LogStore:
    """Per-rank ring buffers and the merged view ordered by (timestamp, rank)."""

    def __init__(self, ranks: Iterable[int], capacity: int = DEFAULT_CAPACITY):
        self.capacity = capacity
        self.ranks: dict[int, RankBuffer] = {r: RankBuffer(r, capacity) for r in ranks}
        self.merged: deque[LogLine] = deque()
        self.late_lines = 0  # lines that arrived after newer lines of other ranks (merged into the tail)

    def rank(self, rank: int) -> RankBuffer:
        if rank not in self.ranks:
            self.ranks[rank] = RankBuffer(rank, self.capacity)
        return self.ranks[rank]

    @property
    def received(self) -> int:
        return sum(b.received for b in self.ranks.values())

    @property
    def dropped(self) -> int:
        return sum(b.dropped for b in self.ranks.values())

    @property
    def live(self) -> int:
        return sum(len(b.lines) for b in self.ranks.values())

    def add(self, batches: Mapping[int, Iterable[LogLine]], anchor: int | None = None) -> AddResult:
        """Add each rank's new lines (in that rank's order); merge them into the merged view.

        `anchor` is an index into the merged view (e.g. the top line of a paused screen); the result
        says how far that line moved, so a paused view can stay on the same lines.
        """
        fresh = [self.rank(r).add(lines) for r, lines in batches.items()]
        fresh = [f for f in fresh if f]
        if not fresh:
            return AddResult(0, 0, 0, [])
        batch = fresh[0] if len(fresh) == 1 else sorted(chain.from_iterable(fresh))  # timsort: a run merge
        merged = self.merged
        start = len(merged)
        tail: list[LogLine] = []
        first = batch[0]
        while merged and merged[-1] > first:
            tail.append(merged.pop())
        shift = 0
        if tail:
            tail.reverse()
            self.late_lines += sum(1 for line in batch if line < tail[-1])
            start = len(merged)
            if anchor is not None and anchor >= start and anchor - start < len(tail):
                shift += _count_below(batch, tail[anchor - start])
            merged.extend(sorted(tail + batch))
        else:
            merged.extend(batch)
        removed, removed_before = self._trim(anchor + shift if anchor is not None else None)
        return AddResult(len(batch), shift - removed_before, removed, batch,
                         moved_from=start if tail else None)

    def _trim(self, anchor: int | None) -> tuple[int, int]:
        """Drop merged entries whose line was dropped from its rank's buffer. (removed, before anchor)"""
        merged, ranks = self.merged, self.ranks
        removed = 0
        while merged and not ranks[merged[0].rank].holds(merged[0]):
            merged.popleft()
            removed += 1
        before = min(removed, anchor) if anchor is not None else 0
        live = self.live
        if len(merged) - live > max(1024, live >> 3):
            rest = anchor - before if anchor is not None else -1
            kept: deque[LogLine] = deque()
            for i, line in enumerate(merged):
                if ranks[line.rank].holds(line):
                    kept.append(line)
                else:
                    removed += 1
                    if i < rest:
                        before += 1
            self.merged = kept
        return removed, before


@dataclass(frozen=True, slots=True)
class AddResult:
    added: int
    anchor_shift: int      # how far the anchor line moved (+ lines inserted above, - lines removed above)
    removed: int           # merged entries removed (their lines were dropped from the rank buffers)
    lines: list[LogLine]   # the new lines, in merged order
    moved_from: int | None = None  # a late line was merged in: entries from this index on moved


def _count_below(batch: list[LogLine], line: LogLine) -> int:
    lo, hi = 0, len(batch)
    while lo < hi:
        mid = (lo + hi) // 2
        if batch[mid] < line:
            lo = mid + 1
        else:
            hi = mid
    return lo


# ---- following -----------------------------------------------------------------------------------

@dataclass(frozen=True, slots=True)
class FollowEvent:
    """A change in one rank's follower: following, lost, resumed, waiting, ended, error."""

    rank: int
    state: str
    detail: str = ""
    at: float = 0.0


class Streamer(Protocol):
    """What `follow` needs of a host (`cockpit.hosts.Host` has it)."""

    rank: int

    def stream(self, cmd: ShellCommand) -> AsyncIterator[str]: ...

    async def wait_connected(self, timeout: float | None = None) -> bool: ...


def logs_command(container: str = CONTAINER_NAME, *, follow: bool = True, since: str | None = None,
                 tail: int | None = None) -> ShellCommand:
    """`docker logs -t [-f] [--since T] [--tail N] CONTAINER 2>&1` (both streams on one channel)."""
    argv = ["docker", "logs", "-t"]
    if follow:
        argv.append("-f")
    if since:
        argv += ["--since", since]
    if tail is not None:
        argv += ["--tail", str(int(tail))]
    argv.append(container)
    return command(argv, merge_stderr=True)


class ResumePoint:
    """The last timestamp yielded and the texts seen at it, to drop what `--since` sends again."""

    __slots__ = ("texts", "ts")

    def __init__(self) -> None:
        self.ts = 0
        self.texts: Counter[str] = Counter()

    def note(self, ts: int, text: str) -> None:
        if ts != self.ts:
            self.ts = ts
            self.texts.clear()
        self.texts[text] += 1

    def since(self) -> str | None:
        return format_timestamp(self.ts) if self.ts else None

    def filter(self) -> _Replay:
        return _Replay(self.ts, Counter(self.texts))


class _Replay:
    """Drops, after a resume, lines older than the resume point and those already seen at it."""

    __slots__ = ("done", "seen", "ts")

    def __init__(self, ts: int, seen: Counter[str]):
        self.ts, self.seen, self.done = ts, seen, ts == 0

    def duplicate(self, ts: int, text: str) -> bool:
        if self.done:
            return False
        if ts < self.ts:
            return True
        if ts == self.ts and self.seen[text] > 0:
            self.seen[text] -= 1
            return True
        self.done = ts > self.ts
        return False


async def follow(host: Streamer, container: str = CONTAINER_NAME, *, follow: bool = True,
                 since: str | None = None, tail: int | None = None, resume: bool = True,
                 rejoin: float | None = None, reconnect_timeout: float | None = None,
                 ) -> AsyncIterator[LogLine | FollowEvent]:
    """One rank's container log as `LogLine`s, with `FollowEvent`s when its state changes.

    Ends when the container stops (`ended`) or does not exist (`error`), unless `rejoin` is set: then
    it looks again every `rejoin` seconds for a (re)started container, continuing after the last line.
    A lost host yields `lost`, then (with `resume`) waits for the reconnect and yields `resumed`.
    """
    rank = host.rank
    point = ResumePoint()
    first = True
    announced = ""
    retry_delay = RETRY_START
    while True:
        cmd = logs_command(container, follow=follow,
                           since=point.since() or since, tail=tail if first else None)
        replay = point.filter()
        got_lines = False
        problem = ""
        try:
            stream = host.stream(cmd)
            try:
                async for raw in stream:
                    parsed = parse_stamped(raw)
                    if parsed is None:
                        problem = problem or neutralise(raw).strip()
                        continue
                    ts, text = parsed
                    if replay.duplicate(ts, text):
                        continue
                    if not got_lines and announced not in ("following", "resumed"):
                        if announced == "lost":
                            announced = "resumed"
                            yield FollowEvent(rank, "resumed", point.since() or "", time.time())
                        else:
                            announced = "following"
                            yield FollowEvent(rank, "following", container, time.time())
                    retry_delay = RETRY_START
                    got_lines = True
                    point.note(ts, text)
                    yield LogLine(ts, rank, neutralise(text))
            finally:
                await stream.aclose()  # type: ignore[attr-defined]
        except HostUnavailable as exc:
            was_following = announced in ("following", "resumed")
            if announced not in ("lost", "waiting:host"):
                announced = "lost" if was_following else "waiting:host"
                yield FollowEvent(rank, "lost" if was_following else "waiting",
                                  str(exc) if was_following else "host not connected", time.time())
            if not resume:
                return
            # the host may not have noticed the loss yet (its keepalive is slower than a dead channel):
            # back off before asking again, so a retry never spins
            await asyncio.sleep(retry_delay)
            retry_delay = min(retry_delay * 2, RETRY_MAX)
            if not await host.wait_connected(reconnect_timeout):
                yield FollowEvent(rank, "error", "host did not come back", time.time())
                return
            first = first and point.ts == 0
            continue
        first = False
        if (problem and not got_lines and point.ts == 0) or NO_CONTAINER in problem:
            state, detail = "error", problem
        else:
            state, detail = "ended", "container stopped" if follow else "end of log"
        if rejoin is None or not follow:
            yield FollowEvent(rank, state, detail, time.time())
            return
        if announced != ("waiting:" + detail):
            announced = "waiting:" + detail
            yield FollowEvent(rank, "waiting", detail, time.time())
        await asyncio.sleep(rejoin)


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
        if secs is not None and frac.isdigit():
            text = raw[31:]
            return LogLine(secs * 1_000_000_000 + int(frac), rank,
                           text if text.isprintable() else neutralise(text))
    parsed = parse_stamped(raw)
    return None if parsed is None else LogLine(parsed[0], rank, neutralise(parsed[1]))


def save_lines(path: str | os.PathLike[str], lines: Iterable[LogLine | None], *, overwrite: bool = False,
               rank: bool = True) -> int:
    """Write lines to `path` atomically (temp file in the same directory, then link/rename).

    Without `overwrite` an existing file is never replaced (FileExistsError), even if it appears while
    writing. Returns the number of lines written; `None` entries (filter separators) are written as `--`.
    """
    target = os.path.abspath(os.fspath(path))
    if not overwrite and os.path.lexists(target):
        raise FileExistsError(target)
    directory = os.path.dirname(target)
    fd, tmp = tempfile.mkstemp(prefix=".r37-logs-", suffix=".tmp", dir=directory)
    count = 0
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="\n") as f:
            for line in lines:
                f.write("--\n" if line is None else format_line(line, rank=rank) + "\n")
                count += line is not None
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, 0o644)
        if overwrite:
            os.replace(tmp, target)
        else:
            os.link(tmp, target)  # fails if the name appeared meanwhile: never clobbers
            os.unlink(tmp)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    return count
