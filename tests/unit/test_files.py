"""cockpit.files: atomic writes that never overwrite unless asked, with the umask's mode, durably."""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path

import pytest

from cockpit import files
from cockpit.files import AtomicFile, write_atomic


def names(directory: Path) -> list[str]:
    return sorted(p.name for p in directory.iterdir())


def mode_of(path: Path) -> int:
    return stat.S_IMODE(path.lstat().st_mode)


def test_write_atomic_private_mode_and_no_overwrite(tmp_path: Path) -> None:
    old = os.umask(0o002)
    try:
        write_atomic(tmp_path / "p", "secret-ish\n", mode=0o600)
    finally:
        os.umask(old)
    assert mode_of(tmp_path / "p") == 0o600
    with pytest.raises(FileExistsError):
        write_atomic(tmp_path / "p", "other\n")
    assert (tmp_path / "p").read_text() == "secret-ish\n"
    assert names(tmp_path) == ["p"]


@pytest.mark.parametrize(("mask", "mode", "expected"), [
    (0o022, 0o666, 0o644), (0o027, 0o666, 0o640), (0o077, 0o666, 0o600), (0o002, 0o666, 0o664),
    (0o002, 0o600, 0o600), (0o000, 0o600, 0o600),
])
def test_new_file_mode_is_mode_less_the_umask(tmp_path: Path, mask: int, mode: int, expected: int) -> None:
    old = os.umask(mask)
    try:
        write_atomic(tmp_path / "new", b"x", mode=mode)
        write_atomic(tmp_path / "replaced", b"old")
        os.chmod(tmp_path / "replaced", 0o606)
        write_atomic(tmp_path / "replaced", b"new", mode=mode, overwrite=True)
    finally:
        os.umask(old)
    assert mode_of(tmp_path / "new") == expected
    assert mode_of(tmp_path / "replaced") == expected      # a new inode: the old mode is not kept


def test_never_overwrites_an_existing_file_or_one_that_appears_while_writing(tmp_path: Path) -> None:
    target = tmp_path / "out.txt"
    target.write_text("theirs\n")
    with pytest.raises(FileExistsError) as info:
        write_atomic(target, "mine\n")
    assert info.value.errno == errno.EEXIST and info.value.filename == str(target)
    late = tmp_path / "late.txt"
    with AtomicFile(late) as out:
        out.write("mine\n")
        late.write_text("someone else's\n")
        with pytest.raises(FileExistsError):
            out.commit()
    assert target.read_text() == "theirs\n" and late.read_text() == "someone else's\n"
    assert names(tmp_path) == ["late.txt", "out.txt"]                     # no temp file left


def test_overwrite_renames_a_new_file_over_the_old_one(tmp_path: Path) -> None:
    target = tmp_path / "state.json"
    write_atomic(target, "one")
    kept = tmp_path / "old-link"
    os.link(target, kept)                      # a reader holding the old file sees it whole
    write_atomic(target, "two", overwrite=True)
    assert target.read_text() == "two" and kept.read_text() == "one"
    assert target.stat().st_ino != kept.stat().st_ino
    assert names(tmp_path) == ["old-link", "state.json"]


def test_a_symlink_at_the_target_is_never_followed(tmp_path: Path) -> None:
    victim = tmp_path / "victim"
    victim.write_text("precious\n")
    link = tmp_path / "link"
    link.symlink_to(victim)
    with pytest.raises(FileExistsError):
        write_atomic(link, "evil\n")
    dangling = tmp_path / "dangling"
    dangling.symlink_to(tmp_path / "nowhere")
    with pytest.raises(FileExistsError):
        write_atomic(dangling, "evil\n")
    assert not (tmp_path / "nowhere").exists()
    write_atomic(link, "replaced\n", overwrite=True)   # the link itself is replaced, not written through
    assert victim.read_text() == "precious\n"
    assert not link.is_symlink() and link.read_text() == "replaced\n"


def test_a_symlink_planted_at_the_temp_name_is_never_followed(tmp_path: Path,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    victim = tmp_path / "victim"
    victim.write_text("precious\n")
    (tmp_path / ".out.aaaa.tmp").symlink_to(victim)        # the name a guessed token would give
    tokens = iter(["aaaa", "bbbb"])
    monkeypatch.setattr(files.secrets, "token_hex", lambda n: next(tokens))
    write_atomic(tmp_path / "out", "mine\n")
    assert victim.read_text() == "precious\n" and (tmp_path / "out").read_text() == "mine\n"
    assert names(tmp_path) == [".out.aaaa.tmp", "out", "victim"]


def test_a_directory_is_refused_before_anything_is_written(tmp_path: Path) -> None:
    (tmp_path / "d").mkdir()
    for overwrite in (False, True):
        with pytest.raises(IsADirectoryError):
            write_atomic(tmp_path / "d", "x", overwrite=overwrite)
    assert names(tmp_path) == ["d"] and names(tmp_path / "d") == []


def test_the_temp_file_is_removed_when_a_write_fails(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(RuntimeError), AtomicFile(tmp_path / "a.log") as out:
        out.write("partial\n")
        raise RuntimeError("stream broke")
    with AtomicFile(tmp_path / "b.log") as out:
        out.write("never committed\n")

    def full(fd: int) -> None:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(files.os, "fsync", full)
    with pytest.raises(OSError, match="No space left"):
        write_atomic(tmp_path / "c.json", "{}")
    assert names(tmp_path) == []


@pytest.mark.parametrize("overwrite", [False, True])
def test_durable_the_data_then_the_directory_are_fsynced(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                          overwrite: bool) -> None:
    synced: list[str] = []
    real_fsync = os.fsync

    def recording_fsync(fd: int) -> None:
        st = os.fstat(fd)
        synced.append("dir" if stat.S_ISDIR(st.st_mode) else f"file:{st.st_size}")
        real_fsync(fd)

    monkeypatch.setattr(files.os, "fsync", recording_fsync)
    write_atomic(tmp_path / "f", b"12345", overwrite=overwrite)
    assert synced == ["file:5", "dir"]                   # the whole data, then the link or rename


def test_without_hard_links_an_existence_check_stands_in(tmp_path: Path,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    def no_links(src: object, dst: object) -> None:
        raise PermissionError(errno.EPERM, os.strerror(errno.EPERM))

    monkeypatch.setattr(files.os, "link", no_links)
    write_atomic(tmp_path / "new", "one")
    assert (tmp_path / "new").read_text() == "one"
    with AtomicFile(tmp_path / "new2") as out:
        out.write("mine")
        (tmp_path / "new2").write_text("theirs")
        with pytest.raises(FileExistsError):
            out.commit()
    assert (tmp_path / "new2").read_text() == "theirs"
    assert names(tmp_path) == ["new", "new2"]


def test_streamed_text_is_utf8_and_counted(tmp_path: Path) -> None:
    with AtomicFile(tmp_path / "s") as out:
        out.write("héllo\n")
        out.write(b"\xff raw\n")
        assert out.commit() == tmp_path / "s"
    assert (tmp_path / "s").read_bytes() == "héllo\n".encode() + b"\xff raw\n"
    assert out.bytes == len("héllo\n".encode()) + 6
