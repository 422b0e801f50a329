"""Files the cockpit writes on the admin box: created with the umask applied, written durably.

`create_temp` makes the temp file a write starts from (never following a symlink, never reusing a name);
`fsync_dir` makes the rename or link that ends it durable.
"""

from __future__ import annotations

import contextlib
import os
import secrets
from pathlib import Path


def create_temp(directory: Path, name: str, mode: int = 0o666) -> tuple[int, Path]:
    """A new file `.NAME.RANDOM.tmp` in `directory`, opened for writing, created with `mode` and the
    umask applied by the kernel (0o666 gives what any other program's new file would get)."""
    for _ in range(100):
        tmp = directory / f".{name}.{secrets.token_hex(4)}.tmp"
        try:
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, mode)
        except FileExistsError:
            continue
        return fd, tmp
    raise FileExistsError(f"no free temporary name in {directory}")


def fsync_dir(directory: Path) -> None:
    """Make a rename or link in `directory` durable (ignored where a directory cannot be opened)."""
    with contextlib.suppress(OSError):
        fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
