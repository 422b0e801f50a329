"""Waiting for a timed child process without rounding its time up.

`Popen.wait(timeout)` (and `subprocess.run(..., timeout=)`) polls with sleeps that double up to 50 ms, so a
child that exits after 50 ms is seen at 63.5 or 113.5 ms: every start-up figure came out as one of those
steps. A blocking wait returns when the child exits; a timer kills it at the deadline instead.
"""

from __future__ import annotations

import subprocess
import threading


def wait_exactly(proc: subprocess.Popen[bytes], timeout: float) -> int:
    """`proc`'s exit status, read the moment it exits; killed (and then reaped) after `timeout` s."""
    timer = threading.Timer(timeout, proc.kill)
    timer.start()
    try:
        return proc.wait()
    finally:
        timer.cancel()
