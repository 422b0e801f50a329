"""The launch ledger: a corrupt file is kept aside with a notice (never reset silently); durable writes."""

from __future__ import annotations

import json
import multiprocessing
import os
import stat
from pathlib import Path

import pytest

from cockpit.config import ClusterConfig
from cockpit.errorcodes import CODES
from cockpit.recipe import ledger as ledger_mod
from cockpit.recipe.ledger import Ledger

CID = "a" * 64


def corrupt_copies(path: Path) -> list[Path]:
    return sorted(path.parent.glob(path.name + ".corrupt-*"))


@pytest.mark.parametrize("content", [b'{"r37-abc": {"0": {"rank": 0', b"\xff\xfe not utf-8", b"[1, 2, 3]",
                                     b"", b"null", b"[" * 100_000])
def test_corrupt_ledger_is_kept_aside_with_a_notice(tmp_path: Path, fixed_config: ClusterConfig,
                                                    content: bytes) -> None:
    path = tmp_path / "launched.json"
    path.write_bytes(content)
    ledger = Ledger(fixed_config, path)
    assert ledger.records() == {}
    (aside,) = corrupt_copies(path)
    assert aside.read_bytes() == content                 # every byte kept for the operator to read
    assert not path.exists()
    (notice,) = ledger.pop_warnings()
    assert notice.code == "file-corrupt" and notice.code in CODES
    assert str(path) in notice.message and str(aside) in notice.message
    assert ledger.pop_warnings() == []                   # each notice is given once
    ledger.record(1, CID, "ds41_r37", "spark-1")         # a fresh ledger starts
    assert Ledger(fixed_config, path).owns(1, CID)
    assert corrupt_copies(path) == [aside]


def test_record_on_a_corrupt_ledger_keeps_it_aside_then_writes(tmp_path: Path,
                                                              fixed_config: ClusterConfig) -> None:
    path = tmp_path / "launched.json"
    path.write_text("{ not json")
    ledger = Ledger(fixed_config, path)
    ledger.record(0, CID, "ds41_r37", "spark-0")
    assert ledger.owns(0, CID)
    assert [n.code for n in ledger.warnings] == ["file-corrupt"]
    (aside,) = corrupt_copies(path)
    assert aside.read_text() == "{ not json"
    assert json.loads(path.read_text())[ledger.key]["0"]["container_id"] == CID


def test_an_earlier_corrupt_copy_is_never_overwritten(tmp_path: Path, fixed_config: ClusterConfig) -> None:
    path = tmp_path / "launched.json"
    ledger = Ledger(fixed_config, path)
    for n in range(3):                                   # within one second: same timestamp each time
        path.write_text(f"garbage {n}")
        assert ledger.records() == {}
    copies = corrupt_copies(path)
    assert sorted(p.read_text() for p in copies) == ["garbage 0", "garbage 1", "garbage 2"]
    assert len(ledger.pop_warnings()) == 3


def test_write_is_a_fsynced_rename_of_a_private_file(tmp_path: Path, fixed_config: ClusterConfig,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "state" / "launched.json"
    ledger = Ledger(fixed_config, path)
    ledger.record(0, CID, "ds41_r37", "spark-0")
    before = path.stat().st_ino
    kept = tmp_path / "old-link"
    os.link(path, kept)                 # the old file must stay whole: a rename, not a rewrite
    old_text = kept.read_text()
    synced: list[str] = []
    real_fsync = os.fsync

    def recording_fsync(fd: int) -> None:
        mode = os.fstat(fd).st_mode
        synced.append("dir" if stat.S_ISDIR(mode) else "file")
        real_fsync(fd)

    monkeypatch.setattr(ledger_mod.os, "fsync", recording_fsync)
    ledger.record(1, "b" * 64, "ds41_r37", "spark-1")
    assert synced == ["file", "dir"]                     # the data, then the rename in the directory
    assert path.stat().st_ino != before and kept.read_text() == old_text
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert sorted(p.name for p in path.parent.iterdir()) == ["launched.json", "launched.json.lock"]
    assert set(ledger.records()) == {0, 1}


def _record_many(path: str, rank: int) -> None:
    from cockpit.config import load_config
    cfg = load_config(Path(__file__).resolve().parents[1] / "fixtures" / "cluster.toml")
    led = Ledger(cfg, Path(path))
    for i in range(20):
        led.record(rank, f"{rank:x}{i:063x}", "ds41_r37", f"spark-{rank}")


def test_concurrent_writers_lose_nothing(tmp_path: Path, fixed_config: ClusterConfig) -> None:
    path = tmp_path / "launched.json"
    ctx = multiprocessing.get_context("spawn")
    procs = [ctx.Process(target=_record_many, args=(str(path), r)) for r in range(3)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(120)
        assert p.exitcode == 0
    recs = Ledger(fixed_config, path).records()
    assert {r: recs[r].container_id for r in recs} == {r: f"{r:x}{19:063x}" for r in range(3)}
    assert corrupt_copies(path) == []


def test_a_look_parses_the_file_again_only_when_it_changed(tmp_path: Path, fixed_config: ClusterConfig,
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    """A watcher looks every second per rank: an unchanged file is not parsed again; every write (by this
    ledger, another one, or a corrupt file put in its place) is seen at the next look."""
    path = tmp_path / "launched.json"
    watcher, other = Ledger(fixed_config, path), Ledger(fixed_config, path)
    other.record(0, "a" * 64, "ds41_r37", "spark-0")
    parses: list[int] = []
    real = Ledger._parse

    def counted(self: Ledger) -> dict[str, dict[str, dict[str, object]]]:
        if self is watcher:
            parses.append(1)
        return real(self)

    monkeypatch.setattr(Ledger, "_parse", counted)
    assert watcher.records()[0].container_id == "a" * 64
    assert watcher.records()[0].container_id == "a" * 64 and watcher.pending() == {}
    assert len(parses) == 1                                   # three looks, one parse
    other.record(1, "b" * 64, "ds41_r37", "spark-1")          # another cockpit's write: a new file
    assert sorted(watcher.records()) == [0, 1] and len(parses) == 2
    other.mark_stop_requested([(0, "a" * 64)], at=123.0)
    assert watcher.records()[0].stop_requested_at == 123.0
    path.write_text("{not json")                              # corrupt in place: seen, kept aside
    assert watcher.records() == {}
    assert any(p.name.startswith("launched.json.corrupt-") for p in tmp_path.iterdir())


def test_records_are_made_again_only_when_the_file_changed(tmp_path: Path, fixed_config: ClusterConfig,
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    """A watcher asks for the records once a second per rank: an unchanged file gives the records made
    before; a record written (by this cockpit or another) is in the next answer."""
    ledger = Ledger(fixed_config, tmp_path / "ledger.json")
    ledger.record(1, CID, "ds41_r37", "spark-1")
    made = []
    load = ledger_mod._load
    monkeypatch.setattr(ledger_mod, "_load", lambda cls, rec: made.append(1) or load(cls, rec))
    first = ledger.records()
    assert first[1].container_id == CID and len(made) == 1
    assert ledger.records() == first and len(made) == 1            # unchanged: not made again
    Ledger(fixed_config, tmp_path / "ledger.json").record(2, "b" * 64, "ds41_r37", "spark-2")
    assert sorted(ledger.records()) == [1, 2] and len(made) == 3     # another writer: read again
    ledger.records().pop(1)
    assert sorted(ledger.records()) == [1, 2]                         # a caller's copy, not the cache
