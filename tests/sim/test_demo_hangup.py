"""A client that leaves while its command is still being started leaves nothing running on the demo
host: the command gets the hang-up sshd would give it (it used to run on, unread, for the life of the
demo cluster; a killed cockpit left its watchers behind that way)."""

from __future__ import annotations

import asyncio
import re
import signal
import subprocess
import sys
import uuid
from pathlib import Path

import asyncssh
from simcluster import TEST_SPEED, SimCluster

from cockpit.sim.cluster import down


def running(marker: str) -> int:
    res = subprocess.run(["pgrep", "-fc", marker], capture_output=True, text=True, timeout=10)
    return int(res.stdout.strip() or 0)


async def _leave_40_commands(cluster: SimCluster) -> None:
    port = int(re.search(r"Host spark-0\n\s+HostName \S+\n\s+Port (\d+)",
                         (cluster.dir / "ssh_config").read_text()).group(1))  # type: ignore[union-attr]
    marker = f"hangup-{uuid.uuid4().hex}"
    for i in range(40):              # some leave before the command started, some after
        conn = await asyncssh.connect(
            "127.0.0.1", port=port, username="root", client_keys=[str(cluster.dir / "id_ed25519")],
            known_hosts=str(cluster.dir / "known_hosts"))
        await conn.create_session(asyncssh.SSHClientSession, f"while :; do echo {marker}; sleep 1; done")
        await asyncio.sleep(0.002 * (i % 5))
        conn.abort()
    for _ in range(100):
        if running(marker) == 0:
            break
        await asyncio.sleep(0.1)
    assert running(marker) == 0


async def test_commands_of_a_client_that_left_are_hung_up(demo_cluster: SimCluster) -> None:
    await _leave_40_commands(demo_cluster)


async def test_a_demo_started_under_nohup_still_hangs_up_its_commands(tmp_path: Path) -> None:
    """`nohup` (or any parent) ignoring SIGHUP: the ignoring is inherited by every child, so the demo
    host's commands outlived their clients and held the engine's port for the next test. The server
    keeps ignoring hang-ups; its commands get the default disposition, as sshd's do."""
    def ignore_hangups() -> None:
        signal.signal(signal.SIGHUP, signal.SIG_IGN)

    up = subprocess.run([sys.executable, "-m", "cockpit", "sim", "up", "--dir", str(tmp_path), "--speed",
                         str(TEST_SPEED)], capture_output=True, text=True, timeout=120,
                        preexec_fn=ignore_hangups)
    assert up.returncode == 0, up.stderr
    try:
        await _leave_40_commands(SimCluster(tmp_path, tmp_path / "cluster.toml", "demo"))
    finally:
        down(tmp_path)
