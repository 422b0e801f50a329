"""The command log on disk: one JSONL file per cockpit session, written as commands finish, read back by
`r37-cockpit history`.

A session file (`locations.sessions_dir()/<id>.jsonl`) starts with a header line (``"kind": "session"``:
id, start time, pid, command, its arguments, cluster, config path, version), then one ``"kind": "cmd"``
line per command as it completes (time, rank, line, exit, duration, note, origin). Lines are appended
and flushed one at a time, so a crash loses nothing already run; a session keeps at most `MAX_RECORDS`
commands and a command line at most `MAX_LINE` characters (both marked when cut). Every line passes
through `redact` first. A file that cannot be written is a warning, never an error: the commands run all
the same.

Audit: a session that changed a host (setup, launch, stop, relaunch, ssh — the list of
`recipe.readonly`) is a `<id>.host.jsonl` file, kept for the retention period (`[recorder]
retention_days`, by the file's last write) whatever else runs; read-only sessions (`status` from cron
every minute) are bounded apart, the newest `KEEP_SESSIONS` of them kept, so they never push a launch
out. A headless command knows at its start (its file is named so from the first line); the TUI marks
its session when the operator confirms such an action (`mark_host_change`: the file is renamed and a
`change` line says what).
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import re
import shlex
import sys
import time
from collections.abc import Callable, Collection, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

from cockpit.files import NotReadable, loads_bounded, open_regular
from cockpit.locations import sessions_dir
from cockpit.safetext import clip

if TYPE_CHECKING:
    from cockpit.hosts import CommandRecord, Fleet

FORMAT = 1
MAX_RECORDS = 50_000     # command lines per session file; then one note says the rest was not logged
MAX_LINE = 8_000         # characters of one command line kept
KEEP_SESSIONS = 200      # read-only session files kept; older ones are removed (oldest first) at a start
KEEP_DAYS = 30           # host-changing sessions are kept this long (default of [recorder] retention_days)
MAX_HOST_SESSIONS = 20_000   # and never more than this many (a bound, not a rule: oldest first)
HOST_MARK = ".host"      # `<id>.host.jsonl`: a session that changed a host
READ_LINE_MAX = 1 << 20  # bytes of one line read back (longer: cut, and skipped as unreadable)
READ_FILE_MAX = 64 << 20  # bytes of one session file read back (the rest: skipped, with a note)
SUFFIX = ".jsonl"
FAILED_NOTES = ("timeout", "lost")

_SECRETS: tuple[tuple[re.Pattern[str], str], ...] = (
    (re.compile(r"\bhf_[A-Za-z0-9]{6,}"), "hf_***"),
    (re.compile(r"(?i)\b(authorization\s*:\s*(?:bearer|basic|token)\s+)[^\s'\"]+"), r"\1***"),
    (re.compile(r"(?i)\b(bearer\s+)[A-Za-z0-9._~+/=-]{8,}"), r"\1***"),
    (re.compile(r"(?i)\b(x-api-key\s*:\s*)[^\s'\"]+"), r"\1***"),
    (re.compile(r"(?i)\b([A-Z0-9_]*(?:TOKEN|KEY|SECRET|PASSWORD)=)(\"[^\"]*\"|'[^']*'|[^\s'\";&|]+)"),
     r"\1***"),
    (re.compile(r"(?i)(--[a-z0-9-]*(?:token|key|secret|password)(?:=|\s+))(\"[^\"]*\"|'[^']*'|[^\s'\"]+)"),
     r"\1***"),
    (re.compile(r"\bsk-[A-Za-z0-9_-]{16,}"), "sk-***"),
)


def redact(text: str) -> str:
    """`text` with anything that looks like a secret replaced by ***: HF tokens (`hf_…`), bearer and API
    key headers, `*_TOKEN=` / `*_KEY=` / `*_SECRET=` / `*_PASSWORD=` values, `--…-token VALUE` options,
    `sk-…` keys. The cockpit sends secrets over stdin only; this is the defence if one ever slips in."""
    for pattern, replacement in _SECRETS:
        text = pattern.sub(replacement, text)
    return text


def failed(exit_status: int | None, note: str) -> bool:
    return (exit_status is not None and exit_status != 0) or note in FAILED_NOTES


def outcome_label(exit_status: int | None, note: str) -> str:
    """What an exit column shows: the exit status, or why there is none (timeout, lost, stream)."""
    if note in (*FAILED_NOTES, "stream"):
        return note
    return "—" if exit_status is None else str(exit_status)


def matches(rank: int, line: str, origin: str, ranks: Collection[int], text: str) -> bool:
    """The command log's filter: one of `ranks` (none: any) and `text` in the line or who asked."""
    needle = text.casefold()
    return ((not ranks or rank in ranks)
            and (not needle or needle in line.casefold() or needle in origin.casefold()))


# ---- writing --------------------------------------------------------------------------------------------

def record_line(rec: CommandRecord) -> dict[str, Any]:
    """One finished command as a session file line (redacted, the command line bounded)."""
    line = redact(rec.command)
    out: dict[str, Any] = {"kind": "cmd", "t": round(rec.started, 3), "rank": rec.rank,
                           "line": clip(line, MAX_LINE), "exit": rec.exit_status,
                           "duration": None if rec.duration is None else round(rec.duration, 3),
                           "note": rec.note, "origin": rec.origin}
    if len(line) > MAX_LINE:
        out["truncated"] = len(line)
    return out


def new_session_id(directory: Path, now: float | None = None) -> str:
    """`YYYYMMDD-HHMMSS-PID` (local time), with a suffix when that name is taken: sorts oldest first."""
    base = time.strftime("%Y%m%d-%H%M%S", time.localtime(time.time() if now is None else now))
    base = f"{base}-{os.getpid()}"
    sid, n = base, 1
    while (directory / f"{sid}{SUFFIX}").exists() or (directory / f"{sid}{HOST_MARK}{SUFFIX}").exists():
        n += 1
        sid = f"{base}-{n}"
    return sid


def is_host_session(path: Path) -> bool:
    """A session file of a session that changed a host (kept for the retention period)."""
    return path.name.endswith(HOST_MARK + SUFFIX)


def session_id_of(path: Path) -> str:
    return path.name.removesuffix(SUFFIX).removesuffix(HOST_MARK)


def session_files(directory: Path) -> list[Path]:
    """The session files in `directory`, oldest first (by name: the id starts with the start time)."""
    try:
        return sorted((p for p in directory.iterdir() if p.name.endswith(SUFFIX) and p.is_file()),
                      key=session_id_of)
    except OSError:
        return []


def prune(directory: Path, keep: int = KEEP_SESSIONS, keep_days: float = KEEP_DAYS,
          now: float | None = None) -> list[Path]:
    """Remove the oldest read-only session files beyond `keep`, and the host-changing ones last written
    more than `keep_days` ago (or beyond MAX_HOST_SESSIONS); returns those removed."""
    files = session_files(directory)
    plain = [p for p in files if not is_host_session(p)]
    host = [p for p in files if is_host_session(p)]
    cutoff = (time.time() if now is None else now) - keep_days * 86_400
    gone = plain[:max(0, len(plain) - keep)]
    for i, path in enumerate(host):
        try:
            old = path.stat().st_mtime < cutoff
        except OSError:
            continue
        if old or i < len(host) - MAX_HOST_SESSIONS:
            gone.append(path)
    for path in gone:
        with contextlib.suppress(OSError):
            path.unlink()
    return gone


class SessionLog:
    """The file of one session: opened on the first command, appended one flushed line at a time."""

    def __init__(self, header: dict[str, Any], directory: Path | None = None, *,
                 max_records: int = MAX_RECORDS, keep: int = KEEP_SESSIONS, keep_days: float = KEEP_DAYS,
                 changes: bool = False, on_warning: Callable[[str], None] | None = None):
        self.header = dict(header)
        self.directory = directory if directory is not None else sessions_dir()
        self.max_records = max_records
        self.keep = keep
        self.keep_days = keep_days
        self.changes = changes          # a host-changing session: kept for the retention period
        self.on_warning = on_warning
        self.path: Path | None = None
        self.warning: str | None = None
        self.records = 0
        self._file: IO[str] | None = None
        self._capped = False
        self._closed = False  # for good: a fleet still recording after the session ended opens nothing
        self._began = time.time()

    @property
    def id(self) -> str:
        return str(self.header.get("id", ""))

    def open(self, **header: Any) -> bool:
        """Create the file and write the header (pruning old sessions first); False, with a warning,
        when it cannot be written."""
        if self._file is not None or self.warning is not None or self._closed:
            return self._file is not None
        created: Path | None = None
        try:
            self.directory.mkdir(parents=True, exist_ok=True)
            prune(self.directory, self.keep - 1, self.keep_days)
            sid = new_session_id(self.directory, self._began)
            self.header = {"kind": "session", "format": FORMAT, "id": sid, "started": round(self._began, 3),
                           "pid": os.getpid(), **self.header, **header}
            self.path = self.directory / f"{sid}{HOST_MARK if self.changes else ''}{SUFFIX}"
            self._file = self.path.open("x", encoding="utf-8")
            created = self.path
            self._write(self.header)
        except OSError as exc:
            # no half-made file stays open (each later command would fail on it again: a second warning)
            # nor on disk (the file was made by this call, with no header in it)
            self.close()
            if created is not None:
                with contextlib.suppress(OSError):
                    created.unlink()
            self._fail(f"command log not written ({self.directory}): {exc.strerror or exc}")
            return False
        return True

    def record(self, rec: CommandRecord) -> None:
        """Append one finished command (a run just begun is skipped: its end is recorded)."""
        if not rec.done or not self.open():
            return
        if self.records >= self.max_records:
            if not self._capped:
                self._capped = True
                self._write_safely({"kind": "note", "t": round(time.time(), 3),
                                    "text": f"more than {self.max_records} commands: the rest of this "
                                            "session is not logged"})
            return
        self.records += 1
        self._write_safely(record_line(rec))

    def mark_changes(self, what: str) -> None:
        """This session changes a host (`what`: launch, stop, setup, shell …): its file is kept for the
        retention period (renamed `<id>.host.jsonl` if open already) and a line says what and when."""
        if not self.changes:
            self.changes = True
            if self.path is not None and self._file is not None:
                marked = self.path.with_name(f"{self.id}{HOST_MARK}{SUFFIX}")
                try:
                    os.rename(self.path, marked)
                    self.path = marked
                except OSError as exc:
                    self._fail(f"command log {self.path} not marked as host-changing: {exc.strerror or exc}")
        if self._file is not None:
            self._write_safely({"kind": "change", "t": round(time.time(), 3), "what": what})

    def watch(self, fleet: Fleet) -> None:
        """Log the commands of `fleet` (the header names its cluster)."""
        if not self.header.get("config"):
            from cockpit.config import discover_config
            with contextlib.suppress(Exception):
                self.header["config"] = str(discover_config(None))
        self.keep_days = fleet.config.recorder.retention_days
        self.open(cluster=fleet.config.cluster.name)
        fleet.on_command(self.record)

    def close(self) -> None:
        """End the session: what is recorded after this is not logged (no second file)."""
        self._closed = True
        if self._file is not None:
            with contextlib.suppress(OSError):
                self._file.close()
            self._file = None

    def _write(self, data: dict[str, Any]) -> None:
        assert self._file is not None
        self._file.write(json.dumps(data, ensure_ascii=False, default=str) + "\n")
        self._file.flush()

    def _write_safely(self, data: dict[str, Any]) -> None:
        try:
            self._write(data)
        except OSError as exc:
            self.close()
            self._fail(f"command log stopped ({self.path}): {exc.strerror or exc}")

    def _fail(self, message: str) -> None:
        self.warning = message
        if self.on_warning is not None:
            self.on_warning(message)


_current: SessionLog | None = None


def current() -> SessionLog | None:
    """The session log of this process, while `session` runs."""
    return _current


def mark_host_change(what: str) -> None:
    """The session of this process changes a host now (the TUI, when the operator confirms)."""
    if _current is not None:
        _current.mark_changes(what)


@contextlib.contextmanager
def session(command: str, argv: Sequence[str], config: str | None, version: str, *,
            changes: bool = False) -> Iterator[SessionLog]:
    """Log every command the fleets of this process run (as asked by `command`) to a new session file,
    made when the first fleet is; a file that cannot be written is one warning on stderr. `changes`: the
    command changes a host (its session is kept for the retention period)."""
    from cockpit.hosts.fleet import watch_fleets
    from cockpit.hosts.origin import asking

    global _current
    warned: list[str] = []
    log = SessionLog({"command": command, "argv": redact(shlex.join(argv)), "config": config or "",
                      "version": version}, changes=changes, on_warning=warned.append)
    previous, _current = _current, log
    stop = watch_fleets(log.watch)
    try:
        with asking(command):
            yield log
    finally:
        stop()
        log.close()
        _current = previous
        for message in warned:
            print(f"r37-cockpit: warning: {message}", file=sys.stderr)


# ---- reading ----------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Entry:
    """One command of a session file."""

    t: float
    rank: int
    line: str
    exit: int | None
    duration: float | None
    note: str = ""
    origin: str = ""

    @property
    def failed(self) -> bool:
        return failed(self.exit, self.note)

    def as_json(self) -> dict[str, Any]:
        return {"t": self.t, "rank": self.rank, "origin": self.origin, "exit": self.exit,
                "duration": self.duration, "note": self.note, "line": self.line}


@dataclass
class Session:
    path: Path
    header: dict[str, Any]
    entries: list[Entry] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)     # what was skipped, and why
    changes: list[str] = field(default_factory=list)   # host changes the TUI marked (launch, stop …)

    @property
    def host_changing(self) -> bool:
        return is_host_session(self.path) or bool(self.changes)

    @property
    def id(self) -> str:
        return str(self.header.get("id") or session_id_of(self.path))

    @property
    def failures(self) -> int:
        return sum(e.failed for e in self.entries)

    def summary(self) -> dict[str, Any]:
        h = self.header
        return {"id": self.id, "started": h.get("started"), "command": str(h.get("command", "")),
                "cluster": str(h.get("cluster", "")), "config": str(h.get("config", "")),
                "commands": len(self.entries),
                "failures": self.failures, "host_changing": self.host_changing, "path": str(self.path)}


def _entry(data: object) -> Entry | None:
    if not isinstance(data, dict) or data.get("kind") != "cmd":
        return None
    try:
        exit_status = data.get("exit")
        duration = data.get("duration")
        return Entry(float(data["t"]), int(data["rank"]), str(data["line"]),
                     None if exit_status is None else int(exit_status),
                     None if duration is None else float(duration),
                     str(data.get("note") or ""), str(data.get("origin") or ""))
    except (KeyError, TypeError, ValueError):
        return None


def read_session(path: Path) -> Session | None:
    """A session file read back; None for a file that is not one (no session header; not a regular file:
    a FIFO or device is never waited on). Lines that cannot be read (a last line cut by a crash or still
    being written, a foreign line, JSON nested too deeply) are skipped with a note; past READ_FILE_MAX
    bytes the rest of the file is skipped with a note."""
    try:
        raw = open_regular(path)
    except (OSError, NotReadable, ValueError):
        return None
    with io.TextIOWrapper(raw, encoding="utf-8", errors="replace") as f:
        first = f.readline(READ_LINE_MAX)
        try:
            header = loads_bounded(first)
        except ValueError:
            return None
        if not isinstance(header, dict) or header.get("kind") != "session":
            return None
        found = Session(path, header)
        number = 1
        size = len(first)
        while line := f.readline(READ_LINE_MAX):
            number += 1
            size += len(line)
            if size > READ_FILE_MAX:
                found.notes.append(f"line {number} on: the file is larger than {READ_FILE_MAX >> 20} MiB: "
                                   "the rest skipped")
                break
            if not line.endswith("\n"):
                found.notes.append(f"line {number}: incomplete (cut short, or still being written): skipped")
                if len(line) >= READ_LINE_MAX:  # the rest of an over-long line
                    while (more := f.readline(READ_LINE_MAX)) and not more.endswith("\n"):
                        size += len(more)
                        if size > READ_FILE_MAX:
                            break
                continue
            try:
                data = loads_bounded(line, max_depth=8)
            except ValueError:
                found.notes.append(f"line {number}: not JSON (or nested too deeply): skipped")
                continue
            entry = _entry(data)
            if entry is not None:
                found.entries.append(entry)
            elif isinstance(data, dict) and data.get("kind") == "note":
                found.notes.append(str(data.get("text", "")))
            elif isinstance(data, dict) and data.get("kind") == "change":
                found.changes.append(str(data.get("what", "")))
            else:
                found.notes.append(f"line {number}: not a command record: skipped")
        return found


def list_sessions(directory: Path | None = None) -> tuple[list[Session], list[str]]:
    """Every readable session, newest first, and a note per file skipped."""
    sessions, notes = [], []
    for path in reversed(session_files(directory if directory is not None else sessions_dir())):
        found = read_session(path)
        if found is None:
            notes.append(f"{path.name}: not a cockpit session file: skipped")
        else:
            sessions.append(found)
    return sessions, notes


def find_session(which: str, directory: Path | None = None) -> Session | None:
    """The session named `which`: "last" (the newest), an id, or the start of one id. A session's file is
    named by its id, so only the file chosen is read."""
    files = list(reversed(session_files(directory if directory is not None else sessions_dir())))
    if which == "last":
        return next((found for path in files if (found := read_session(path)) is not None), None)
    ids = {session_id_of(path): path for path in files}
    begins = [sid for sid in ids if sid.startswith(which)]
    chosen = which if which in ids else (begins[0] if len(begins) == 1 else None)
    return None if chosen is None else read_session(ids[chosen])
