"""The record of containers this cockpit started, per cluster and rank, on the admin box.

`stop` touches only containers listed here (by full container ID), so a model someone launched by hand
is never stopped. The file is `$XDG_STATE_HOME/r37-cockpit/launched.json` (default
`~/.local/state/r37-cockpit/`; `cockpit.locations.ledger_file`); every change is a locked
read-modify-write, written durably (`cockpit.files.write_atomic`: temp file, fsync, rename, fsync of the
directory). A file that cannot be read as a ledger is never silently reset: it is renamed aside to
`launched.json.corrupt-<UTC time>` and a notice is kept in `Ledger.warnings` (and logged) for the CLI
and the TUI to show; the cockpit then starts a fresh ledger. "Cannot be read as a ledger": not a regular
file (a FIFO, a link to a device), over MAX_LEDGER_BYTES, not UTF-8 JSON, nested deeper than a ledger,
or any record with a missing field or a field of the wrong type (`"container_id": 5`): a record is never
dropped silently, since a dropped record makes its container look started by hand and `stop` skips it.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import logging
import os
import stat
import time
from collections.abc import Iterator
from dataclasses import MISSING, asdict, dataclass, fields
from pathlib import Path
from typing import NamedTuple

from cockpit.config import ClusterConfig
from cockpit.files import NotReadable, fsync_dir, read_json, write_atomic
from cockpit.locations import ledger_file

log = logging.getLogger(__name__)
ADOPT_WINDOW = 300.0   # seconds after a lost `docker run` began in which a container it created may appear
MAX_LEDGER_BYTES = 4 << 20   # a ledger holds a few records per cluster: a few KB


def cluster_key(cfg: ClusterConfig) -> str:
    """Cluster name plus a digest of its SSH targets, so two clusters with one name never mix."""
    targets = ",".join(f"{h.rank}={h.user or ''}@{h.ssh}:{h.port or 22}" for h in cfg.by_rank())
    digest = hashlib.sha256(targets.encode()).hexdigest()[:12]
    return f"{cfg.cluster.name}-{digest}"


@dataclass(frozen=True, slots=True)
class LaunchRecord:
    """One container the cockpit started."""

    rank: int
    container_id: str
    name: str
    target: str
    launched_at: float
    stopped_at: float | None = None
    stop_requested_at: float | None = None   # when this cockpit began stopping the cluster (admin clock)


@dataclass(frozen=True, slots=True)
class PendingLaunch:
    """A `docker run` in flight on a rank: if its host is lost meanwhile, a container of that name created
    after `at` is this launch's and is recorded when the host answers again."""

    rank: int
    name: str
    target: str
    at: float


_FIELD_TYPES: dict[str, tuple[type, ...]] = {
    "int": (int,), "str": (str,), "float": (int, float), "float | None": (int, float, type(None)),
}


def _problem(cls: type, data: object) -> str | None:
    """Why `data` is not a record of `cls` (a missing field, a field of the wrong type), or None."""
    if not isinstance(data, dict):
        return f"a record is a JSON {type(data).__name__}, not an object"
    for f in fields(cls):
        if f.name not in data:
            if f.default is MISSING:
                return f"a record has no {f.name!r}"
            continue
        value, allowed = data[f.name], _FIELD_TYPES[str(f.type)]
        if isinstance(value, bool) or not isinstance(value, allowed):
            return f"a record's {f.name!r} is a JSON {type(value).__name__}"
    return None


def _load(cls: type, data: dict[str, object]) -> object:
    known = {f.name for f in fields(cls)}
    return cls(**{k: v for k, v in data.items() if k in known})


def _check(data: object) -> dict[str, dict[str, dict[str, object]]]:
    """The ledger's data if every section and record has the ledger's shape; LedgerCorrupt otherwise."""
    if not isinstance(data, dict):
        raise LedgerCorrupt(f"a JSON {type(data).__name__}, not an object")
    for key, ranks in data.items():
        if not isinstance(ranks, dict):
            raise LedgerCorrupt(f"cluster {key[:80]!r} is a JSON {type(ranks).__name__}, not an object")
        cls = PendingLaunch if key.endswith("/pending") else LaunchRecord
        for rank, rec in ranks.items():
            if not (rank.isdigit() and rank.isascii() and len(rank) <= 3):
                raise LedgerCorrupt(f"cluster {key[:80]!r} has a record under {rank[:20]!r}, not a rank")
            problem = _problem(cls, rec)
            if problem is not None:
                raise LedgerCorrupt(f"cluster {key[:80]!r}, rank {rank}: {problem}")
    return data


class LedgerNotice(NamedTuple):
    """Something the operator must be told about the ledger: a stable error code and a sentence."""

    code: str      # cockpit.errorcodes: file-corrupt (kept aside, fresh ledger started) or command-failed
    message: str

    def __str__(self) -> str:
        return self.message


class LedgerCorrupt(Exception):
    """The ledger file is not a ledger (not a regular file, too large, not UTF-8, not JSON, not a JSON
    object, a record of the wrong shape)."""


class Ledger:
    """Launch records of one cluster.

    `warnings` collects the notices of this ledger's life (a corrupt file kept aside, a file that could
    not be read): the CLI prints them, the TUI shows them as notifications.
    """

    def __init__(self, cfg: ClusterConfig, path: Path | None = None):
        self.cfg = cfg
        self.key = cluster_key(cfg)
        self.path = path or ledger_file()
        self.warnings: list[LedgerNotice] = []
        self._told: set[str] = set()
        self._seen: tuple[tuple[int, ...], dict[str, dict[str, dict[str, object]]]] | None = None
        self._records: tuple[object, dict[int, LaunchRecord]] | None = None   # (the data read, its records)

    def pop_warnings(self) -> list[LedgerNotice]:
        """The notices not shown yet (each is returned once)."""
        out, self.warnings = self.warnings, []
        return out

    def _warn(self, message: str, code: str = "command-failed") -> None:
        if message in self._told:            # a watcher reads the ledger every look: tell it once
            return
        self._told.add(message)
        self.warnings.append(LedgerNotice(code, message))
        log.info("%s", message)   # the CLI and the TUI show every notice: a warning here printed it twice

    def write_failed(self, what: str, exc: OSError) -> None:
        """Note that `what` could not be recorded (a full disk, a read-only state directory): a
        `write-failed` notice naming the file and the cause."""
        self._warn(f"the launch ledger {self.path} could not be written ({exc.strerror or exc}): what this "
                   f"command did ({what}) is not recorded in it", "write-failed")

    @contextlib.contextmanager
    def _lock(self) -> Iterator[None]:
        self.path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        lock = self.path.with_name(self.path.name + ".lock")
        fd = os.open(lock, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            yield
        finally:
            os.close(fd)

    @contextlib.contextmanager
    def _locked(self) -> Iterator[dict[str, dict[str, dict[str, object]]]]:
        with self._lock():
            data = self._read_locked()
            yield data
            self._write(data)

    def _write(self, data: dict[str, dict[str, dict[str, object]]]) -> None:
        """Temp file (0600), flush, fsync, rename over the ledger, fsync the directory."""
        write_atomic(self.path, json.dumps(data, indent=2, sort_keys=True) + "\n", mode=0o600, overwrite=True)

    def _parse(self) -> dict[str, dict[str, dict[str, object]]]:
        """The ledger's data ({} when there is none yet); LedgerCorrupt if the file is not a ledger."""
        try:
            data = read_json(self.path, MAX_LEDGER_BYTES, max_depth=4)
        except FileNotFoundError:
            return {}
        except NotReadable as exc:
            raise LedgerCorrupt(exc.reason.removeprefix("is ")) from None
        return _check(data)

    def _read_locked(self) -> dict[str, dict[str, dict[str, object]]]:
        """Read with the lock held: a corrupt file is kept aside and a fresh ledger begins."""
        try:
            return self._parse()
        except LedgerCorrupt as exc:
            self._quarantine(str(exc))
            return {}
        except OSError as exc:
            self._warn(f"launch ledger {self.path} cannot be read ({exc.strerror or exc}): "
                       "launch records are unknown until it can")
            raise

    def _quarantine(self, why: str) -> None:
        """Rename the corrupt ledger to launched.json.corrupt-<UTC time>[-N], never over an earlier one."""
        stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
        for n in range(1000):
            aside = self.path.with_name(f"{self.path.name}.corrupt-{stamp}" + (f"-{n}" if n else ""))
            try:
                os.link(self.path, aside)        # fails if that name exists: an earlier one is kept
            except FileExistsError:
                continue
            except FileNotFoundError:
                return                           # someone else kept it aside meanwhile
            os.unlink(self.path)
            fsync_dir(self.path.parent)
            self._warn(f"the launch ledger {self.path} could not be read ({why}); it was kept as {aside} "
                       "and a fresh ledger was started: containers this cockpit launched before are no "
                       "longer known as its own (stop them the way they were started)", "file-corrupt")
            return
        raise OSError(f"cannot keep the corrupt ledger {self.path} aside: too many earlier copies")

    def _stamp(self) -> tuple[int, ...] | None:
        """What identifies this version of the file: every write is a rename of a new file (another inode,
        new times), so an unchanged stamp means unchanged data. None: no file, or not a regular one."""
        try:
            st = os.stat(self.path)
        except OSError:
            return None
        if not stat.S_ISREG(st.st_mode):
            return None
        return st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns

    def _read(self) -> dict[str, dict[str, dict[str, object]]]:
        """The ledger's data for a look (no lock unless the file is corrupt: then it is kept aside). A
        watcher looks every second per rank: the file is parsed again only when it changed. The data is
        read-only to callers (writes go through `_locked`, which always reads the file)."""
        stamp = self._stamp()
        if stamp is not None and self._seen is not None and self._seen[0] == stamp:
            return self._seen[1]
        try:
            data = self._parse()
            if stamp is not None and stamp == self._stamp():   # not replaced while it was read
                self._seen = (stamp, data)
            return data
        except LedgerCorrupt:
            pass
        except OSError as exc:
            self._warn(f"launch ledger {self.path} cannot be read ({exc.strerror or exc})")
            return {}
        with self._lock():
            return self._read_locked()

    def records(self) -> dict[int, LaunchRecord]:
        """The latest record per rank of this cluster (made again only when the file was read again: a
        watcher asks once a second per rank)."""
        data = self._read()
        if self._records is not None and self._records[0] is data:
            return dict(self._records[1])
        out = {}
        for rank, rec in data.get(self.key, {}).items():   # every record checked by _check
            loaded = _load(LaunchRecord, rec)
            assert isinstance(loaded, LaunchRecord)
            out[int(rank)] = loaded
        self._records = (data, out)
        return dict(out)

    def pending(self) -> dict[int, PendingLaunch]:
        """Launches whose `docker run` did not report back (host lost while it was in flight)."""
        ranks = self._read().get(self.key + "/pending", {})
        out = {}
        for rank, rec in ranks.items():   # every record checked by _check
            loaded = _load(PendingLaunch, rec)
            assert isinstance(loaded, PendingLaunch)
            out[int(rank)] = loaded
        return out

    def record(self, rank: int, container_id: str, name: str, target: str) -> LaunchRecord:
        rec = LaunchRecord(rank, container_id, name, target, time.time())
        with self._locked() as data:
            data.setdefault(self.key, {})[str(rank)] = asdict(rec)
            data.get(self.key + "/pending", {}).pop(str(rank), None)
        return rec

    def begin_launch(self, rank: int, name: str, target: str) -> PendingLaunch:
        """Note a `docker run` about to start on rank (cleared by `record` or `clear_pending`)."""
        pend = PendingLaunch(rank, name, target, time.time())
        with self._locked() as data:
            data.setdefault(self.key + "/pending", {})[str(rank)] = asdict(pend)
        return pend

    def clear_pending(self, rank: int) -> None:
        with self._locked() as data:
            data.get(self.key + "/pending", {}).pop(str(rank), None)

    def adopt(self, rank: int, container_id: str, created_at: float | None, skew: float = 5.0) -> bool:
        """Record the container a lost `docker run` started, if it was created during that launch."""
        pend = self.pending().get(rank)
        if pend is None or created_at is None or not pend.at - skew <= created_at <= pend.at + ADOPT_WINDOW:
            return False
        self.record(rank, container_id, pend.name, pend.target)
        return True

    def claim(self, rank: int, container_id: str, created_at: float | None) -> bool:
        """This cockpit started that container: recorded, or created by a launch whose `docker run` never
        reported back (then it is recorded now)."""
        return self.owns(rank, container_id) or self.adopt(rank, container_id, created_at)

    def mark_stop_requested(self, ranks: list[tuple[int, str]], at: float | None = None) -> None:
        """Note that this cockpit begins stopping these (rank, container ID) pairs: what the containers log
        from then on is their shutdown, not a failure."""
        at = time.time() if at is None else at
        with self._locked() as data:
            for rank, cid in ranks:
                rec = data.get(self.key, {}).get(str(rank))
                if isinstance(rec, dict) and rec.get("container_id") == cid:
                    rec["stop_requested_at"] = at

    def mark_stopped(self, rank: int, container_id: str) -> None:
        with self._locked() as data:
            rec = data.get(self.key, {}).get(str(rank))
            if isinstance(rec, dict) and rec.get("container_id") == container_id:
                rec["stopped_at"] = time.time()

    def owns(self, rank: int, container_id: str) -> bool:
        rec = self.records().get(rank)
        return rec is not None and rec.container_id == container_id
