"""The cluster lock without hosts: the holder record, what a look at the lock dir finds (the probe's shell
line run in a real bash on a local directory), the staleness rule and the refusal's wording."""

from __future__ import annotations

import json
import os
import subprocess
import time
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path

import pytest

from cockpit.config import ClusterConfig
from cockpit.hosts import Fleet
from cockpit.recipe import lock as K

T0 = datetime(2026, 12, 1, 10, 31, 2, 250000, tzinfo=UTC)
ALICE = K.Holder(owner="alice", admin_host="admin2", pid=4242, purpose="launch", started_at=T0,
                 heartbeat_at=T0, token="0123456789abcdef0123456789abcdef")
PATH = ".r37-cockpit/locks/ds41_r37.lock"


def record(**changes: object) -> str:
    data = ALICE.to_dict()
    data.update(changes)
    return json.dumps({k: v for k, v in data.items() if v is not None})


# ---- record ---------------------------------------------------------------------------------------------


def test_record_round_trips_and_reads_as_the_brief_says() -> None:
    text = K.record_text(ALICE)
    assert text.endswith("\n")
    assert K.parse_record(text) == ALICE
    d = ALICE.to_dict()
    assert d["started_at"] == "2026-12-01T10:31:02.250Z" and d["heartbeat_at"] == d["started_at"]
    assert {"owner", "admin_host", "pid", "purpose", "started_at", "heartbeat_at", "token",
            "boot_id"} <= set(d)
    booted = replace(ALICE, boot_id="5c1f-boot")
    assert K.parse_record(K.record_text(booted)) == booted
    assert ALICE.describe() == "alice@admin2 (pid 4242), launch since 2026-12-01 10:31:02 UTC"


def test_record_accepts_offsets_naive_times_and_unknown_keys() -> None:
    h = K.parse_record(record(started_at="2026-12-01T11:31:02.25+01:00",
                              heartbeat_at="2026-12-01T10:31:02.25", extra="from a newer cockpit"))
    assert h.started_at == T0 and h.heartbeat_at == T0


@pytest.mark.parametrize(("text", "why"), [
    ("", "not JSON"),
    ("{not json", "not JSON"),
    ("[1, 2]", "not a JSON object"),
    (record(pid=None), "pid"),
    (record(pid=True), "pid"),
    (record(pid=-1), "pid"),
    (record(pid="4242"), "pid"),
    (record(owner=""), "owner"),
    (record(owner="al\x1b[31mice"), "owner"),
    (record(admin_host="x" * 300), "admin_host"),
    (record(purpose="launch; rm -rf /"), "purpose"),
    (record(token="not-hex"), "token"),
    (record(token=None), "token"),
    (record(started_at="yesterday"), "started_at"),
    (record(heartbeat_at=12345), "heartbeat_at"),
    (record(boot_id=7), "boot_id"),
])
def test_garbled_records_are_refused_with_a_reason(text: str, why: str) -> None:
    with pytest.raises(ValueError, match=why):
        K.parse_record(text)


# ---- probe: the real shell line on a local directory ---------------------------------------------------


def probe_here(cwd: Path) -> K.LockProbe:
    marker = "@@lock-test"
    line = str(K.probe_command(PATH, marker))
    out = subprocess.run(["bash", "-c", line], cwd=cwd, capture_output=True, text=True, timeout=10).stdout
    return K.parse_probe(out, marker, PATH)


def test_probe_sees_no_lock(tmp_path: Path) -> None:
    p = probe_here(tmp_path)
    assert not p.exists and p.holder is None and p.age_s is None


def test_probe_reads_holder_inode_and_age_by_the_hosts_clock(tmp_path: Path) -> None:
    d = tmp_path / PATH
    d.mkdir(parents=True)
    (d / K.RECORD_NAME).write_text(K.record_text(ALICE))
    old = os.stat(d).st_mtime - 100
    os.utime(d, (old, old))
    os.utime(d / K.RECORD_NAME, (old + 50, old + 50))
    p = probe_here(tmp_path)
    assert p.exists and p.holder == ALICE and p.problem is None
    assert p.inode == os.stat(d).st_ino
    assert p.age_s is not None and 49 < p.age_s < 55  # the newer of the dir's and the record's mtime
    assert p.same_lock(p) and p.record == K.record_text(ALICE)


def test_probe_of_a_dir_without_a_record_or_with_garbage(tmp_path: Path) -> None:
    d = tmp_path / PATH
    d.mkdir(parents=True)
    p = probe_here(tmp_path)
    assert p.exists and p.missing_record and p.problem == K.NO_RECORD and p.age_s is not None
    (d / K.RECORD_NAME).write_text("{garbage")
    p = probe_here(tmp_path)
    assert p.exists and p.holder is None and p.record == "{garbage"
    assert p.problem == "record garbled: not JSON"
    (d / K.RECORD_NAME).unlink()
    (d / K.RECORD_NAME).mkdir()
    p = probe_here(tmp_path)
    assert p.holder is None and p.record is None and (p.problem or "").startswith("record unreadable")


def test_a_look_that_raced_a_change_is_torn() -> None:
    from cockpit.hosts.shell import sections

    def look(first: str, again: str) -> K.LockProbe:
        line = sections([("now", ["printf", "110.5"]), ("stat", ["printf", first]),
                         ("record", ["printf", K.record_text(ALICE)]), ("again", ["printf", again])], "@@m")
        out = subprocess.run(["bash", "-c", str(line)], capture_output=True, text=True, timeout=10).stdout
        return K.parse_probe(out, "@@m", PATH)

    stat_a = f"5 100.5 {PATH}\n6 101.5 {PATH}/{K.RECORD_NAME}"
    stat_b = f"5 100.5 {PATH}\n7 102.5 {PATH}/{K.RECORD_NAME}"  # a heartbeat renamed a new record in
    p = look(stat_a, stat_b)
    assert p.torn and p.holder == ALICE and p.inode == 5 and p.age_s == pytest.approx(9.0)
    assert not look(stat_a, stat_a).torn
    assert look(stat_a, "").torn  # moved away meanwhile


def test_same_lock_needs_the_same_inode_and_record() -> None:
    a = K.LockProbe(PATH, True, 7, 1.0, "x")
    assert a.same_lock(K.LockProbe("moved", True, 7, 9.0, "x"))
    assert not a.same_lock(K.LockProbe("moved", True, 8, 1.0, "x"))
    assert not a.same_lock(K.LockProbe("moved", True, 7, 1.0, "y"))
    assert not a.same_lock(K.LockProbe("moved", False))


# ---- staleness -----------------------------------------------------------------------------------------


HERE = K.AdminBox("admin1", "boot-1")


def judge(probe: K.LockProbe, here: K.AdminBox = HERE, alive: bool = True) -> str | None:
    return K.stale_reason(probe, stale_after_s=30, here=here, alive=lambda pid: alive)


def held(age: float, holder: K.Holder | None = ALICE, problem: str | None = None) -> K.LockProbe:
    return K.LockProbe(PATH, True, 1, age, "r" if holder else None, holder, problem)


def test_stale_rule() -> None:
    alice_here = K.AdminBox("admin2", None)                          # ALICE's box (her record has no boot)
    assert judge(K.LockProbe(PATH, False)) is None
    assert judge(held(5)) is None                                   # fresh, another admin box
    assert "heartbeat is 31 s old" in (judge(held(31)) or "")        # old heartbeat, wherever it is
    assert judge(held(5), alive=False) is None                       # another box's pid: not judged
    assert "process 4242 on this admin box (admin2)" in (judge(held(5), alice_here, alive=False) or "")
    assert judge(held(5), alice_here, alive=True) is None
    assert judge(held(5, None, "record garbled: not JSON")) is None  # unreadable: held ...
    why = judge(held(31, None, "record garbled: not JSON")) or ""    # ... until its mtime is old
    assert "record garbled" in why and "31 s ago" in why
    assert judge(held(31, None, K.NO_RECORD)) is not None
    assert judge(K.LockProbe(PATH, True, 1, None, None, None, K.NO_RECORD)) is None  # no clock: held


def test_this_box_means_this_hostname_in_this_boot() -> None:
    mine = replace(ALICE, admin_host="admin1", boot_id="boot-1")
    assert HERE.runs(mine)
    assert not HERE.runs(replace(mine, boot_id="boot-0"))      # before a reboot, or a box of the same name
    assert not HERE.runs(replace(mine, boot_id=None))
    assert not HERE.runs(replace(mine, admin_host="admin2"))
    assert judge(held(5, replace(mine, boot_id="boot-0")), alive=False) is None
    box = K.this_box()
    assert box.host and (box.boot_id is None or len(box.boot_id) >= 8)


def test_pid_alive_on_this_box() -> None:
    assert K.pid_alive(os.getpid())
    proc = subprocess.Popen(["true"])
    proc.wait()
    assert not K.pid_alive(proc.pid)
    zombie = subprocess.Popen(["true"])
    for _ in range(200):  # exited but not reaped: a zombie is gone as a lock holder
        with open(f"/proc/{zombie.pid}/stat") as f:
            if f.read().rsplit(")", 1)[1].split()[0] == "Z":
                break
        time.sleep(0.01)
    assert not K.pid_alive(zombie.pid)
    zombie.wait()


# ---- refusal and parameters ----------------------------------------------------------------------------


def test_lock_held_message_names_the_holder_and_how_to_clear() -> None:
    msg = str(K.LockHeld(ALICE, path=PATH, target="spark-0", stale_after_s=30, age_s=2.4))
    assert msg.startswith("refused: another cockpit holds the cluster lock: alice@admin2 (pid 4242), "
                          "launch since 2026-12-01 10:31:02 UTC, last heartbeat 2 s ago; wait for it, or")
    assert "30 s" in msg and "spark-0" in msg and f"rm -r -- {PATH}" in msg
    unknown = str(K.LockHeld(None, path=PATH, target="spark-0", stale_after_s=30, age_s=3,
                             problem="record garbled: not JSON"))
    assert "holder unknown (record garbled: not JSON, changed 3 s ago)" in unknown


def test_unavailable_says_the_action_did_not_proceed() -> None:
    msg = str(K.LockUnavailable("rank 0 (spark-0) is unreachable", "stop"))
    assert "rank 0 (spark-0) is unreachable" in msg and "the stop did not proceed" in msg


def test_lock_path_is_per_container_under_the_login_home(fixed_config: ClusterConfig) -> None:
    assert K.lock_path(fixed_config) == f".r37-cockpit/locks/{fixed_config.cluster.container_name}.lock"
    assert not K.lock_path(fixed_config).startswith(("/", "~"))


def test_parameters_are_checked(fixed_config: ClusterConfig) -> None:
    fleet = Fleet(fixed_config)  # never started: the constructor only checks its arguments
    with pytest.raises(ValueError, match="purpose"):
        K.ClusterLock(fleet, fixed_config, purpose="relaunch")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="twice the heartbeat"):
        K.ClusterLock(fleet, fixed_config, heartbeat_s=5, stale_after_s=8)
    a, b = K.ClusterLock(fleet, fixed_config), K.ClusterLock(fleet, fixed_config, "stop")
    assert a.token != b.token and not a.held and a.taken_over is None


# ---- an interrupted launch (for `status`) -----------------------------------------------------------------


@pytest.mark.parametrize(("held", "holder", "stale", "interrupted"), [
    (True, ALICE, "its process 4242 on this admin box (admin1) is gone", True),
    (True, ALICE, "its last heartbeat is 95 s old (limit 30 s)", True),
    (True, ALICE, None, False),                                   # a live launcher: still launching
    (True, replace(ALICE, purpose="stop"), "its process 4242 on this admin box (admin1) is gone", False),
    (True, None, "record garbled: not JSON, lock last changed 40 s ago (limit 30 s)", False),
    (False, None, None, False),                                   # no lock at all
])
def test_a_launch_lock_whose_holder_is_gone_is_an_interrupted_launch(
        held: bool, holder: K.Holder | None, stale: str | None, interrupted: bool) -> None:
    status = K.LockStatus(PATH, held, holder, 95.0, stale, None)
    found = K.launch_interrupted(status)
    if not interrupted:
        assert found is None
        return
    assert found == f"launch interrupted: the launcher {ALICE.describe()} is gone ({stale})"
    assert "r37-cockpit stop" in K.INTERRUPTED_REMEDY and "--replace-stopped" in K.INTERRUPTED_REMEDY
