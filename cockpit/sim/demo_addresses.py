"""The demo cluster's addresses: one 127.A.B.0/24 block per cluster, never one that another demo
cluster on this machine holds or that a socket here uses.

All of 127/8 is loopback on Linux, so each demo host owns `127.A.B.(10+rank)` and its engine listens on
that address. Two demo clusters given the same block would see each other's engines as their own ports
in use (preflight refuses the launch) or worse. A block is claimed by a file named after it in a
directory of this user's (`claims_dir`), written under a lock and naming the cluster directory; the
claim holds while that cluster's manifest is up and records the block, so a cluster that was removed
or crashed without `sim down` frees its block for the next one.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import random
import secrets
import socket
import struct
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path

BLOCK_KEY = "demo_block"           # the manifest's `extra` key that records a demo cluster's block
TRIES = 200


def claims_dir() -> Path:
    """This user's claims, beside every other temporary file of the machine (not in a state directory
    a test or an operator may point elsewhere: the claims must be one set per machine and user)."""
    path = Path(tempfile.gettempdir()) / f"r37-cockpit-sim-{os.getuid()}"
    path.mkdir(mode=0o700, exist_ok=True)
    return path


def used_blocks(tcp_tables: tuple[str, ...] = ("/proc/net/tcp",)) -> set[str]:
    """Every 127.A.B block a TCP socket of this network namespace uses, at either end."""
    blocks: set[str] = set()
    for table in tcp_tables:
        try:
            rows = Path(table).read_text().splitlines()[1:]
        except OSError:
            continue
        for row in rows:
            for end in row.split()[1:3]:
                ip = socket.inet_ntoa(struct.pack("<I", int(end.split(":")[0], 16)))
                if ip.startswith("127."):
                    blocks.add(ip.rsplit(".", 1)[0])
    return blocks


def block_ips(block: str, n: int) -> list[str]:
    return [f"{block}.{10 + r}" for r in range(n)]


def claim_block(cluster_dir: Path, holds: Callable[[Path, str], bool],
                rng: random.Random | None = None) -> str:
    """Claim a free 127.A.B block for `cluster_dir`; `holds(dir, block)` says whether the cluster in
    `dir` still holds `block` (its manifest is up and records it). Raises RuntimeError if no block was
    free after TRIES picks (thousands of demo clusters would have to run at once)."""
    rng = rng or random.SystemRandom()
    claims = claims_dir()
    busy = used_blocks()
    with _locked(claims):
        for _ in range(TRIES):
            block = f"127.{rng.randint(40, 250)}.{rng.randint(1, 250)}"
            path = claims / block
            if block in busy or (path.exists() and not _stale(path, holds)):
                continue
            tmp = path.with_name(f".{block}.{secrets.token_hex(4)}")
            tmp.write_text(str(cluster_dir))
            tmp.replace(path)
            return block
    raise RuntimeError(f"no free 127.x.y.0/24 block for a demo cluster after {TRIES} tries "
                       f"(claims in {claims})")


def release_block(cluster_dir: Path, block: str) -> None:
    """Remove `block`'s claim if it is `cluster_dir`'s."""
    claims = claims_dir()
    with _locked(claims):
        path = claims / block
        with contextlib.suppress(OSError):
            if path.read_text() == str(cluster_dir):
                path.unlink()


@contextlib.contextmanager
def _locked(claims: Path) -> Iterator[None]:
    """One claim or release at a time among this user's processes (two `sim up` at once)."""
    fd = os.open(claims / ".lock", os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


def _stale(path: Path, holds: Callable[[Path, str], bool]) -> bool:
    try:
        owner = path.read_text()
    except OSError:
        return True
    return not owner or not holds(Path(owner), path.name)
