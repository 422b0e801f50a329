"""The command log as an audit trail: host-changing sessions (setup, launch, stop, relaunch, ssh) are kept
for the retention period; read-only sessions are bounded apart and never push them out."""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path

from cockpit.cli import _command_log, build_parser
from cockpit.hosts import CommandRecord
from cockpit.recipe import history
from cockpit.recipe.history import SessionLog, find_session, list_sessions, read_session


def rec(line: str) -> CommandRecord:
    return CommandRecord(0, line, time.time(), 0.5, 0, "", "launch")


def _session(directory: Path, command: str, *, changes: bool = False) -> SessionLog:
    log = SessionLog({"command": command}, directory, changes=changes)
    log.record(rec(f"{command} something"))
    log.close()
    assert log.path is not None
    return log


def test_500_read_only_sessions_after_a_launch_keep_the_launch(tmp_path: Path) -> None:
    launch = _session(tmp_path, "launch", changes=True)
    assert launch.path is not None and launch.path.name.endswith(".host.jsonl")
    for _ in range(500):
        _session(tmp_path, "status")
    names = [p.name for p in tmp_path.iterdir()]
    assert launch.path.name in names
    assert len([n for n in names if not n.endswith(".host.jsonl")]) == history.KEEP_SESSIONS
    found = find_session(launch.id, tmp_path)
    assert found is not None and found.host_changing
    assert [e.line for e in found.entries] == ["launch something"]


def test_host_sessions_go_after_the_retention_period_only(tmp_path: Path) -> None:
    old = _session(tmp_path, "stop", changes=True)
    recent = _session(tmp_path, "setup", changes=True)
    assert old.path is not None and recent.path is not None
    forty_days_ago = time.time() - 40 * 86_400
    os.utime(old.path, (forty_days_ago, forty_days_ago))
    log = SessionLog({"command": "status"}, tmp_path, keep_days=30)
    log.record(rec("docker inspect"))
    log.close()
    assert not old.path.exists() and recent.path.exists()
    history.prune(tmp_path, keep_days=50)       # a longer retention keeps what a shorter one would drop
    assert recent.path.exists()


def test_the_tui_marks_its_session_when_a_host_change_is_confirmed(tmp_path: Path) -> None:
    log = SessionLog({"command": "tui"}, tmp_path)
    log.record(rec("docker inspect"))
    assert log.path is not None and not log.path.name.endswith(".host.jsonl")
    log.mark_changes("launch")
    log.record(rec("bash launch-cluster.sh"))
    log.mark_changes("stop")
    log.close()
    assert log.path.name == f"{log.id}.host.jsonl" and log.path.exists()
    found = read_session(log.path)
    assert found is not None and found.changes == ["launch", "stop"] and not found.notes
    assert [e.line for e in found.entries] == ["docker inspect", "bash launch-cluster.sh"]
    sessions, notes = list_sessions(tmp_path)
    assert [s.id for s in sessions] == [log.id] and not notes
    assert find_session(log.id, tmp_path) is not None


def test_a_marked_tui_session_outlives_500_read_only_ones(tmp_path: Path) -> None:
    log = SessionLog({"command": "tui"}, tmp_path)
    log.record(rec("docker inspect"))
    log.mark_changes("shell")
    log.close()
    for _ in range(500):
        _session(tmp_path, "status")
    assert log.path is not None and log.path.exists()


def _args(argv: list[str]) -> argparse.Namespace:
    return build_parser([argv[0]]).parse_args(argv)


def test_headless_host_changing_commands_open_a_host_session() -> None:
    changing = [["launch"], ["launch", "--replace-stopped"], ["stop"], ["setup", "checkpoint"], ["ssh", "0"]]
    reading = [["launch", "--dry-run"], ["status"], ["stats", "--once"], ["preflight"], ["logs"]]
    for argv, expected in [*((a, True) for a in changing), *((a, False) for a in reading)]:
        with _command_log(_args(argv), argv) as log:
            assert isinstance(log, SessionLog) and log.changes is expected, argv
