"""`r37-cockpit stats --since`: a recorded window from the cluster's recording (no host asked): every
sample in order, the mean of each --step, one rank, a summary per rank and for the engine, bad options."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from cockpit.config import load_config
from cockpit.recipe.recording import path_for
from cockpit.telemetry.recorder import Recorder

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "cluster.toml"
T0 = float(int(time.time()) // 3600 * 3600 - 7200)      # two hours ago, on the hour


def stats(state: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "XDG_STATE_HOME": str(state)}
    return subprocess.run([sys.executable, "-m", "cockpit", "--config", str(FIXTURE), "stats", *args],
                          capture_output=True, text=True, env=env, timeout=60, stdin=subprocess.DEVNULL)


@pytest.fixture(scope="module")
def state(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A recording of 4 ranks at 1 s for 10 minutes from T0 (rank r's util: its second % 60 + r), and the
    engine at 2 s (even seconds: generated 50 + s % 10, mean 54, max 58)."""
    root = tmp_path_factory.mktemp("state")
    old = os.environ.get("XDG_STATE_HOME")
    os.environ["XDG_STATE_HOME"] = str(root)
    try:
        rec = Recorder(path_for(load_config(FIXTURE))).start()
        for s in range(600):
            for rank in range(4):
                rec.put_sample(T0 + s, rank, {"util": float(s % 60 + rank), "sm_mhz": 2405.0,
                                              "power_w": 30.0 + rank})
            if s % 2 == 0:
                rec.put_engine(T0 + s, {"gen_tps": 50.0 + s % 10, "kv_pct": 10.0})
        rec.close()
    finally:
        if old is None:
            os.environ.pop("XDG_STATE_HOME", None)
        else:
            os.environ["XDG_STATE_HOME"] = old
    return root


def _t(seconds: float) -> str:
    return str(T0 + seconds)


def test_every_sample_of_the_window_in_order(state: Path) -> None:
    res = stats(state, "--since", _t(100), "--until", _t(159), "--json")
    assert res.returncode == 0, res.stderr
    data = json.loads(res.stdout)
    assert set(data["ranks"]) == {"0", "1", "2", "3"} and data["step_s"] is None
    two = data["ranks"]["2"]
    assert [p["t"] for p in two] == [T0 + s for s in range(100, 160)]
    assert [p["util"] for p in two] == [float(s % 60 + 2) for s in range(100, 160)]
    assert len(data["engine"]) == 30
    s2 = data["summary"]["2"]
    assert s2["points"] == 60 and s2["util"]["min"] == 2.0 and s2["util"]["max"] == 61.0
    assert s2["util"]["mean"] == pytest.approx(31.5) and s2["power_w"]["mean"] == 32.0
    assert data["summary"]["engine"]["points"] == 30


def test_steps_average_and_one_rank(state: Path) -> None:
    res = stats(state, "--since", _t(0), "--until", _t(599), "--rank", "1", "--step", "60", "--json")
    data = json.loads(res.stdout)
    assert list(data["ranks"]) == ["1"] and data["step_s"] == 60
    points = data["ranks"]["1"]
    assert [p["t"] for p in points] == [T0 + 60 * i for i in range(10)]
    assert all(p["n"] == 60 and p["util"] == pytest.approx(30.5) for p in points)
    assert list(data["summary"]) == ["1", "engine"]


def test_text_is_a_summary_per_rank(state: Path) -> None:
    res = stats(state, "--since", _t(0), "--until", _t(599))
    assert res.returncode == 0, res.stderr
    lines = res.stdout.splitlines()
    assert lines[0].startswith("recorded stats of cluster r37-test")
    assert "RANK" in lines[1] and "UTIL % mean/max" in lines[1]
    assert lines[2].split()[:3] == ["0", "600", "30/59"]
    assert lines[-1].startswith("engine: 300 points; generated 54.0 tok/s mean, 58.0 max")
    empty = stats(state, "--since", "2001-01-01", "--until", "2001-01-02")
    assert empty.returncode == 0 and "no sample recorded in that range" in empty.stdout


@pytest.mark.parametrize(("args", "said"), [
    (("--until", "1h"), "go with --since"), (("--since", "1h", "--until", "2h"), "before --since"),
    (("--since", "1h", "--step", "0"), "--step"), (("--since", "1h", "--rank", "9"), "--rank 9"),
    (("--since", "1h", "--watch"), "not allowed with"), (("--since", "later"), "not a time")])
def test_bad_options(state: Path, args: tuple[str, ...], said: str) -> None:
    res = stats(state, *args)
    assert res.returncode == 2 and said in res.stderr, res.stderr
