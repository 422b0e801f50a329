"""Remedies quote cockpit commands that work: `--config PATH` is added exactly when default discovery
(./cluster.toml, then $XDG_CONFIG_HOME/r37-cockpit/cluster.toml) would not find the config in use."""

from __future__ import annotations

import argparse
import os
import shutil
from pathlib import Path

import pytest

from cockpit.cli.common import remedy
from cockpit.config import ClusterConfig
from cockpit.recipe import checks_host as H
from cockpit.recipe import checks_storage as S
from cockpit.recipe import parsers as P
from cockpit.recipe.checks import Probe, Verdict
from cockpit.remedy import cockpit_command, cockpit_remedy, config_args

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "cluster.toml"
TEXT = ("download it: `r37-cockpit setup checkpoint --rank 1`, then `r37-cockpit preflight`; "
        "never stopped by r37-cockpit itself")


@pytest.fixture
def elsewhere(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A config outside discovery: an empty working directory and an empty XDG config home."""
    work, xdg, conf = tmp_path / "work", tmp_path / "xdg", tmp_path / "clusters" / "lab.toml"
    work.mkdir()
    xdg.mkdir()
    conf.parent.mkdir()
    shutil.copy(FIXTURE, conf)
    monkeypatch.chdir(work)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(xdg))
    return conf


def test_a_config_discovery_would_not_find_is_named(elsewhere: Path) -> None:
    out = cockpit_remedy(TEXT, elsewhere)
    assert out == (f"download it: `r37-cockpit --config {elsewhere} setup checkpoint --rank 1`, then "
                   f"`r37-cockpit --config {elsewhere} preflight`; never stopped by r37-cockpit itself")
    assert cockpit_remedy(out, elsewhere) == out          # already named: left as it is
    assert config_args(elsewhere) == ["--config", str(elsewhere)]


def test_a_relative_path_becomes_absolute_and_odd_paths_are_quoted(elsewhere: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(elsewhere.parent)
    assert cockpit_remedy("`r37-cockpit stop`", "lab.toml") == f"`r37-cockpit --config {elsewhere} stop`"
    spaced = elsewhere.with_name("my lab.toml")
    shutil.copy(elsewhere, spaced)
    assert cockpit_remedy("`r37-cockpit stop`", spaced) == f"`r37-cockpit --config '{spaced}' stop`"
    assert cockpit_command("stop", spaced) == f"r37-cockpit --config '{spaced}' stop"


def test_what_discovery_finds_needs_no_flag(elsewhere: Path) -> None:
    local = Path.cwd() / "cluster.toml"
    shutil.copy(elsewhere, local)
    assert cockpit_remedy(TEXT, local) == TEXT
    assert cockpit_remedy(TEXT, "cluster.toml") == TEXT
    assert cockpit_remedy(TEXT, "./cluster.toml") == TEXT
    assert "--config" in cockpit_remedy(TEXT, elsewhere)      # ./cluster.toml is found first: not this one
    local.unlink()
    user = Path(os.environ["XDG_CONFIG_HOME"]) / "r37-cockpit" / "cluster.toml"
    user.parent.mkdir(parents=True)
    shutil.copy(elsewhere, user)
    assert cockpit_remedy(TEXT, user) == TEXT
    assert cockpit_remedy(TEXT, None) == TEXT                  # no --config given: discovery it is


def test_commands_that_read_no_config_are_left_alone(elsewhere: Path) -> None:
    for text in ("`r37-cockpit demo` runs on a simulated cluster", "`r37-cockpit sim down --dir /tmp/x`",
                 "`r37-cockpit config import-env cluster.env`", "`r37-cockpit --version`",
                 "`r37-cockpit --config other.toml hosts`", "r37-cockpit stop (not quoted)", ""):
        assert cockpit_remedy(text, elsewhere) == text
    assert cockpit_command("demo", elsewhere) == "r37-cockpit demo"


def test_the_cli_names_the_config_it_was_given(elsewhere: Path) -> None:
    assert remedy(argparse.Namespace(config=str(elsewhere)), TEXT) == cockpit_remedy(TEXT, elsewhere)
    assert remedy(argparse.Namespace(config=None), TEXT) == TEXT
    assert remedy(argparse.Namespace(), TEXT) == TEXT


def test_check_remedies_quote_commands_that_work(elsewhere: Path, fixed_config: ClusterConfig) -> None:
    """The recipe's remedies stay config-agnostic; shown through cockpit_remedy they carry --config."""
    missing = P.Section("docker.image", "Error: No such image", 1)
    info = P.Section("docker.info", '{"ServerVersion": "28.3.3", "Runtimes": {"nvidia": {}}}', 0)
    image = H.IMAGE.evaluate(Probe(fixed_config, 2, {"docker.info": info, "docker.image": missing}))
    recipe = S.RECIPE.evaluate(Probe(fixed_config, 1, {}))
    for out in (image, recipe):
        assert out.verdict is not Verdict.PASS and "`r37-cockpit setup " in out.remedy
        shown = cockpit_remedy(out.remedy, elsewhere)
        assert "`r37-cockpit setup " not in shown and f"`r37-cockpit --config {elsewhere} setup " in shown
