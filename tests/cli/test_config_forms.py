"""Every `config` subcommand names the cluster.toml the same way: `--config PATH` (before or after the
command) or, the same, a positional PATH; `-o` is `--out`."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from cockpit.cli import main

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "cluster.toml"


@pytest.fixture
def toml(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A valid cluster.toml where default discovery would never look (the cwd is empty)."""
    path = tmp_path / "elsewhere" / "mine.toml"
    path.parent.mkdir()
    shutil.copy(FIXTURE, path)
    (tmp_path / "cwd").mkdir()
    monkeypatch.chdir(tmp_path / "cwd")
    return path


def _forms(sub: list[str], path: Path) -> list[list[str]]:
    return [["config", *sub, str(path)], ["--config", str(path), "config", *sub],
            ["config", *sub, "--config", str(path)]]


def test_check_takes_the_file_every_way(toml: Path, capsys: pytest.CaptureFixture[str]) -> None:
    for argv in _forms(["check"], toml):
        assert main([*argv, "--json"]) == 0, argv
        assert json.loads(capsys.readouterr().out)["path"] == str(toml)
    assert main(["config", "check"]) == 2           # nothing found by discovery in an empty cwd
    capsys.readouterr()


def test_export_env_takes_the_file_every_way(toml: Path, capsys: pytest.CaptureFixture[str]) -> None:
    outputs = set()
    for argv in _forms(["export-env", "--rank", "1"], toml):
        assert main(argv) == 0, argv
        outputs.add(capsys.readouterr().out)
    assert len(outputs) == 1 and "NODE_IPS=(" in outputs.pop()


def test_two_different_files_is_a_usage_error(toml: Path, tmp_path: Path,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    other = tmp_path / "other.toml"
    for sub in (["check"], ["export-env", "--rank", "0"]):
        assert main(["--config", str(other), "config", *sub, str(toml)]) == 2
        assert "two configs given" in capsys.readouterr().err
        assert main(["config", *sub, str(toml), "--config", str(toml)]) == 0   # the same file twice: fine
        capsys.readouterr()


def test_short_out_option_and_the_config_as_import_target(toml: Path, tmp_path: Path,
                                                         capsys: pytest.CaptureFixture[str]) -> None:
    env = tmp_path / "cluster.env"
    assert main(["config", "export-env", str(toml), "--rank", "0", "-o", str(env)]) == 0
    assert "NODE_IPS=(" in env.read_text()
    short = tmp_path / "short.toml"
    assert main(["config", "import-env", str(env), "-o", str(short)]) == 0 and short.is_file()
    target = tmp_path / "named.toml"
    assert main(["--config", str(target), "config", "import-env", str(env)]) == 0   # --config names it
    assert target.is_file() and not Path("cluster.toml").exists()
    assert main(["config", "import-env", str(env), "--config", str(target)]) == 3   # never overwritten
    assert main(["config", "import-env", str(env)]) == 0 and Path("cluster.toml").is_file()   # the default
    capsys.readouterr()
