"""Processes of the simulated cluster: is one still running, and stopping a group of them for good."""

from __future__ import annotations

import contextlib
import os
import signal
import time


def alive(pid: int) -> bool:
    """True for a running process; gone, a zombie or a bad pid is not alive."""
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass  # it exists, someone else's
    try:
        with open(f"/proc/{pid}/stat") as f:
            state = f.read().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return True  # it answered kill -0; no /proc to say more
    return state not in ("Z", "X")


def reap(pids: list[int]) -> None:
    """Collect those of ``pids`` that are our own exited children, so none lingers as a zombie."""
    for pid in pids:
        with contextlib.suppress(ChildProcessError, OSError):
            os.waitpid(pid, os.WNOHANG)


def _wait_gone(pids: list[int], grace: float) -> None:
    deadline = time.monotonic() + grace
    while time.monotonic() < deadline and any(alive(p) for p in pids):
        reap(pids)
        time.sleep(0.05)


def terminate(pids: list[int], grace: float = 3.0) -> None:
    """SIGTERM, up to ``grace`` s to stop, then SIGKILL for the rest (and up to ``grace`` s more)."""
    for pid in pids:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signal.SIGTERM)
    _wait_gone(pids, grace)
    for pid in pids:
        if alive(pid):
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)
    _wait_gone(pids, grace)
    reap(pids)
