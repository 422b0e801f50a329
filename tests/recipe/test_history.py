"""The session files of the command log: header and records, read while written, the caps, pruning, an
unwritable directory, redaction, and reading back foreign or damaged files."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cockpit.hosts import CommandRecord
from cockpit.recipe import history
from cockpit.recipe.history import SessionLog, find_session, list_sessions, read_session, redact


@pytest.mark.parametrize(("line", "secret"), [
    ("curl -H 'Authorization: Bearer abc.def-123456' http://x", "abc.def-123456"),
    ("huggingface-cli download --token hf_AbCdEf123456 x", "hf_AbCdEf123456"),
    ("HF_TOKEN=hf_zzzzzzzzzz python3 x.py", "hf_zzzzzzzzzz"),
    ("env OPENAI_API_KEY='s3cr3t value' run", "s3cr3t value"),
    ('export R37_API_KEY="k-123"; start', "k-123"),
    ("r37 --api-key=topsecret go", "topsecret"),
    ("tool --hf-token sekrit go", "sekrit"),
    ("curl -H 'x-api-key: abcdef' u", "abcdef"),
    ("echo sk-abcdefghijklmnopqrstu", "sk-abcdefghijklmnopqrstu"),
])
def test_redact_hides_secrets(line: str, secret: str) -> None:
    out = redact(line)
    assert secret not in out and "***" in out


@pytest.mark.parametrize("line", [
    "docker inspect ds41_r37", "ssh -o StrictHostKeyChecking=yes spark-1", "nvidia-smi --query-gpu=name",
    "ls /srv/engram-local/DeepSeek-V4.1-Flash", "cat ~/.cache/huggingface/token | wc -c",
])
def test_redact_leaves_ordinary_lines_alone(line: str) -> None:
    assert redact(line) == line


def rec(rank: int, line: str, status: int | None = 0, note: str = "", duration: float | None = 0.25,
        origin: str = "preflight") -> CommandRecord:
    return CommandRecord(rank, line, 1_700_000_000.0, duration, status, note, origin)


def lines(path: Path) -> list[dict]:
    return [json.loads(x) for x in path.read_text().splitlines()]


def test_header_then_one_flushed_line_per_finished_command(tmp_path: Path) -> None:
    log = SessionLog({"command": "preflight", "argv": "preflight", "config": "c.toml", "version": "1"},
                     tmp_path)
    log.record(rec(0, "uname -m", None, duration=None))      # a run just begun: its end is what counts
    assert log.path is None
    log.record(rec(0, "uname -m"))
    assert log.path is not None and log.path.parent == tmp_path
    log.record(rec(1, "docker inspect x", 1, origin="watcher"))
    log.record(rec(2, "sleep 99", None, "timeout"))
    log.record(rec(3, "docker logs -f x", None, "stream", None))
    log.record(rec(3, "echo HF_TOKEN=hf_secretsecret"))
    header, *cmds = lines(log.path)                             # read while still open: all there
    assert header["kind"] == "session" and header["command"] == "preflight" and header["id"] == log.id
    assert {"started", "pid", "version", "config", "argv"} <= set(header)
    assert [(c["rank"], c["exit"], c["note"], c["origin"]) for c in cmds] == [
        (0, 0, "", "preflight"), (1, 1, "", "watcher"), (2, None, "timeout", "preflight"),
        (3, None, "stream", "preflight"), (3, 0, "", "preflight")]
    assert "hf_secretsecret" not in log.path.read_text()
    log.close()
    found = read_session(log.path)
    assert found is not None and found.failures == 2 and len(found.entries) == 5 and not found.notes
    log.record(rec(0, "uname -r"))      # a fleet still running after the session: no second file
    assert sorted(tmp_path.iterdir()) == [log.path] and read_session(log.path) == found


def test_a_session_read_while_a_line_is_half_written(tmp_path: Path) -> None:
    log = SessionLog({"command": "setup"}, tmp_path)
    log.record(rec(0, "true"))
    assert log.path is not None
    with log.path.open("a") as f:
        f.write('{"kind": "cmd", "t": 1, "ra')                # the writer (or a crash) mid-line
    found = read_session(log.path)
    assert found is not None and [e.line for e in found.entries] == ["true"]
    assert found.notes and "incomplete" in found.notes[0]


def test_caps_on_records_and_line_length(tmp_path: Path) -> None:
    log = SessionLog({"command": "launch"}, tmp_path, max_records=3)
    for i in range(5):
        log.record(rec(0, f"echo {i}"))
    log.close()
    assert log.path is not None
    found = read_session(log.path)
    assert found is not None and [e.line for e in found.entries] == ["echo 0", "echo 1", "echo 2"]
    assert any("not logged" in n for n in found.notes)

    long = SessionLog({"command": "launch"}, tmp_path)
    long.record(rec(0, "x" * (history.MAX_LINE + 500)))
    long.close()
    assert long.path is not None
    (cmd,) = lines(long.path)[1:]
    assert cmd["truncated"] == history.MAX_LINE + 500 and len(cmd["line"]) < history.MAX_LINE + 100
    assert "truncated: 500 more characters" in cmd["line"]


def test_old_sessions_are_pruned_oldest_first(tmp_path: Path) -> None:
    for i in range(5):
        (tmp_path / f"2025010{i}-000000-1.jsonl").write_text("{}\n")
    log = SessionLog({"command": "hosts"}, tmp_path, keep=3)
    log.record(rec(0, "true"))
    log.close()
    names = sorted(p.name for p in tmp_path.iterdir())
    assert names[:2] == ["20250103-000000-1.jsonl", "20250104-000000-1.jsonl"]
    assert len(names) == 3 and log.path is not None and log.path.name in names


def test_an_unwritable_directory_is_a_warning(tmp_path: Path) -> None:
    blocker = tmp_path / "state"
    blocker.write_text("a file where the directory should be")
    warnings: list[str] = []
    log = SessionLog({"command": "hosts"}, blocker / "sessions", on_warning=warnings.append)
    log.record(rec(0, "true"))
    log.record(rec(0, "true"))
    assert log.path is None and log.warning is not None and len(warnings) == 1
    assert "command log not written" in warnings[0]


def test_session_context_warns_on_stderr_and_names_the_command(tmp_path: Path, monkeypatch,
                                                               capsys, fixed_config) -> None:
    from cockpit.hosts import Fleet
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "file"))
    (tmp_path / "file").write_text("")
    with history.session("hosts", ["hosts", "--token", "abc"], "c.toml", "1") as log:
        fleet = Fleet(fixed_config)
        assert history.current() is log
        fleet[0]._record(CommandRecord(0, "true", 1.0, 0.1, 0))
    assert history.current() is None
    assert "warning: command log not written" in capsys.readouterr().err
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "ok"))
    with history.session("hosts", ["hosts", "--token", "abc"], "c.toml", "1") as log:
        Fleet(fixed_config)[2]._record(CommandRecord(2, "true", 1.0, 0.1, 0))
    assert log.path is not None
    header, cmd = lines(log.path)
    assert header["argv"] == "hosts --token ***" and header["config"] == "c.toml"
    assert header["cluster"] == fixed_config.cluster.name and cmd["origin"] == "hosts"


def test_reading_skips_foreign_files_and_lines(tmp_path: Path) -> None:
    (tmp_path / "00000000-000000-1.jsonl").write_text("not json at all\n")
    (tmp_path / "00000000-000001-1.jsonl").write_bytes(b"\xff\xfe\x00binary")
    log = SessionLog({"command": "stats"}, tmp_path)
    log.record(rec(1, "cat /proc/meminfo"))
    assert log.path is not None
    with log.path.open("a") as f:
        f.write('["a list"]\n{"kind": "cmd", "rank": "x"}\nnot json\n')
    log.close()
    sessions, notes = list_sessions(tmp_path)
    assert [s.id for s in sessions] == [log.id] and len(notes) == 2
    assert len(sessions[0].notes) == 3 and len(sessions[0].entries) == 1
    assert find_session("last", tmp_path).id == log.id          # type: ignore[union-attr]
    assert find_session(log.id[:8], tmp_path).id == log.id      # type: ignore[union-attr]
    assert find_session("nope", tmp_path) is None
    assert find_session(log.id, tmp_path).id == log.id          # type: ignore[union-attr]
    assert find_session("0000", tmp_path) is None               # two files begin so: which one?
    assert find_session("00000000-000000-1", tmp_path) is None  # named, but not a session file
