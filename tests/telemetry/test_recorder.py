"""The flight recorder's store: rows committed in batches and read back in order, retention by age and by
size (oldest first), a queue that never blocks, a database killed mid-write (kill -9) that opens with what
was committed, a corrupt one set aside (never reset), one of a newer schema left alone, a full disk."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from cockpit.telemetry.recorder import (
    SAMPLE_COLUMNS,
    Recorder,
    RecordingUnreadable,
    Retention,
    apply_retention,
    open_for_reading,
    open_for_writing,
    read_events,
    read_samples,
    used_bytes,
)

REPO = Path(__file__).resolve().parents[2]


def _count(path: Path, table: str) -> int:
    con = open_for_reading(path)
    try:
        return int(con.execute(f"SELECT count(*) FROM {table}").fetchone()[0])
    finally:
        con.close()


def test_rows_are_committed_and_read_back_in_time_order(tmp_path: Path) -> None:
    path = tmp_path / "r.sqlite3"
    rec = Recorder(path).start()
    t0 = time.time()
    rec.put_event(t0 + 2, "verdict", "cluster down: rank 2 failed", data={"state": "down"})
    rec.put_event(t0 + 1, "failure", "rank 2: NCCL error", rank=2)
    rec.put_event(t0 + 3, "host-lost", "rank 1: host lost", rank=1)
    rec.put_sample(t0, 0, {"util": 97.0, "sm_mhz": 2405.0, "power_w": None})
    assert rec.flush()
    rec.close()
    events = read_events(path)
    assert [e.kind for e in events] == ["failure", "verdict", "host-lost"]
    assert events[1].data == {"state": "down"}
    assert [e.kind for e in read_events(path, rank=2)] == ["failure", "verdict"]  # the cluster's own too
    assert [e.kind for e in read_events(path, since=t0 + 1.5, until=t0 + 2.5)] == ["verdict"]
    [sample] = read_samples(path)
    assert sample["util"] == 97.0 and sample["sm_mhz"] == 2405.0 and sample["power_w"] is None
    assert set(SAMPLE_COLUMNS) <= set(sample)
    con = open_for_reading(path)
    assert con.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    con.close()


def test_commits_are_batched(tmp_path: Path) -> None:
    rec = Recorder(tmp_path / "r.sqlite3", commit_every_s=3600, commit_rows=100).start()
    for i in range(250):
        rec.put_sample(1000.0 + i, 0, {"util": float(i)})
    deadline = time.monotonic() + 30
    while rec.written < 200 and time.monotonic() < deadline:
        time.sleep(0.05)
    time.sleep(0.3)
    assert rec.written == 200 and rec.commits == 2       # two full batches; 50 rows wait for the next
    rec.close()
    assert rec.written == 250 and _count(tmp_path / "r.sqlite3", "samples") == 250


def test_a_full_queue_drops_and_counts_never_blocks(tmp_path: Path) -> None:
    rec = Recorder(tmp_path / "r.sqlite3", max_queue=10)
    t = time.monotonic()
    for i in range(100):
        rec.put_event(float(i), "phase", f"p{i}")
    assert time.monotonic() - t < 5 and rec.dropped == 90
    rec.start()
    rec.close()
    events = read_events(tmp_path / "r.sqlite3")
    assert len([e for e in events if e.kind == "phase"]) == 10
    assert any(e.kind == "recorder" and "90 rows not recorded" in e.summary for e in events)


def test_retention_by_age_then_by_size_oldest_first(tmp_path: Path) -> None:
    path = tmp_path / "r.sqlite3"
    now = time.time()
    rec = Recorder(path, commit_rows=5000, max_queue=50_000).start()
    rec.put_event(now - 40 * 86400, "verdict", "old")
    for i in range(20_000):
        rec.put_sample(now - 20_000 + i, i % 4, {c: 1234.5 + i for c in SAMPLE_COLUMNS})
    rec.close()
    con = open_for_writing(path)
    before = used_bytes(con)
    apply_retention(con, Retention(days=30, max_bytes=before // 2), now)
    assert used_bytes(con) <= before // 2
    oldest_left = con.execute("SELECT min(t) FROM samples").fetchone()[0]
    newest = con.execute("SELECT max(t) FROM samples").fetchone()[0]
    assert newest == now - 1 and oldest_left > now - 20_000      # the oldest went, the newest stayed
    assert con.execute("SELECT count(*) FROM events WHERE summary = 'old'").fetchone()[0] == 0
    con.close()
    assert path.stat().st_size < before          # the freed pages went back to the file system


def test_retention_applies_when_the_writer_opens(tmp_path: Path) -> None:
    path = tmp_path / "r.sqlite3"
    rec = Recorder(path).start()
    rec.put_event(time.time() - 3 * 86400, "verdict", "three days ago")
    rec.put_event(time.time(), "verdict", "now")
    rec.close()
    Recorder(path, Retention(days=1)).start().close()
    assert [e.summary for e in read_events(path) if e.kind == "verdict"] == ["now"]


WRITER = textwrap.dedent("""
    import sys, time
    from pathlib import Path
    from cockpit.telemetry.recorder import Recorder
    rec = Recorder(Path(sys.argv[1]), commit_every_s=0.05, commit_rows=50).start()
    i = 0
    while True:
        for _ in range(20):
            rec.put_sample(time.time(), i % 4, {"util": float(i), "sm_mhz": 2405.0, "power_w": 31.5})
            i += 1
        print(rec.written, flush=True)
        time.sleep(0.002)
""")


def test_kill_9_mid_write_loses_at_most_the_last_batch(tmp_path: Path) -> None:
    path = tmp_path / "r.sqlite3"
    proc = subprocess.Popen([sys.executable, "-c", WRITER, str(path)], stdout=subprocess.PIPE, text=True,
                            cwd=REPO)
    committed = 0
    try:
        assert proc.stdout is not None
        deadline = time.monotonic() + 60
        while committed < 2000 and time.monotonic() < deadline:
            line = proc.stdout.readline()
            assert line, "the writer died on its own"
            committed = int(line)
        assert committed >= 2000
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait(30)
    assert proc.returncode == -signal.SIGKILL
    rows = _count(path, "samples")               # opens, reads: nothing committed was lost
    assert rows >= committed
    con = sqlite3.connect(path)
    assert con.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    con.close()
    rec = Recorder(path).start()                 # the next writer takes it as it is: nothing set aside
    rec.close()
    assert rec.warnings == [] and rec.set_aside_as is None and _count(path, "samples") == rows


def _recording_with_rows(path: Path) -> None:
    rec = Recorder(path).start()
    for i in range(3000):
        rec.put_event(1e9 + i, "phase", "x" * 200)
    rec.close()
    con = sqlite3.connect(path)       # everything into the main file, so damage there is seen
    con.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    con.close()


@pytest.mark.parametrize("damage", ["garbage", "pages"])
def test_a_corrupt_recording_is_set_aside_with_a_warning(tmp_path: Path, damage: str) -> None:
    path = tmp_path / "r.sqlite3"
    if damage == "garbage":
        path.write_bytes(b"this is not a database\n" * 100)
    else:
        _recording_with_rows(path)
        data = bytearray(path.read_bytes())
        for at in range(4096 * 2, len(data) - 4096, 4096 * 3):
            data[at:at + 512] = os.urandom(512)
        path.write_bytes(bytes(data))
    original = path.read_bytes()
    warnings: list[str] = []
    rec = Recorder(path, on_warning=warnings.append).start()
    rec.put_event(time.time(), "verdict", "after")
    rec.close()
    assert rec.set_aside_as is not None and rec.set_aside_as.read_bytes() == original
    assert rec.set_aside_as.name.startswith("r.sqlite3.corrupt-")
    assert len(warnings) == 1 and "set aside" in warnings[0] and warnings[0].startswith("file-corrupt")
    assert [e.summary for e in read_events(path)] == ["after"]


def test_reading_a_corrupt_recording_is_an_error_not_a_reset(tmp_path: Path) -> None:
    path = tmp_path / "r.sqlite3"
    path.write_bytes(b"\0garbage" * 512)
    with pytest.raises(RecordingUnreadable):
        read_events(path)
    assert path.read_bytes() == b"\0garbage" * 512


def test_a_newer_schema_is_left_alone(tmp_path: Path) -> None:
    path = tmp_path / "r.sqlite3"
    con = sqlite3.connect(path)
    con.execute("CREATE TABLE future (x)")
    con.execute("PRAGMA user_version = 99")
    con.commit()
    con.close()
    before = path.read_bytes()
    rec = Recorder(path).start()
    rec.put_event(time.time(), "verdict", "x")
    rec.close()
    assert rec.disabled and "newer" in rec.warnings[0] and rec.set_aside_as is None
    assert path.read_bytes() == before


FULL_DISK = textwrap.dedent("""
    import resource, signal, sys, time
    from pathlib import Path
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    resource.setrlimit(resource.RLIMIT_FSIZE, (300_000, 300_000))
    from cockpit.telemetry.recorder import Recorder
    warnings = []
    rec = Recorder(Path(sys.argv[1]), on_warning=warnings.append, commit_rows=500).start()
    for i in range(20_000):
        rec.put_event(1e9 + i, "phase", "y" * 100)
        if i % 500 == 0:
            rec.flush()
    rec.close()
    print(len(warnings), rec.written, rec.dropped)
    print(warnings[0] if warnings else "")
""")


def test_a_full_disk_is_a_warning_and_recording_goes_on(tmp_path: Path) -> None:
    path = tmp_path / "r.sqlite3"
    res = subprocess.run([sys.executable, "-c", FULL_DISK, str(path)], capture_output=True, text=True,
                         cwd=REPO, timeout=120)
    assert res.returncode == 0, res.stderr
    counts, first = res.stdout.splitlines()[:2]
    warned, written, dropped = map(int, counts.split())
    assert warned >= 1 and first.startswith("write-failed") and dropped > 0 and written > 0
    assert _count(path, "events") >= 1           # what was committed before the disk filled is readable


def test_an_event_replayed_from_a_log_tail_is_written_once(tmp_path: Path) -> None:
    path = tmp_path / "r.sqlite3"
    t0 = time.time() - 100
    for _ in range(2):                              # two watchers, one after the other, read one log tail
        rec = Recorder(path).start()
        rec.put_event(t0, "phase", "rank 2: loading weights", rank=2)
        rec.put_event(t0, "phase", "rank 2: loading weights", rank=2)
        rec.put_event(t0 + 1, "verdict", "cluster ready")
        rec.put_event(t0 + 1, "verdict", "cluster ready")
        rec.close()
    con = open_for_reading(path)
    rows = con.execute("SELECT kind FROM events WHERE kind != 'recorder' ORDER BY t").fetchall()
    con.close()
    assert rows == [("phase",), ("verdict",)]
