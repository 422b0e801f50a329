"""Remedies that quote a cockpit command, made to work as quoted.

A remedy such as "`r37-cockpit setup checkpoint --rank 1` downloads …" is written without knowing which
cluster.toml the operator is using. When that config is not the one default discovery finds
(`./cluster.toml`, then `$XDG_CONFIG_HOME/r37-cockpit/cluster.toml`), the quoted command would act on
another cluster or find none; `cockpit_remedy` rewrites every backtick-quoted `r37-cockpit …` command of
a text to carry `--config PATH`. The CLI (with the `--config` it was given) and the TUI (with
`ctx.config_path`) both show remedies through it; the recipe's own texts stay config-agnostic.
"""

from __future__ import annotations

import os
import re
import shlex
from pathlib import Path

from cockpit.config.errors import ConfigError

PROG = "r37-cockpit"
# commands that read no cluster.toml (or already name one): quoted as they are
NO_CONFIG = ({"demo"}, {"sim"}, {"--config"}, {"--version"}, {"--help"}, {"-h"})
_QUOTED = re.compile(rf"`{re.escape(PROG)} ")


def reads_config(args: str) -> bool:
    """Does `r37-cockpit ARGS` read cluster.toml? Not `demo`, `sim …`, `config import-env`, `--version`,
    nor a command that already names its config."""
    words = args.split()
    if not words or {words[0]} in NO_CONFIG or words[0].startswith("--config="):
        return False
    return words[:2] != ["config", "import-env"]


def _same_file(a: Path, b: Path) -> bool:
    try:
        return os.path.samefile(a, b)
    except OSError:
        return os.path.abspath(a) == os.path.abspath(b)


def config_args(config_path: str | os.PathLike[str] | None) -> list[str]:
    """`["--config", PATH]` when `config_path` is not what default discovery finds, else `[]`. PATH is
    absolute, so the command works from any directory."""
    if config_path is None:
        return []
    path = Path(config_path)
    try:
        from cockpit.config.loading import discover_config  # pydantic: only when a remedy needs it
        found: Path | None = discover_config(None)
    except ConfigError:
        found = None
    if found is not None and _same_file(found, path):
        return []
    return ["--config", os.path.abspath(path)]


def cockpit_command(args: str, config_path: str | os.PathLike[str] | None) -> str:
    """`r37-cockpit ARGS` as the operator can run it with this config (`--config PATH` when needed)."""
    flag = config_args(config_path) if reads_config(args) else []
    if not flag:
        return f"{PROG} {args}"
    return f"{PROG} --config {shlex.quote(flag[1])} {args}"


def cockpit_remedy(text: str, config_path: str | os.PathLike[str] | None) -> str:
    """`text` with `--config PATH` added to every backtick-quoted `r37-cockpit …` command that reads
    cluster.toml, when `config_path` is not what default discovery finds; otherwise `text` unchanged."""
    if not text or f"`{PROG} " not in text:
        return text
    flag = config_args(config_path)
    if not flag:
        return text
    inserted = f"--config {shlex.quote(flag[1])} "

    def add(m: re.Match[str]) -> str:
        quoted = text[m.end():].split("`", 1)[0]
        return m.group(0) + inserted if reads_config(quoted) else m.group(0)

    return _QUOTED.sub(add, text)
