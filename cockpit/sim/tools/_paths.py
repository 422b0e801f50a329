"""Translate host paths the sim owns (`/proc/meminfo`, `/sys/class/infiniband/...`) to the host root."""

from __future__ import annotations

import errno
import glob
import os

from cockpit.sim.tools import _host, _meminfo

MEMINFO = "/proc/meminfo"
IB_PREFIX = "/sys/class/infiniband"


def owned(path: str) -> bool:
    return path in (MEMINFO, IB_PREFIX) or path.startswith(IB_PREFIX + "/")


def expand(path: str) -> list[str]:
    """Owned operands with glob characters are expanded against the host root (the shell could not)."""
    if not owned(path) or not any(c in path for c in "*?["):
        return [path]
    root = _host.root()
    hits = sorted(glob.glob(root + path))
    return [h[len(root) :] for h in hits] or [path]


def _einval_attr(real: str) -> bool:
    """An unused GID's `gid_attrs/{types,ndevs}/N` reads EINVAL in real sysfs."""
    parts = real.split(os.sep)
    if len(parts) < 3 or parts[-3] != "gid_attrs" or parts[-2] not in ("types", "ndevs"):
        return False
    gid = os.path.join(os.sep.join(parts[:-3]), "gids", parts[-1])
    return _host.read_first_line(gid).replace(":", "").strip("0") == ""


def read_owned(path: str) -> bytes:
    """Content of an owned path; raises OSError with the errno the real kernel file would give."""
    if path == MEMINFO:
        return _meminfo.render().encode()
    real = _host.root() + path
    if os.path.isdir(real):
        raise OSError(errno.EISDIR, os.strerror(errno.EISDIR))
    if _einval_attr(real):
        raise OSError(errno.EINVAL, os.strerror(errno.EINVAL))
    with open(real, "rb") as f:
        return f.read()
