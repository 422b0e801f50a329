"""A run's directory of records: ``<state dir>/bench/results/<UTC time>/`` (or ``--out DIR``), never
overwritten; never in the current directory unless asked (a checkout would collect untracked runs).

The directory is created by the run and must not exist before; inside it every file is written
atomically (:mod:`cockpit.files`), so a reader never sees half a file, also of a run that was cancelled.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

from cockpit.files import write_atomic
from cockpit.locations import bench_results_dir, state_dir

RESULTS_DIR = Path("bench") / "results"
LATEST = "latest"


class StoreError(Exception):
    """The records' directory cannot be used (it exists, or cannot be made)."""


def default_dir(base: Path | None = None, now: float | None = None) -> Path:
    """``bench/results/<UTC time>`` under ``base`` (default: the state directory, :func:`state_dir`)."""
    stamp = time.strftime("%Y-%m-%dT%H-%M-%SZ", time.gmtime(time.time() if now is None else now))
    return (base or state_dir()) / RESULTS_DIR / stamp


def find_run(given: str) -> Path:
    """An earlier run as ``--compare`` names it: a path that exists as given; else a run's name under
    :func:`bench_results_dir` (``2026-03-14T12-00-00Z``); ``latest``: the newest run there with a
    ``summary.json``. Anything else comes back as given (the reader says what is missing)."""
    path = Path(given).expanduser()
    if path.exists() or path.is_absolute():
        return path
    results = bench_results_dir()
    if given == LATEST:
        runs = sorted(d for d in _runs(results) if (d / "summary.json").is_file())
        return runs[-1] if runs else results / LATEST
    kept = results / path
    return kept if kept.exists() else path


def _runs(results: Path) -> list[Path]:
    try:
        return [d for d in results.iterdir() if d.is_dir()]
    except OSError:
        return []


class RunStore:
    """The records of one run in ``directory`` (created here: an existing one is refused)."""

    def __init__(self, directory: str | Path) -> None:
        self.directory = Path(directory)
        if self.directory.exists():
            raise StoreError(f"{self.directory} exists: a run never overwrites earlier records "
                             "(give another --out DIR)")
        try:
            self.directory.parent.mkdir(parents=True, exist_ok=True)
            self.directory.mkdir()
        except FileExistsError:
            raise StoreError(f"{self.directory} exists: a run never overwrites earlier records") from None
        except OSError as exc:
            raise StoreError(f"{self.directory}: {exc.strerror or exc}") from None

    def write_text(self, name: str, text: str) -> Path:
        return write_atomic(self.directory / name, text, overwrite=True)

    def write_json(self, name: str, data: Any) -> Path:
        return self.write_text(name, json.dumps(data, indent=2, ensure_ascii=False) + "\n")
