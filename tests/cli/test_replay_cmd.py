"""`r37-cockpit replay` refusing bad input, without a cluster and without a traceback: no recording (the
file and what creates it are named), a corrupt recording (set aside, as the recorder does, and said),
`--at` outside the recording (its span is said), a bad --speed."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from replayscene import END, T0, record_scene

from cockpit.config import load_config
from cockpit.recipe.recording import path_for
from cockpit.recipe.replay import stamp

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "cluster.toml"


def replay(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "XDG_STATE_HOME": str(tmp_path / "state")}
    return subprocess.run([sys.executable, "-m", "cockpit", "--config", str(FIXTURE), "replay", *args],
                          capture_output=True, text=True, env=env, timeout=60, stdin=subprocess.DEVNULL)


def recording(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    return path_for(load_config(FIXTURE))


def test_no_recording_names_the_file_and_what_makes_one(tmp_path: Path, monkeypatch) -> None:
    path = recording(tmp_path, monkeypatch)
    res = replay(tmp_path)
    assert res.returncode == 2 and "Traceback" not in res.stderr
    assert f"no recording of cluster r37-test to replay: {path} does not exist" in res.stderr
    assert "stats --watch" in res.stderr


def test_a_corrupt_recording_is_set_aside_and_said(tmp_path: Path, monkeypatch) -> None:
    path = recording(tmp_path, monkeypatch)
    path.parent.mkdir(parents=True)
    junk = b"\x1b[31mnot sqlite\n" * 300
    path.write_bytes(junk)
    res = replay(tmp_path)
    assert res.returncode == 2 and "Traceback" not in res.stderr
    assert "cannot be read" in res.stderr and "set aside as" in res.stderr
    assert not path.exists()
    aside = [p for p in path.parent.iterdir() if p.name.startswith(path.name + ".corrupt-")]
    assert len(aside) == 1 and aside[0].read_bytes() == junk      # kept, never removed
    assert "\x1b" not in res.stderr


def test_at_outside_the_recording_says_its_span(tmp_path: Path, monkeypatch) -> None:
    path = recording(tmp_path, monkeypatch)
    path.parent.mkdir(parents=True)
    record_scene(load_config(FIXTURE), path)
    res = replay(tmp_path, "--at", str(T0 + END + 3600))
    assert res.returncode == 2 and "Traceback" not in res.stderr
    assert "is outside the recording" in res.stderr
    assert f"it spans {stamp(T0)} … {stamp(T0 + END)}" in res.stderr
    res = replay(tmp_path, "--at", "soon")
    assert res.returncode == 2 and "not a time" in res.stderr
    res = replay(tmp_path, "--speed", "0")
    assert res.returncode == 2 and "--speed" in res.stderr
