"""`--cluster NAME` and `--config` twice, headless, against the demo cluster: the named cluster's hosts
are the ones reached; an unknown name is a usage error listing the known ones."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest


def pair_of(text: str, name: str) -> str:
    """The demo cluster's config renamed, with its first two hosts only (a TP2 pair)."""
    head, *hosts = text.split("[[hosts]]")
    head = head.replace('name = "sim-demo"', f'name = "{name}"', 1)
    assert f'name = "{name}"' in head
    return "[[hosts]]".join([head, *hosts[:2]])


@pytest.fixture
def place(demo_cluster, tmp_path: Path) -> Path:  # type: ignore[no-untyped-def]
    text = demo_cluster.config_path.read_text()
    (tmp_path / "cluster.toml").write_text(text)
    (tmp_path / "cluster.d").mkdir()
    (tmp_path / "cluster.d" / "pair.toml").write_text(pair_of(text, "pair"))
    return tmp_path


def cockpit(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "cockpit", *args], capture_output=True, text=True,
                          timeout=120, cwd=cwd, env=dict(os.environ))


def ranks(res: subprocess.CompletedProcess[str]) -> list[int]:
    assert res.returncode == 0, res.stdout + res.stderr
    return [h["rank"] for h in json.loads(res.stdout)["hosts"]]


def test_cluster_picks_a_cluster_d_file_before_or_after_the_command(place: Path) -> None:
    assert ranks(cockpit("hosts", "--json", cwd=place)) == [0, 1, 2, 3]        # discovered main file
    assert ranks(cockpit("--cluster", "pair", "hosts", "--json", cwd=place)) == [0, 1]
    assert ranks(cockpit("hosts", "--json", "--cluster", "pair", cwd=place)) == [0, 1]
    assert ranks(cockpit("--cluster", "sim-demo", "hosts", "--json", cwd=place)) == [0, 1, 2, 3]


def test_config_given_twice_names_a_second_cluster(place: Path, tmp_path_factory) -> None:  # type: ignore[no-untyped-def]
    other = tmp_path_factory.mktemp("elsewhere") / "solo.toml"
    other.write_text(pair_of((place / "cluster.toml").read_text(), "elsewhere"))
    (place / "cluster.d" / "pair.toml").unlink()
    args = ("--config", str(place / "cluster.toml"), "--config", str(other))
    assert ranks(cockpit(*args, "hosts", "--json", cwd=place)) == [0, 1, 2, 3]   # the first is the main
    assert ranks(cockpit(*args, "--cluster", "elsewhere", "hosts", "--json", cwd=place)) == [0, 1]


def test_an_unknown_cluster_is_a_usage_error_naming_the_known(place: Path) -> None:
    res = cockpit("--cluster", "nope", "hosts", "--json", cwd=place)
    assert res.returncode == 2
    assert "no cluster named 'nope'" in res.stderr and "pair (" in res.stderr and "sim-demo (" in res.stderr
    assert json.loads(res.stdout)["error"]["code"] == "cluster-unknown"
