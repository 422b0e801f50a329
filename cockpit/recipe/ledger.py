"""The record of containers this cockpit started, per cluster and rank, on the admin box.

`stop` touches only containers listed here (by full container ID), so a model someone launched by hand
is never stopped. The file is `$XDG_STATE_HOME/r37-cockpit/launched.json` (default
`~/.local/state/r37-cockpit/`); every change is a locked read-modify-write with an atomic replace.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import time
from collections.abc import Iterator
from dataclasses import asdict, dataclass, fields
from pathlib import Path

from cockpit.config import ClusterConfig

FILE_NAME = "launched.json"
ADOPT_WINDOW = 300.0   # seconds after a lost `docker run` began in which a container it created may appear


def state_dir() -> Path:
    base = os.environ.get("XDG_STATE_HOME") or os.path.join(os.path.expanduser("~"), ".local", "state")
    return Path(base) / "r37-cockpit"


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


class Ledger:
    """Launch records of one cluster."""

    def __init__(self, cfg: ClusterConfig, path: Path | None = None):
        self.key = cluster_key(cfg)
        self.path = path or state_dir() / FILE_NAME

    @contextlib.contextmanager
    def _locked(self) -> Iterator[dict[str, dict[str, dict[str, object]]]]:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        lock = self.path.with_name(self.path.name + ".lock")
        with open(lock, "a") as fh:
            fcntl.flock(fh, fcntl.LOCK_EX)
            data = self._read()
            yield data
            tmp = self.path.with_name(f"{self.path.name}.{os.getpid()}.tmp")
            tmp.write_text(json.dumps(data, indent=2, sort_keys=True) + "\n")
            os.replace(tmp, self.path)

    def _read(self) -> dict[str, dict[str, dict[str, object]]]:
        try:
            data = json.loads(self.path.read_text())
        except (OSError, ValueError):
            return {}
        return data if isinstance(data, dict) else {}

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
