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
from dataclasses import asdict, dataclass
from pathlib import Path

from cockpit.config import ClusterConfig

FILE_NAME = "launched.json"


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
            try:
                out[int(rank)] = LaunchRecord(**rec)  # type: ignore[arg-type]
            except (TypeError, ValueError):
                continue
        return out

    def record(self, rank: int, container_id: str, name: str, target: str) -> LaunchRecord:
        rec = LaunchRecord(rank, container_id, name, target, time.time())
        with self._locked() as data:
            data.setdefault(self.key, {})[str(rank)] = asdict(rec)
        return rec

    def mark_stopped(self, rank: int, container_id: str) -> None:
        with self._locked() as data:
            rec = data.get(self.key, {}).get(str(rank))
            if isinstance(rec, dict) and rec.get("container_id") == container_id:
                rec["stopped_at"] = time.time()

    def owns(self, rank: int, container_id: str) -> bool:
        rec = self.records().get(rank)
        return rec is not None and rec.container_id == container_id
