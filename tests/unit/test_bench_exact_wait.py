"""The benchmarks' wait for a timed child: its own exit status, and a child past the deadline killed
(not waited for forever)."""

from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "perf"))

from exact_wait import wait_exactly


def test_the_exit_status_of_a_child_that_ends() -> None:
    proc = subprocess.Popen([sys.executable, "-c", "raise SystemExit(3)"])
    assert wait_exactly(proc, 60) == 3


def test_a_child_past_its_deadline_is_killed() -> None:
    proc = subprocess.Popen(["sleep", "60"])
    assert wait_exactly(proc, 0.2) == -signal.SIGKILL
