"""The flight recorder's store: one SQLite database per cluster, `<state dir>/recordings/<key>.sqlite3`.

What is recorded (`recipe.recording` turns the live models into rows): every stats sample per rank
(`samples`), rank 0's engine figures (`engine`), and what happened (`events`: verdict and condition
changes with their cause, failures, hosts lost and back, alerts raised and cleared, launch / stop /
relaunch with who asked, bench runs with the path of their records). An event already recorded (the same
time, kind, rank and summary: a log tail read again by the next watcher) is not written twice.

- One writer: a thread of its own with a bounded queue. `put` never blocks the caller (the event loop):
  a full queue drops the row and counts it (`dropped`, noted in the recording when there is room).
- Batched commits: every `COMMIT_EVERY_S` seconds or `COMMIT_ROWS` rows, whichever comes first, in WAL
  mode with `synchronous=NORMAL`: a process killed at any point (kill -9) loses at most the batch not yet
  committed; what was committed opens again.
- Retention (`[recorder]` in cluster.toml): rows older than `retention_days` go, and while the rows take
  more than `max_mb` the oldest go first (whole time slices across the three tables); freed pages are
  returned to the file system (incremental vacuum).
- A database that cannot be read (not SQLite, failed integrity check) is set aside — renamed with a time
  stamp, its WAL beside it — with a warning (code `file-corrupt`), never reset silently; one written by a
  newer cockpit (schema version above ours) is left untouched and not recorded to.
- A write that fails (disk full, permission) is a warning (code `write-failed`); the rows of that batch
  are counted as dropped and recording goes on with the next batch.

Reading (`read_events`, `read_samples`) opens the database read-only and never blocks the writer.
Text in rows is stored as given (the caller bounds and redacts it); whoever prints it neutralises it.
"""

from __future__ import annotations

import contextlib
import json
import os
import queue
import sqlite3
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cockpit.telemetry.cluster_stats import ENGINE_SERIES, RANK_SERIES

SCHEMA_VERSION = 1
SUFFIX = ".sqlite3"
COMMIT_EVERY_S = 2.0          # a batch is committed this often ...
COMMIT_ROWS = 200             # ... or when it holds this many rows
MAX_QUEUE = 20_000            # rows waiting for the writer; beyond, new rows are dropped and counted
PRUNE_EVERY_S = 600.0         # retention is applied at open and this often
MAX_TEXT = 2_000              # characters of an event's summary kept
MAX_DATA = 16_000             # characters of an event's JSON data kept (beyond: dropped, marked)
BUSY_TIMEOUT_S = 5.0
DAY = 86_400.0

SAMPLE_COLUMNS = RANK_SERIES
ENGINE_COLUMNS = ENGINE_SERIES

_SCHEMA = (
    "CREATE TABLE samples (t REAL NOT NULL, rank INTEGER NOT NULL, "
    + ", ".join(f"{c} REAL" for c in SAMPLE_COLUMNS) + ")",
    "CREATE INDEX samples_t ON samples (t)",
    "CREATE TABLE engine (t REAL NOT NULL, " + ", ".join(f"{c} REAL" for c in ENGINE_COLUMNS) + ")",
    "CREATE INDEX engine_t ON engine (t)",
    "CREATE TABLE events (id INTEGER PRIMARY KEY, t REAL NOT NULL, kind TEXT NOT NULL, rank INTEGER, "
    "summary TEXT NOT NULL, data TEXT)",
    # one fact once: a log tail read again by the next watcher replays its phases and failures at the
    # times the log gave them, and those rows are not written twice
    "CREATE UNIQUE INDEX events_key ON events (t, kind, ifnull(rank, -1), summary)",
)
_INSERT = {
    "s": "INSERT INTO samples VALUES (" + ", ".join("?" * (2 + len(SAMPLE_COLUMNS))) + ")",
    "e": "INSERT INTO engine VALUES (" + ", ".join("?" * (1 + len(ENGINE_COLUMNS))) + ")",
    "v": "INSERT OR IGNORE INTO events (t, kind, rank, summary, data) VALUES (?, ?, ?, ?, ?)",
}
TABLES = ("samples", "engine", "events")


class RecordingUnreadable(Exception):
    """The database cannot be read: not SQLite, damaged, or of a newer schema (the message says which)."""


@dataclass(frozen=True)
class Retention:
    days: float = 30.0
    max_bytes: int = 500 * 1_000_000


@dataclass(frozen=True)
class Event:
    """One recorded event, as read back."""

    id: int
    t: float
    kind: str
    rank: int | None
    summary: str
    data: dict[str, Any]

    def to_dict(self) -> dict[str, Any]:
        return {"t": self.t, "kind": self.kind, "rank": self.rank, "summary": self.summary, "data": self.data}


# ---- opening -----------------------------------------------------------------------------------------------

def _stamp(now: float) -> str:
    return time.strftime("%Y%m%dT%H%M%SZ", time.gmtime(now))


def set_aside(path: Path, now: float | None = None) -> Path:
    """Rename an unreadable database (and its -wal / -shm files) to `<name>.corrupt-<time>`; returns the
    new path of the database file. Never removes anything."""
    base = path.with_name(f"{path.name}.corrupt-{_stamp(time.time() if now is None else now)}")
    target, n = base, 1
    while target.exists():
        n += 1
        target = base.with_name(f"{base.name}-{n}")
    path.rename(target)
    for extra in ("-wal", "-shm"):
        side = path.with_name(path.name + extra)
        if side.exists():
            with contextlib.suppress(OSError):
                side.rename(target.with_name(target.name + extra))
    return target


def _check(con: sqlite3.Connection) -> None:
    """Raise RecordingUnreadable unless `con` is a readable database of a schema we know."""
    try:
        version = int(con.execute("PRAGMA user_version").fetchone()[0])
        found = con.execute("PRAGMA quick_check").fetchone()
    except sqlite3.DatabaseError as exc:
        raise RecordingUnreadable(str(exc)) from None
    if found is None or found[0] != "ok":
        raise RecordingUnreadable(f"integrity check: {found[0] if found else 'no answer'}")
    if version > SCHEMA_VERSION:
        raise RecordingUnreadable(f"schema version {version} is newer than this cockpit's "
                                  f"({SCHEMA_VERSION}): recorded by a newer r37-cockpit")
    if version == SCHEMA_VERSION:
        names = {r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        missing = [t for t in TABLES if t not in names]
        if missing:
            raise RecordingUnreadable(f"tables missing: {', '.join(missing)}")


def open_for_writing(path: Path) -> sqlite3.Connection:
    """Open (or create) the database at `path` for the writer: WAL, our schema. Raises
    RecordingUnreadable (set it aside) or OSError / sqlite3.Error (cannot be written)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    con = sqlite3.connect(path, timeout=BUSY_TIMEOUT_S, isolation_level=None, check_same_thread=False)
    try:
        _check(con)
        if int(con.execute("PRAGMA user_version").fetchone()[0]) == 0:
            if con.execute("SELECT count(*) FROM sqlite_master").fetchone()[0]:
                raise RecordingUnreadable("not a cockpit recording (tables of something else, no version)")
            con.execute("PRAGMA auto_vacuum = INCREMENTAL")       # before the first table exists
            con.execute("PRAGMA journal_mode = WAL")
            con.execute("BEGIN IMMEDIATE")
            if int(con.execute("PRAGMA user_version").fetchone()[0]) == 0:  # another writer may have won
                for statement in _SCHEMA:
                    con.execute(statement)
                con.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
            con.execute("COMMIT")
        mode = con.execute("PRAGMA journal_mode = WAL").fetchone()[0]
        if str(mode).lower() != "wal":
            raise sqlite3.OperationalError(f"journal mode {mode}, not WAL")
        con.execute("PRAGMA synchronous = NORMAL")
    except sqlite3.DatabaseError as exc:
        con.close()
        if isinstance(exc, sqlite3.OperationalError) and not _unreadable_message(str(exc)):
            raise
        raise RecordingUnreadable(str(exc)) from None
    except BaseException:
        con.close()
        raise
    return con


def _unreadable_message(text: str) -> bool:
    text = text.lower()
    return any(w in text for w in ("not a database", "malformed", "corrupt", "file is encrypted"))


def open_for_reading(path: Path) -> sqlite3.Connection:
    """A read-only connection (the writer may be running); RecordingUnreadable when it cannot be read,
    FileNotFoundError when there is no recording."""
    if not path.is_file():
        raise FileNotFoundError(str(path))
    try:
        con = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True, timeout=BUSY_TIMEOUT_S)
    except sqlite3.DatabaseError as exc:
        raise RecordingUnreadable(str(exc)) from None
    try:
        version = int(con.execute("PRAGMA user_version").fetchone()[0])
        if version == 0:
            raise RecordingUnreadable("not a cockpit recording (no schema version)")
        if version > SCHEMA_VERSION:
            raise RecordingUnreadable(f"schema version {version} is newer than this cockpit's "
                                      f"({SCHEMA_VERSION})")
    except sqlite3.DatabaseError as exc:
        con.close()
        raise RecordingUnreadable(str(exc)) from None
    except BaseException:
        con.close()
        raise
    return con


def used_bytes(con: sqlite3.Connection) -> int:
    """Bytes the rows take: pages in use (not the free list) times the page size."""
    pages = con.execute("PRAGMA page_count").fetchone()[0]
    free = con.execute("PRAGMA freelist_count").fetchone()[0]
    size = con.execute("PRAGMA page_size").fetchone()[0]
    return int((pages - free) * size)


def apply_retention(con: sqlite3.Connection, retention: Retention, now: float) -> int:
    """Delete rows older than the retention days, then the oldest time slices while the rows take more
    than max_bytes; return the number of rows deleted. Runs in its own transaction."""
    deleted = 0
    cutoff = now - retention.days * DAY
    con.execute("BEGIN IMMEDIATE")
    try:
        for table in TABLES:
            deleted += con.execute(f"DELETE FROM {table} WHERE t < ?", (cutoff,)).rowcount
        con.execute("COMMIT")
    except BaseException:
        con.execute("ROLLBACK")
        raise
    for _ in range(64):
        if used_bytes(con) <= retention.max_bytes:
            break
        span = [r for table in TABLES for r in con.execute(f"SELECT min(t), max(t) FROM {table}")
                if r[0] is not None]
        if not span:
            break
        oldest, newest = min(r[0] for r in span), max(r[1] for r in span)
        edge = oldest + max((newest - oldest) / 10, 1e-3)   # the oldest tenth of what is kept
        con.execute("BEGIN IMMEDIATE")
        try:
            for table in TABLES:
                deleted += con.execute(f"DELETE FROM {table} WHERE t < ?", (edge,)).rowcount
            con.execute("COMMIT")
        except BaseException:
            con.execute("ROLLBACK")
            raise
    if deleted:
        con.execute("PRAGMA incremental_vacuum")
    return deleted


# ---- the writer --------------------------------------------------------------------------------------------

_CLOSE = object()


class Recorder:
    """The writer of one cluster's recording. `put_*` from any thread (never blocks); `close` commits
    what is queued and stops the thread. Warnings (set aside, cannot write) go to `on_warning` (called
    from the writer thread) and stay in `warnings`."""

    def __init__(self, path: Path, retention: Retention | None = None, *,
                 on_warning: Callable[[str], None] | None = None,
                 commit_every_s: float = COMMIT_EVERY_S, commit_rows: int = COMMIT_ROWS,
                 max_queue: int = MAX_QUEUE) -> None:
        self.path = path
        self.retention = retention or Retention()
        self.on_warning = on_warning
        self.commit_every_s = commit_every_s
        self.commit_rows = commit_rows
        self.warnings: list[str] = []
        self.set_aside_as: Path | None = None
        self.dropped = 0              # rows lost: queue full, or a batch that could not be written
        self.written = 0              # rows committed
        self.commits = 0
        self.disabled = False         # nothing is written (a newer schema, or the file cannot be opened)
        self.ready = threading.Event()          # the database is open (or recording is disabled)
        self._queue: queue.Queue[object] = queue.Queue(maxsize=max_queue)
        self._dropped_noted = 0
        self._thread: threading.Thread | None = None
        self._closed = False

    # -- the caller's side --

    def start(self) -> Recorder:
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name="recorder", daemon=True)
            self._thread.start()
        return self

    def put_sample(self, t: float, rank: int, values: dict[str, float | None]) -> None:
        self._put(("s", t, rank, *(values.get(c) for c in SAMPLE_COLUMNS)))

    def put_engine(self, t: float, values: dict[str, float | None]) -> None:
        self._put(("e", t, *(values.get(c) for c in ENGINE_COLUMNS)))

    def put_event(self, t: float, kind: str, summary: str, *, rank: int | None = None,
                  data: dict[str, Any] | None = None) -> None:
        text = json.dumps(data, ensure_ascii=False, default=str) if data else None
        if text is not None and len(text) > MAX_DATA:
            text = json.dumps({"truncated": len(text)})
        self._put(("v", t, kind, rank, summary[:MAX_TEXT], text))

    def flush(self, timeout: float = 30.0) -> bool:
        """Wait until everything put so far is committed (tests, and `close`)."""
        if self._thread is None or not self._thread.is_alive():
            return False
        done = threading.Event()
        try:
            self._queue.put(done, timeout=timeout)
        except queue.Full:
            return False
        return done.wait(timeout)

    def close(self, timeout: float = 10.0) -> None:
        """Commit what is queued and stop the writer (waits at most `timeout` seconds)."""
        if self._closed:
            return
        self._closed = True
        if self._thread is not None:
            with contextlib.suppress(queue.Full):
                self._queue.put(_CLOSE, timeout=timeout)
            self._thread.join(timeout)

    def _put(self, row: tuple[Any, ...]) -> None:
        if self._closed or self.disabled:
            return
        try:
            self._queue.put_nowait(row)
        except queue.Full:
            self.dropped += 1

    # -- the writer thread --

    def _warn(self, message: str) -> None:
        self.warnings.append(message)
        if self.on_warning is not None:
            with contextlib.suppress(Exception):
                self.on_warning(message)

    def _open(self) -> sqlite3.Connection | None:
        try:
            try:
                return open_for_writing(self.path)
            except RecordingUnreadable as exc:
                if "newer" in str(exc):
                    self._warn(f"file-corrupt: recording {self.path} not written: {exc}; it is left as it "
                               "is (use the newer r37-cockpit, or move the file away)")
                    return None
                self.set_aside_as = set_aside(self.path)
                self._warn(f"file-corrupt: recording {self.path} could not be read ({exc}); it was set "
                           f"aside as {self.set_aside_as.name} and a new recording begins")
                return open_for_writing(self.path)
        except (OSError, sqlite3.Error, RecordingUnreadable) as exc:
            self._warn(f"write-failed: recording {self.path} cannot be opened: {exc}; nothing is recorded")
            return None

    def _run(self) -> None:
        con = self._open()
        if con is None:
            self.disabled = True
            self.ready.set()
            self._drain_without_db()
            return
        self.ready.set()
        try:
            self._prune(con)
            next_prune = time.monotonic() + PRUNE_EVERY_S
            batch: list[tuple[Any, ...]] = []
            waiters: list[threading.Event] = []
            last_commit = time.monotonic()
            closing = False
            while not closing:
                now = time.monotonic()
                wait = (self.commit_every_s - (now - last_commit)) if batch else (next_prune - now)
                try:
                    item = self._queue.get(timeout=max(0.0, wait))
                except queue.Empty:
                    item = None
                if item is _CLOSE:
                    closing = True
                elif isinstance(item, threading.Event):
                    waiters.append(item)
                elif isinstance(item, tuple):
                    batch.append(item)
                due = time.monotonic() - last_commit >= self.commit_every_s
                if closing or waiters or len(batch) >= self.commit_rows or (due and batch):
                    self._commit(con, batch)
                    batch = []
                    last_commit = time.monotonic()
                    for w in waiters:
                        w.set()
                    waiters = []
                if time.monotonic() >= next_prune:
                    self._prune(con)
                    next_prune = time.monotonic() + PRUNE_EVERY_S
        finally:
            with contextlib.suppress(sqlite3.Error):
                con.close()

    def _drain_without_db(self) -> None:
        while True:
            item = self._queue.get()
            if item is _CLOSE:
                return
            if isinstance(item, threading.Event):
                item.set()

    def _commit(self, con: sqlite3.Connection, batch: Sequence[tuple[Any, ...]]) -> None:
        if self.dropped > self._dropped_noted:
            lost = self.dropped - self._dropped_noted
            batch = [*batch, ("v", time.time(), "recorder", None,
                              f"{lost} rows not recorded (the writer fell behind, or a write failed)", None)]
        if not batch:
            return
        try:
            con.execute("BEGIN")
            for kind in ("s", "e", "v"):
                rows = [row[1:] for row in batch if row[0] == kind]
                if rows:
                    con.executemany(_INSERT[kind], rows)
            con.execute("COMMIT")
        except sqlite3.Error as exc:
            with contextlib.suppress(sqlite3.Error):
                con.execute("ROLLBACK")
            self.dropped += len(batch)
            self._warn(f"write-failed: recording {self.path}: {len(batch)} rows not written: {exc}")
            return
        self._dropped_noted = self.dropped
        self.written += len(batch)
        self.commits += 1

    def _prune(self, con: sqlite3.Connection) -> None:
        try:
            apply_retention(con, self.retention, time.time())
        except sqlite3.Error as exc:
            self._warn(f"write-failed: recording {self.path}: retention not applied: {exc}")


# ---- reading -----------------------------------------------------------------------------------------------

def read_events(path: Path, *, since: float | None = None, until: float | None = None,
                rank: int | None = None, kinds: Iterable[str] | None = None,
                limit: int = 100_000, newest: bool = False) -> list[Event]:
    """Recorded events in time order (then in the order they were written), within [since, until];
    `rank`: that rank's events and the cluster's own (rank NULL). At most `limit`: the oldest, or with
    `newest` the newest ones (still returned oldest first)."""
    where: list[str] = ["1 = 1"]
    args: list[object] = []
    if since is not None:
        where.append("t >= ?")
        args.append(since)
    if until is not None:
        where.append("t <= ?")
        args.append(until)
    if rank is not None:
        where.append("(rank = ? OR rank IS NULL)")
        args.append(rank)
    wanted = list(kinds or ())
    if wanted:
        where.append(f"kind IN ({', '.join('?' * len(wanted))})")
        args += wanted
    con = open_for_reading(path)
    try:
        order = "t DESC, id DESC" if newest else "t, id"
        rows = con.execute(f"SELECT id, t, kind, rank, summary, data FROM events WHERE {' AND '.join(where)} "
                           f"ORDER BY {order} LIMIT ?", (*args, limit)).fetchall()
        if newest:
            rows.reverse()
    except sqlite3.DatabaseError as exc:
        raise RecordingUnreadable(str(exc)) from None
    finally:
        con.close()
    out = []
    for rid, t, kind, rk, summary, data in rows:
        try:
            parsed = json.loads(data) if data else {}
        except ValueError:
            parsed = {}
        out.append(Event(int(rid), float(t), str(kind), None if rk is None else int(rk), str(summary),
                         parsed if isinstance(parsed, dict) else {}))
    return out


def read_samples(path: Path, *, since: float | None = None, until: float | None = None,
                 rank: int | None = None) -> list[dict[str, Any]]:
    """Recorded stats samples in time order (each a dict: t, rank and the series)."""
    where: list[str] = ["1 = 1"]
    args: list[object] = []
    for clause, value in (("t >= ?", since), ("t <= ?", until), ("rank = ?", rank)):
        if value is not None:
            where.append(clause)
            args.append(value)
    con = open_for_reading(path)
    try:
        rows = con.execute(f"SELECT * FROM samples WHERE {' AND '.join(where)} ORDER BY t",
                           args).fetchall()
    except sqlite3.DatabaseError as exc:
        raise RecordingUnreadable(str(exc)) from None
    finally:
        con.close()
    names = ("t", "rank", *SAMPLE_COLUMNS)
    return [dict(zip(names, row, strict=True)) for row in rows]


def file_bytes(path: Path) -> int:
    """The database and its WAL on disk."""
    total = 0
    for p in (path, path.with_name(path.name + "-wal")):
        with contextlib.suppress(OSError):
            total += os.stat(p).st_size
    return total


SERIES_TABLES = {"samples": SAMPLE_COLUMNS, "engine": ENGINE_COLUMNS}


def _range(since: float | None, until: float | None, rank: int | None,
           table: str) -> tuple[str, list[object]]:
    where: list[str] = ["1 = 1"]
    args: list[object] = []
    for clause, value in (("t >= ?", since), ("t <= ?", until)):
        if value is not None:
            where.append(clause)
            args.append(value)
    if rank is not None and table == "samples":
        where.append("rank = ?")
        args.append(rank)
    return " AND ".join(where), args


def read_series(path: Path, table: str, *, since: float | None = None, until: float | None = None,
                rank: int | None = None, step: float | None = None) -> list[dict[str, Any]]:
    """Recorded points of `table` ("samples": per rank, "engine") in time order; with `step` seconds, the
    mean of each step (its start as `t`, `n` the points in it; a series with no value in a step is None)."""
    columns = SERIES_TABLES[table]
    where, args = _range(since, until, rank, table)
    ranked = table == "samples"
    con = open_for_reading(path)
    try:
        if step:
            keys = "CAST(t / ? AS INTEGER)" + (", rank" if ranked else "")
            cols = ", ".join(f"avg({c})" for c in columns)
            sql = (f"SELECT min(CAST(t / ? AS INTEGER)) * ?, {'rank, ' if ranked else ''}count(*), {cols} "
                   f"FROM {table} WHERE {where} GROUP BY {keys} ORDER BY 1{', 2' if ranked else ''}")
            rows = con.execute(sql, (step, step, *args, step)).fetchall()
            names = ("t", *(("rank",) if ranked else ()), "n", *columns)
        else:
            sql = (f"SELECT t, {'rank, ' if ranked else ''}{', '.join(columns)} FROM {table} WHERE {where} "
                   f"ORDER BY t{', rank' if ranked else ''}")
            rows = con.execute(sql, args).fetchall()
            names = ("t", *(("rank",) if ranked else ()), *columns)
    except sqlite3.DatabaseError as exc:
        raise RecordingUnreadable(str(exc)) from None
    finally:
        con.close()
    return [dict(zip(names, row, strict=True)) for row in rows]


def summarise_series(path: Path, table: str, *, since: float | None = None, until: float | None = None,
                     rank: int | None = None) -> dict[str, dict[str, Any]]:
    """Per rank ("engine" for the engine table): the points, first and last time, and min / mean / max
    of every series over the range."""
    columns = SERIES_TABLES[table]
    where, args = _range(since, until, rank, table)
    ranked = table == "samples"
    stats = ", ".join(f"min({c}), avg({c}), max({c})" for c in columns)
    sql = (f"SELECT {'rank' if ranked else 'NULL'}, count(*), min(t), max(t), {stats} FROM {table} "
           f"WHERE {where}{' GROUP BY rank ORDER BY rank' if ranked else ''}")
    con = open_for_reading(path)
    try:
        rows = con.execute(sql, args).fetchall()
    except sqlite3.DatabaseError as exc:
        raise RecordingUnreadable(str(exc)) from None
    finally:
        con.close()
    out: dict[str, dict[str, Any]] = {}
    for row in rows:
        if not row[1]:
            continue
        entry: dict[str, Any] = {"points": row[1], "first": row[2], "last": row[3]}
        for i, c in enumerate(columns):
            lo, mean, hi = row[4 + 3 * i: 7 + 3 * i]
            entry[c] = {"min": lo, "mean": mean, "max": hi}
        out["engine" if not ranked else str(row[0])] = entry
    return out
