"""The record of containers this cockpit started, per cluster and rank, on the admin box.

`stop` touches only containers listed here (by full container ID), so a model someone launched by hand
is never stopped. The file is `$XDG_STATE_HOME/r37-cockpit/launched.json` (default
`~/.local/state/r37-cockpit/`; `cockpit.locations.ledger_file`); every change is a locked
read-modify-write, written durably (`cockpit.files.write_atomic`: temp file, fsync, rename, fsync of the
directory). A file that cannot be read as a ledger is never silently reset: it is renamed aside to
`launched.json.corrupt-<UTC time>` and a notice is kept in `Ledger.warnings` (and logged) for the CLI
and the TUI to show; the cockpit then starts a fresh ledger.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import logging
import os
import time
from collections.abc import Iterator
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import NamedTuple

from cockpit.config import ClusterConfig
from cockpit.files import fsync_dir, write_atomic
from cockpit.locations import ledger_file

log = logging.getLogger(__name__)
ADOPT_WINDOW = 300.0   # seconds after a lost `docker run` began in which a container it created may appear


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


def _load(cls: type, data: object) -> object | None:
    if not isinstance(data, dict):
        return None
    known = {f.name for f in fields(cls)}
    try:
        return cls(**{k: v for k, v in data.items() if k in known})
    except (TypeError, ValueError):
        return None


class LedgerNotice(NamedTuple):
    """Something the operator must be told about the ledger: a stable error code and a sentence."""

    code: str      # cockpit.errorcodes: file-corrupt (kept aside, fresh ledger started) or command-failed
    message: str

    def __str__(self) -> str:
        return self.message


class LedgerCorrupt(Exception):
    """The ledger file is not a ledger (not UTF-8, not JSON, not a JSON object)."""


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

    def pop_warnings(self) -> list[LedgerNotice]:
        """The notices not shown yet (each is returned once)."""
        out, self.warnings = self.warnings, []
        return out

    def _warn(self, message: str, code: str = "command-failed") -> None:
        if message in self._told:            # a watcher reads the ledger every look: tell it once
            return
        self._told.add(message)
        self.warnings.append(LedgerNotice(code, message))
        log.warning("%s", message)

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
            raw = self.path.read_bytes()
        except FileNotFoundError:
            return {}
        try:
            data = json.loads(raw.decode("utf-8"))
        except (UnicodeDecodeError, ValueError, RecursionError) as exc:
            raise LedgerCorrupt(f"not JSON ({type(exc).__name__}: {str(exc)[:120]})") from None
        if not isinstance(data, dict):
            raise LedgerCorrupt(f"a JSON {type(data).__name__}, not an object")
        return data

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

    def _read(self) -> dict[str, dict[str, dict[str, object]]]:
        """The ledger's data for a look (no lock unless the file is corrupt: then it is kept aside)."""
        try:
            return self._parse()
        except LedgerCorrupt:
            pass
        except OSError as exc:
            self._warn(f"launch ledger {self.path} cannot be read ({exc.strerror or exc})")
            return {}
        with self._lock():
            return self._read_locked()

    def records(self) -> dict[int, LaunchRecord]:
        """The latest record per rank of this cluster."""
        ranks = self._read().get(self.key, {})
        out = {}
        for rank, rec in ranks.items() if isinstance(ranks, dict) else []:
            loaded = _load(LaunchRecord, rec) if rank.isdigit() else None
            if isinstance(loaded, LaunchRecord):
                out[int(rank)] = loaded
        return out

    def pending(self) -> dict[int, PendingLaunch]:
        """Launches whose `docker run` did not report back (host lost while it was in flight)."""
        ranks = self._read().get(self.key + "/pending", {})
        out = {}
        for rank, rec in ranks.items() if isinstance(ranks, dict) else []:
            loaded = _load(PendingLaunch, rec) if rank.isdigit() else None
            if isinstance(loaded, PendingLaunch):
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
