"""One exit-code table for every command (cockpit/cli/common.py): the usage, config and refusal cases that
need no host, run in-process."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from cockpit.cli import common, main

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "cluster.toml"


@pytest.fixture
def conf(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    path = tmp_path / "lab.toml"
    shutil.copy(FIXTURE, path)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg"))
    return path


def test_the_table() -> None:
    codes = {"EXIT_OK": 0, "EXIT_FAILURE": 1, "EXIT_USAGE": 2, "EXIT_REFUSED": 3, "EXIT_INTERNAL": 70,
             "EXIT_INTERRUPTED": 130}
    assert {name: getattr(common, name) for name in codes} == codes
    assert common.CliError("x").exit_code == common.EXIT_FAILURE


@pytest.mark.parametrize("argv", [
    ["preflight", "--rank", "9"],
    ["setup", "env", "--rank", "9", "--yes"],
    ["logs", "--rank", "9"],
    ["config", "export-env", "--rank", "9"],
], ids=lambda a: a[0])
def test_a_rank_no_host_has_is_a_usage_error_everywhere(conf: Path, argv: list[str],
                                                        capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--config", str(conf), *argv]) == common.EXIT_USAGE
    err = capsys.readouterr().err
    assert "rank 9" in err and "Traceback" not in err


@pytest.mark.parametrize("argv", [
    ["preflight", "--only", "nope"],
    ["logs", "--since", "yesterday"],
    ["logs", "--tail", "-1"],
    ["logs", "--grep", "("],
], ids=lambda a: " ".join(a))
def test_bad_options_are_usage_errors(conf: Path, argv: list[str]) -> None:
    assert main(["--config", str(conf), *argv]) == common.EXIT_USAGE


def test_argparse_errors_and_a_missing_config_are_usage_errors(tmp_path: Path,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(SystemExit) as exc:
        main(["preflight", "--rank", "one"])
    assert exc.value.code == common.EXIT_USAGE
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg"))
    assert main(["preflight"]) == common.EXIT_USAGE
    broken = tmp_path / "broken.toml"
    broken.write_text("[cluster]\nnmae = 'x'\n")
    assert main(["config", "check", str(broken)]) == common.EXIT_USAGE


def test_an_existing_output_without_force_is_refused(conf: Path, tmp_path: Path) -> None:
    out = tmp_path / "cluster.env"
    assert main(["--config", str(conf), "config", "export-env", "--rank", "0", "--out", str(out)]) == 0
    before = out.read_text()
    assert main(["--config", str(conf), "config", "export-env", "--rank", "0", "--out", str(out)]) \
        == common.EXIT_REFUSED
    assert main(["config", "import-env", str(out), "--out", str(conf)]) == common.EXIT_REFUSED
    assert out.read_text() == before
    assert main(["config", "import-env", str(tmp_path / "missing.env"), "--out", "x.toml"]) \
        == common.EXIT_USAGE
    assert main(["--config", str(conf), "config", "export-env", "--rank", "0", "--out",
                 str(tmp_path / "no-such-dir" / "cluster.env")]) == common.EXIT_FAILURE


def test_error_messages_quote_commands_with_the_config_given(conf: Path,
                                                             capsys: pytest.CaptureFixture[str],
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    from cockpit.cli import preflight_cmd

    def refuse(args):  # type: ignore[no-untyped-def]
        raise common.CliError("run `r37-cockpit setup env --rank 1` first", common.EXIT_REFUSED)

    monkeypatch.setattr(preflight_cmd, "run", refuse)
    assert main(["--config", str(conf), "preflight"]) == common.EXIT_REFUSED
    assert f"`r37-cockpit --config {conf} setup env --rank 1`" in capsys.readouterr().err
