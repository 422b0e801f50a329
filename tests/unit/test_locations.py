"""cockpit.locations: every app path from the XDG variables (as the tests and users set them), one way."""

from __future__ import annotations

from pathlib import Path

import pytest

from cockpit import locations
from cockpit.cli.sim_cmd import default_dir
from cockpit.config import ClusterConfig, ConfigError, discover_config
from cockpit.recipe.ledger import Ledger
from cockpit.recipe.replace import default_archive_root
from cockpit.tui import uistate


@pytest.fixture
def xdg(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, Path]:
    config, state = tmp_path / "config", tmp_path / "state"
    monkeypatch.setenv("XDG_CONFIG_HOME", str(config))
    monkeypatch.setenv("XDG_STATE_HOME", str(state))
    return config, state


def test_xdg_variables_are_honoured(xdg: tuple[Path, Path]) -> None:
    config, state = xdg
    assert locations.config_dir() == config / "r37-cockpit"
    assert locations.user_config_file() == config / "r37-cockpit" / "cluster.toml"
    assert locations.user_themes_dir() == config / "r37-cockpit" / "themes"
    assert locations.config_search() == (Path("cluster.toml"), config / "r37-cockpit" / "cluster.toml")
    assert locations.state_dir() == state / "r37-cockpit"
    assert locations.ledger_file() == state / "r37-cockpit" / "launched.json"
    assert locations.archive_dir() == state / "r37-cockpit" / "archive"
    assert locations.ui_state_file() == state / "r37-cockpit" / "ui.json"
    assert locations.sim_dir() == state / "r37-cockpit" / "sim"
    assert not config.exists() and not state.exists()           # asking never creates a directory


def test_defaults_are_under_home_without_the_variables(tmp_path: Path,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("XDG_CONFIG_HOME")
    monkeypatch.delenv("XDG_STATE_HOME")
    monkeypatch.setenv("HOME", str(tmp_path))
    assert locations.config_dir() == tmp_path / ".config" / "r37-cockpit"
    assert locations.state_dir() == tmp_path / ".local" / "state" / "r37-cockpit"


def test_the_environment_is_read_when_asked(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "one"))
    first = locations.ledger_file()
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "two"))
    assert first == tmp_path / "one" / "r37-cockpit" / "launched.json"
    assert locations.ledger_file() == tmp_path / "two" / "r37-cockpit" / "launched.json"


def test_every_user_of_an_app_path_takes_it_from_locations(xdg: tuple[Path, Path],
                                                            fixed_config: ClusterConfig) -> None:
    _, state = xdg
    assert Ledger(fixed_config).path == state / "r37-cockpit" / "launched.json"
    assert default_archive_root() == state / "r37-cockpit" / "archive"
    assert default_dir() == state / "r37-cockpit" / "sim"
    assert uistate.path() == state / "r37-cockpit" / "ui.json"
    uistate.save({"theme": "light"})
    assert uistate.load() == {"theme": "light"}
    assert (state / "r37-cockpit" / "ui.json").stat().st_mode & 0o777 == 0o600


def test_config_search_order(xdg: tuple[Path, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    config, _ = xdg
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    with pytest.raises(ConfigError) as info:
        discover_config()
    assert info.value.code == "config-missing"
    assert str(config / "r37-cockpit" / "cluster.toml") in info.value.render()
    user = config / "r37-cockpit" / "cluster.toml"
    user.parent.mkdir(parents=True)
    user.write_text("")
    assert discover_config() == user
    (work / "cluster.toml").write_text("")
    assert discover_config() == Path("cluster.toml")
    assert discover_config(tmp_path / "explicit.toml") == tmp_path / "explicit.toml"
