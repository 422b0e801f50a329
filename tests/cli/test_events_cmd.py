"""`r37-cockpit events` without a cluster: no recording yet, a corrupt recording (an error with its code,
the file left as it is), bad options."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from cockpit.config import load_config
from cockpit.recipe.recording import path_for

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "cluster.toml"


def events(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "XDG_STATE_HOME": str(tmp_path / "state")}
    return subprocess.run([sys.executable, "-m", "cockpit", "--config", str(FIXTURE), "events", *args],
                          capture_output=True, text=True, env=env, timeout=60, stdin=subprocess.DEVNULL)


def test_no_recording_yet_says_so(tmp_path: Path) -> None:
    res = events(tmp_path)
    assert res.returncode == 0 and "no recording of cluster r37-test yet" in res.stdout
    res = events(tmp_path, "--json")
    assert res.returncode == 0 and json.loads(res.stdout)["events"] == []


def test_a_corrupt_recording_is_an_error_and_left_as_it_is(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    path = path_for(load_config(FIXTURE))
    path.parent.mkdir(parents=True)
    path.write_bytes(b"\x1b[31mnot sqlite\n" * 300)
    res = events(tmp_path, "--json")
    assert res.returncode == 2 and json.loads(res.stdout)["error"]["code"] == "file-corrupt"
    assert "cannot be read" in res.stderr and "Traceback" not in res.stderr
    assert path.read_bytes() == b"\x1b[31mnot sqlite\n" * 300


@pytest.mark.parametrize(("args", "said"), [(("--since", "soon"), "not a time"),
                                            (("--rank", "7"), "--rank 7"), (("--limit", "0"), "--limit")])
def test_bad_options_are_usage_errors(tmp_path: Path, args: tuple[str, ...], said: str) -> None:
    res = events(tmp_path, *args)
    assert res.returncode == 2 and said in res.stderr
