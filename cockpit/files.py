"""Files the cockpit reads and writes on the admin box: read bounded, written atomically, durably, never over
an existing file unless asked.

Reading (`read_bounded`, `read_json`, `open_regular`): every local file the cockpit reads (cluster.toml,
the launch ledger, ui.json, theme files, command-log sessions, bench summaries and prompt files, chat
sessions and tools) is opened with O_NONBLOCK and checked with fstat on the open descriptor, so a FIFO,
a device (a link to /dev/zero) or a socket is refused at once instead of hanging or streaming forever; a
directory is IsADirectoryError; the size is capped (one byte over the cap is read, never more); JSON is
parsed with its nesting depth bounded (a RecursionError never escapes). Every refusal is `NotReadable`
with the path and a reason; a missing file stays FileNotFoundError.

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
import json
import os
import secrets
import stat
from pathlib import Path
from types import TracebackType
from typing import IO, Any, Literal, Self

MAX_JSON_DEPTH = 64
"""Nesting any JSON file of the cockpit's needs at most (a ledger: 4; a chat session: about 8)."""


class NotReadable(Exception):
    """A local file that is not what the cockpit reads: `kind` says why (`not-regular`: a FIFO, device or
    socket; `too-large`: over the cap; `malformed`: not UTF-8 / not JSON / nested too deeply / wrong types),
    `reason` says it in words."""

    def __init__(self, path: str | os.PathLike[str], reason: str,
                 kind: Literal["not-regular", "too-large", "malformed"] = "malformed"):
        super().__init__(f"{path}: {reason}")
        self.path = Path(path)
        self.reason = reason
        self.kind = kind


def size_words(n: int) -> str:
    return f"{n >> 20} MiB" if n >= 1 << 20 and n % (1 << 20) == 0 else f"{n >> 10} KiB"


def open_regular(path: str | os.PathLike[str]) -> IO[bytes]:
    """`path` opened for reading in binary, only if it is a regular file (symlinks are followed, and the
    file they reach must be regular). Never waits on a FIFO: NotReadable for one, for a device or a socket;
    IsADirectoryError for a directory; other OSErrors (missing, permission) as they come."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    try:
        mode = os.fstat(fd).st_mode
        if stat.S_ISDIR(mode):
            raise IsADirectoryError(errno.EISDIR, os.strerror(errno.EISDIR), str(path))
        if not stat.S_ISREG(mode):
            raise NotReadable(path, "is not a regular file (a device, FIFO or socket)", "not-regular")
    except BaseException:
        os.close(fd)
        raise
    return os.fdopen(fd, "rb")


def read_bounded(path: str | os.PathLike[str], max_bytes: int) -> bytes:
    """The bytes of the regular file `path`, at most `max_bytes` (NotReadable beyond: only one byte more is
    ever read)."""
    with open_regular(path) as fh:
        raw = fh.read(max_bytes + 1)
    if len(raw) > max_bytes:
        raise NotReadable(path, f"is larger than {size_words(max_bytes)}", "too-large")
    return raw


def json_depth_ok(value: object, max_depth: int = MAX_JSON_DEPTH) -> bool:
    """Whether `value` nests lists and objects at most `max_depth` deep (walked without recursion)."""
    stack: list[tuple[object, int]] = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        children = item.values() if isinstance(item, dict) else item if isinstance(item, list) else None
        if children is None:
            continue
        if depth > max_depth:
            return False
        stack.extend((child, depth + 1) for child in children)
    return True


def loads_bounded(text: str | bytes, max_depth: int = MAX_JSON_DEPTH) -> Any:
    """`json.loads` whose only failure is ValueError: also for nesting deeper than `max_depth` (also one
    deep enough to raise RecursionError inside the parser)."""
    try:
        value = json.loads(text)
    except RecursionError:
        raise ValueError("JSON nested too deeply") from None
    if not json_depth_ok(value, max_depth):
        raise ValueError(f"JSON nested more than {max_depth} deep")
    return value


def read_json(path: str | os.PathLike[str], max_bytes: int, max_depth: int = MAX_JSON_DEPTH) -> Any:
    """A local JSON file read bounded (`read_bounded`) and parsed with its depth bounded; NotReadable for
    anything that is not such a file (not UTF-8, not JSON, too deep, too large, not regular)."""
    raw = read_bounded(path, max_bytes)
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise NotReadable(path, f"is not UTF-8 text (byte {exc.start})") from None
    try:
        return loads_bounded(text, max_depth)
    except ValueError as exc:
        raise NotReadable(path, f"is not JSON ({str(exc)[:120]})") from None


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
