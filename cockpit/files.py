"""Files the cockpit writes on the admin box: atomically, durably, never over an existing file unless asked.

`write_atomic` writes a whole file and `AtomicFile` streams one (a saved log, a log archive). Both write a
temp file beside the target (`create_temp`: the mode less the umask, never through a symlink, a fresh name),
flush and fsync it, then make it the target: renamed over it when `overwrite` is allowed, else hard-linked
to the target's name, which fails if that name exists, so an existing file is never clobbered, not even
one that appears while the temp file is written (FileExistsError). A file system without hard links gets
an existence check and a rename instead. `fsync_dir` makes the rename or link durable; a failed write
leaves no temp file behind.
"""

from __future__ import annotations

import contextlib
import errno
import os
import secrets
from pathlib import Path
from types import TracebackType
from typing import Self


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


def _exists(path: Path) -> FileExistsError:
    return FileExistsError(errno.EEXIST, os.strerror(errno.EEXIST), str(path))


def _check_target(path: Path, *, overwrite: bool = False) -> None:
    """Raise before any write what the final step would refuse: IsADirectoryError for a directory,
    FileExistsError for an existing name (a dangling symlink too) unless `overwrite`."""
    if path.is_dir():
        raise IsADirectoryError(errno.EISDIR, os.strerror(errno.EISDIR), str(path))
    if not overwrite and os.path.lexists(path):
        raise _exists(path)


class AtomicFile:
    """A file being written: a temp file beside `path` that `commit` makes `path` (see the module's doc).

    Leaving the `with` block without a commit (an exception, or no call) removes the temp file.
    """

    def __init__(self, path: str | os.PathLike[str], *, mode: int = 0o666, overwrite: bool = False):
        self.path = Path(path)
        self.overwrite = overwrite
        _check_target(self.path, overwrite=overwrite)
        self.directory = self.path.parent
        fd, self._tmp = create_temp(self.directory, self.path.name, mode)
        self._fh = os.fdopen(fd, "wb")
        self.bytes = 0
        self.committed = False

    def write(self, data: bytes | str) -> None:
        """Append `data` (text is written as UTF-8)."""
        raw = data.encode("utf-8") if isinstance(data, str) else data
        self._fh.write(raw)
        self.bytes += len(raw)

    def commit(self) -> Path:
        """Flush, fsync and close the temp file, then make it `path` (FileExistsError if that name
        exists and overwriting is not allowed: the existing file is left as it was)."""
        self._fh.flush()
        os.fsync(self._fh.fileno())
        self._fh.close()
        if self.overwrite:
            os.replace(self._tmp, self.path)
        else:
            try:
                os.link(self._tmp, self.path)
            except FileExistsError:
                raise _exists(self.path) from None
            except OSError:   # no hard links on this file system: an existence check stands in
                if os.path.lexists(self.path):
                    raise _exists(self.path) from None
                os.replace(self._tmp, self.path)
            else:
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(self._tmp)
        self.committed = True
        fsync_dir(self.directory)
        return self.path

    def discard(self) -> None:
        """Close and remove the temp file (the target is never touched)."""
        with contextlib.suppress(OSError):
            self._fh.close()
        with contextlib.suppress(FileNotFoundError):
            os.unlink(self._tmp)

    def __enter__(self) -> Self:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        if not self.committed:
            self.discard()


def write_atomic(path: str | os.PathLike[str], data: bytes | str, *, mode: int = 0o666,
                 overwrite: bool = False) -> Path:
    """Write the whole file `path` atomically and durably; FileExistsError if it exists and `overwrite`
    is not set (0o600 for a file that may hold anything private: the umask still applies)."""
    with AtomicFile(path, mode=mode, overwrite=overwrite) as out:
        out.write(data)
        return out.commit()
