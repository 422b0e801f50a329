"""vLLM-style log lines: `(Proc pid=N) LEVEL MM-DD HH:MM:SS [file.py:line] message`.

INFO/WARNING/ERROR lines go to stdout (vLLM's logging handler); tracebacks and progress bars to stderr.
The container shim timestamps each line.
"""

from __future__ import annotations

import os
import sys
import time
from typing import TextIO


class VLog:
    """A logger for one process role (APIServer, EngineCore_DP0, Worker_TP1, ...)."""

    def __init__(self, out: TextIO | None = None, err: TextIO | None = None) -> None:
        self.out = out or sys.stdout
        self.err = err or sys.stderr
        self.pid = os.getpid()

    def line(self, proc: str | None, level: str, where: str, msg: str) -> None:
        stamp = time.strftime("%m-%d %H:%M:%S")
        prefix = f"({proc} pid={self._pid(proc)}) " if proc else ""
        stream = self.out
        for text in msg.splitlines() or [""]:
            stream.write(f"{prefix}{level} {stamp} [{where}] {text}\n")
        stream.flush()

    def _pid(self, proc: str | None) -> int:
        offsets = {"APIServer": 0, "EngineCore_DP0": 71}
        if proc and proc.startswith("Worker_TP"):
            return self.pid + 140
        return self.pid + offsets.get(proc or "", 0)

    def raw(self, text: str, err: bool = True) -> None:
        """Unprefixed lines (tracebacks, tqdm progress bars)."""
        stream = self.err if err else self.out
        stream.write(text if text.endswith("\n") else text + "\n")
        stream.flush()

    def uvicorn(self, text: str) -> None:
        """A line of uvicorn's own logger in the API server process: `INFO:     text` (vLLM 0.32 tags no
        process on uvicorn's lines)."""
        self.raw(f"INFO:     {text}", err=False)


def progress(label: str, done: int, total: int, elapsed: float) -> str:
    """A tqdm-like progress line as vLLM prints for checkpoint shards and CUDA graph capture."""
    pct = int(100 * done / total) if total else 100
    rate = elapsed / done if done else 0.0
    left = rate * (total - done)

    def mmss(s: float) -> str:
        s = int(s)
        return f"{s // 60:02d}:{s % 60:02d}"

    rate_txt = f"{rate:5.2f}s/it" if done else "?it/s"
    eta = mmss(left) if done else "?"
    return f"{label}: {pct:3d}% Completed | {done}/{total} [{mmss(elapsed)}<{eta}, {rate_txt}]"
