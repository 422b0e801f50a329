"""`r37-cockpit history` on sessions recorded by real commands against the demo cluster (`hosts` and
`preflight` through the CLI, in a state directory of the test's own), and on damaged files."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from simcluster import SimCluster

from cockpit.cli import main


def cockpit(state: Path, *argv: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "XDG_STATE_HOME": str(state)}
    return subprocess.run([sys.executable, "-m", "cockpit", *argv], capture_output=True, text=True,
                          timeout=timeout, stdin=subprocess.DEVNULL, env=env)


@pytest.fixture(scope="module")
def recorded(demo_cluster: SimCluster, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Two sessions: `hosts`, then `preflight --check arch` (a few seconds on the demo cluster)."""
    state = tmp_path_factory.mktemp("history-state")
    config = str(demo_cluster.config_path)
    assert cockpit(state, "hosts", "--config", config).returncode == 0
    done = cockpit(state, "preflight", "--config", config)
    assert done.returncode in (0, 1), done.stderr
    return state


def history(state: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
            *argv: str) -> str:
    """`r37-cockpit history …` in this process (the recording above went through the real CLI)."""
    monkeypatch.setenv("XDG_STATE_HOME", str(state))
    assert main(["history", *argv]) == 0
    return capsys.readouterr().out


def test_sessions_are_listed_newest_first(recorded: Path, demo_cluster: SimCluster, monkeypatch,
                                          capsys) -> None:
    rows = history(recorded, monkeypatch, capsys).splitlines()
    assert rows[0].split()[:3] == ["session", "started", "command"]
    assert "preflight" in rows[1] and "hosts" in rows[2] and len(rows) == 3

    first, second = json.loads(history(recorded, monkeypatch, capsys, "--json"))["sessions"]
    assert (first["command"], second["command"]) == ("preflight", "hosts")
    assert first["cluster"] == second["cluster"] and first["commands"] > 0
    assert first["config"] == second["config"] == str(demo_cluster.config_path)


def test_one_session_with_filters(recorded: Path, monkeypatch, capsys) -> None:
    out = history(recorded, monkeypatch, capsys, "last").splitlines()
    assert out[0].startswith("session ") and "preflight" in out[0]
    assert out[1].split() == ["time", "rank", "origin", "exit", "duration", "line"]

    data = json.loads(history(recorded, monkeypatch, capsys, "last", "--json", "--rank", "2"))
    commands = data["commands"]
    assert commands and {c["rank"] for c in commands} == {2}
    assert {c["origin"] for c in commands} == {"preflight"}
    assert data["session"]["header"]["command"] == "preflight"

    grep = json.loads(history(recorded, monkeypatch, capsys, "last", "--json", "--grep", "UNAME"))
    assert grep["commands"] and all("uname" in c["line"].lower() for c in grep["commands"])

    older = json.loads(history(recorded, monkeypatch, capsys, "--json"))["sessions"][1]["id"]
    hosts = json.loads(history(recorded, monkeypatch, capsys, older, "--json"))
    assert hosts["session"]["command"] == "hosts"
    assert {c["origin"] for c in hosts["commands"]} <= {"hosts"}


def test_two_clusters_of_the_same_name_are_told_apart_by_their_config(tmp_path: Path, monkeypatch,
                                                                      capsys) -> None:
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path))
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    sessions = tmp_path / "r37-cockpit" / "sessions"
    sessions.mkdir(parents=True)
    for n, config in ((1, tmp_path / "home" / "lab" / "cluster.toml"), (2, Path("/etc/r37/cluster.toml"))):
        (sessions / f"2025010{n}-000000-{n}.jsonl").write_text(json.dumps(
            {"kind": "session", "id": f"2025010{n}-000000-{n}", "command": "status", "cluster": "r37",
             "config": str(config), "started": n}) + "\n")
    assert main(["history"]) == 0
    rows = capsys.readouterr().out.splitlines()
    assert rows[0].split()[:5] == ["session", "started", "command", "cluster", "config"]
    assert "r37" in rows[1] and "/etc/r37/cluster.toml" in rows[1]
    assert "r37" in rows[2] and "~/lab/cluster.toml" in rows[2]
    assert main(["history", "20250101"]) == 0
    assert "status on r37 (~/lab/cluster.toml)," in capsys.readouterr().out


def test_damaged_and_foreign_files_are_skipped_with_a_note(tmp_path: Path, monkeypatch, capsys) -> None:
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path))
    sessions = tmp_path / "r37-cockpit" / "sessions"
    sessions.mkdir(parents=True)
    (sessions / "20250101-000000-1.jsonl").write_text("hello\n")
    (sessions / "20250102-000000-2.jsonl").write_text(
        '{"kind": "session", "id": "20250102-000000-2", "command": "setup", "cluster": "c", "started": 1}\n'
        '{"kind": "cmd", "t": 1, "rank": 0, "line": "df -h \\u001b]52;c;x\\u0007", "exit": 0, '
        '"duration": 0.1, "note": "", "origin": "setup"}\n'
        '{"kind": "cmd", "t": 2, "ra')
    assert main(["history"]) == 0
    out = capsys.readouterr()
    assert "20250102-000000-2" in out.out and "not a cockpit session file" in out.err
    assert main(["history", "20250102"]) == 0
    out = capsys.readouterr()
    assert "df -h ␛]52;c;x␇" in out.out and "\x1b" not in out.out and "incomplete" in out.err
    assert main(["history", "nosuch"]) == 2
    assert main(["history", "--grep", "x"]) == 2
    assert len(list(sessions.iterdir())) == 2   # reading removes nothing


def test_a_deeply_nested_line_is_skipped_with_a_note_not_a_crash(tmp_path: Path, monkeypatch, capsys) -> None:
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path))
    sessions = tmp_path / "r37-cockpit" / "sessions"
    sessions.mkdir(parents=True)
    (sessions / "20250103-000000-3.jsonl").write_text(
        '{"kind": "session", "id": "20250103-000000-3", "command": "stop", "cluster": "c", "started": 1}\n'
        + '{"kind": "cmd", "x": ' + "[" * 100_000 + "\n"
        + '{"kind": "cmd", "t": 1, "rank": 2, "line": "docker stop ds41_r37", "exit": 0, "duration": 0.1}\n')
    assert main(["history"]) == 0
    out = capsys.readouterr()
    assert "20250103-000000-3" in out.out and "Traceback" not in out.err
    assert main(["history", "last"]) == 0
    out = capsys.readouterr()
    assert "docker stop ds41_r37" in out.out
    assert "line 2: not JSON (or nested too deeply): skipped" in out.err
