"""A client that leaves while its command is still being started leaves nothing running on the demo
host: the command gets the hang-up sshd would give it (it used to run on, unread, for the life of the
demo cluster; a killed cockpit left its watchers behind that way)."""

from __future__ import annotations

import asyncio
import re
import subprocess
import uuid

import asyncssh
from simcluster import SimCluster


def running(marker: str) -> int:
    res = subprocess.run(["pgrep", "-fc", marker], capture_output=True, text=True, timeout=10)
    return int(res.stdout.strip() or 0)


async def test_commands_of_a_client_that_left_are_hung_up(demo_cluster: SimCluster) -> None:
    port = int(re.search(r"Host spark-0\n\s+HostName \S+\n\s+Port (\d+)",
                         (demo_cluster.dir / "ssh_config").read_text()).group(1))  # type: ignore[union-attr]
    marker = f"hangup-{uuid.uuid4().hex}"
    for i in range(40):              # some leave before the command started, some after
        conn = await asyncssh.connect(
            "127.0.0.1", port=port, username="root", client_keys=[str(demo_cluster.dir / "id_ed25519")],
            known_hosts=str(demo_cluster.dir / "known_hosts"))
        await conn.create_session(asyncssh.SSHClientSession, f"while :; do echo {marker}; sleep 1; done")
        await asyncio.sleep(0.002 * (i % 5))
        conn.abort()
    for _ in range(100):
        if running(marker) == 0:
            break
        await asyncio.sleep(0.1)
    assert running(marker) == 0
