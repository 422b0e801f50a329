"""`r37-cockpit demo` on a pseudo-terminal: `q` quits the cockpit and the demo says what it stopped
(the last line is no longer "starting the simulated cluster …")."""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import pty
import re
import struct
import subprocess
import sys
import termios
import threading
import time
from pathlib import Path

from simcluster import TEST_SPEED

from cockpit.sim.cluster import MANIFEST


def test_q_in_the_demo_says_what_it_stopped(tmp_path: Path) -> None:
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 40, 120, 0, 0))
    env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES")}
    directory = tmp_path / "demo"
    proc = subprocess.Popen([sys.executable, "-m", "cockpit", "demo", "--dir", str(directory), "--hosts", "2",
                             "--speed", str(TEST_SPEED)], stdin=slave, stdout=slave, stderr=slave, env=env,
                            start_new_session=True)
    os.close(slave)
    chunks: list[bytes] = []

    def read() -> None:
        while True:
            try:
                data = os.read(master, 65536)
            except OSError:       # EIO: the demo closed the terminal
                return
            if not data:
                return
            chunks.append(data)

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    try:
        deadline = time.monotonic() + 180
        while b"\x1b[?1049h" not in b"".join(chunks):         # the cockpit took the screen
            assert proc.poll() is None and time.monotonic() < deadline, b"".join(chunks)[-2000:]
            time.sleep(0.2)
        while proc.poll() is None and time.monotonic() < deadline:
            time.sleep(3)                                      # let it draw, then quit (again if unheard)
            os.write(master, b"q")
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(5)
        code = proc.wait(30)
    finally:
        proc.kill()
        reader.join(10)
        os.close(master)
    out = b"".join(chunks).decode("utf-8", "replace")
    after = out.rsplit("\x1b[?1049l", 1)[-1]                  # what is printed once the screen is given back
    lines = [line for line in re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", after).splitlines() if line.strip()]
    assert code == 0, out[-2000:]
    assert lines and lines[-1].startswith(f"stopped the simulated cluster in {directory.resolve()}: 2 hosts")
    assert re.search(r": 2 hosts, \d+ process(es)?$", lines[-1]), lines[-1]
    manifest = json.loads((directory / MANIFEST).read_text())
    assert manifest["state"] == "down" and manifest["pids"] == []
