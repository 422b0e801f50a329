"""Every path the cockpit keeps on the admin box, computed one way (platformdirs: the XDG dirs on Linux).

- config: `$XDG_CONFIG_HOME/r37-cockpit/` (default `~/.config/r37-cockpit/`): the user's `cluster.toml`
  (found after `--config` and `./cluster.toml`, `config_search`) and `themes/`, the user's own themes;
- state: `$XDG_STATE_HOME/r37-cockpit/` (default `~/.local/state/r37-cockpit/`): the launch ledger
  `launched.json`, the logs archived before a relaunch (`archive/`), the UI state `ui.json`, the
  command log of each cockpit session (`sessions/`), the flight recorder's database of each cluster
  (`recordings/`), the benchmark's records (`bench/results/`) and the simulated cluster of
  `r37-cockpit demo` / `sim` (`sim/`).

Each is computed when asked (the environment is read then, so a test that sets `XDG_STATE_HOME` or
`XDG_CONFIG_HOME` gets its own); nothing here creates a directory.
"""

from __future__ import annotations

from pathlib import Path

from platformdirs import user_config_path, user_state_path

APP = "r37-cockpit"
CONFIG_FILE = "cluster.toml"


def config_dir() -> Path:
    """The user's config directory: `$XDG_CONFIG_HOME/r37-cockpit`."""
    return user_config_path(APP)


def user_config_file() -> Path:
    """The user's `cluster.toml`, the last place looked for one."""
    return config_dir() / CONFIG_FILE


def config_search() -> tuple[Path, ...]:
    """Where `cluster.toml` is looked for when `--config` is not given, in order: `./cluster.toml`, then
    the user's."""
    return Path(CONFIG_FILE), user_config_file()


def user_themes_dir() -> Path:
    """Theme files of the user's own, beside the cockpit's: `<config dir>/themes`."""
    return config_dir() / "themes"


def state_dir() -> Path:
    """The user's state directory: `$XDG_STATE_HOME/r37-cockpit`."""
    return user_state_path(APP)


def ledger_file() -> Path:
    """The record of containers this cockpit started (`cockpit.recipe.ledger`)."""
    return state_dir() / "launched.json"


def archive_dir() -> Path:
    """Where a relaunch archives the logs of the stopped containers it removes (cluster key and time
    directories go under it)."""
    return state_dir() / "archive"


def ui_state_file() -> Path:
    """Small per-user UI state, kept apart from cluster.toml (`cockpit.tui.uistate`)."""
    return state_dir() / "ui.json"


def sim_dir() -> Path:
    """The simulated cluster's directory when neither `--dir` nor `R37_SIM_DIR` names one."""
    return state_dir() / "sim"


def sessions_dir() -> Path:
    """The command log: one JSONL file per cockpit session (`cockpit.recipe.history`)."""
    return state_dir() / "sessions"


def recordings_dir() -> Path:
    """The flight recorder: one SQLite database per cluster (`cockpit.telemetry.recorder`)."""
    return state_dir() / "recordings"


def logs_save_dir() -> Path:
    """Where saved log views go unless the operator names another place: `<state dir>/logs`."""
    return state_dir() / "logs"


def bench_results_dir() -> Path:
    """The benchmark's records, one directory per run (`cockpit.bench.store`): `<state dir>/bench/results`."""
    return state_dir() / "bench" / "results"
