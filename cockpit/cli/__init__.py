"""`r37-cockpit`: the TUI by default, and a headless subcommand for everything the panes do."""

from __future__ import annotations

import argparse
import importlib
import os
import sys
import traceback
from collections.abc import Iterable, Sequence
from contextlib import AbstractContextManager, nullcontext
from types import ModuleType

from cockpit import __version__, startup
from cockpit.cli.commands import COMMANDS
from cockpit.cli.common import (
    EXIT_INTERNAL,
    EXIT_INTERRUPTED,
    EXIT_OK,
    EXIT_USAGE,
    CliError,
    error_json,
    print_json,
    remedy,
)
from cockpit.config.errors import ConfigError
from cockpit.errorcodes import CODES


def command_module(name: str) -> ModuleType:
    """The module that registers and runs command `name` (imported now)."""
    return importlib.import_module(f"cockpit.cli.{COMMANDS[name][0]}")


def build_parser(commands: Iterable[str] | None = None) -> argparse.ArgumentParser:
    """The whole command line; with `commands`, only those commands' modules are imported and registered
    in full, every other command is its name and summary (enough for `--help` and for finding the
    command in argv)."""
    wanted = {COMMANDS[c][0] for c in (COMMANDS if commands is None else commands) if c in COMMANDS}
    parser = argparse.ArgumentParser(
        prog="r37-cockpit",
        description="Operator's cockpit for the R37 DeepSeek-V4.1-Flash deployment on DGX Spark hosts. "
                    "Without a command, opens the TUI.")
    parser.add_argument("--version", action="version", version=f"r37-cockpit {__version__}")
    parser.add_argument("--config", metavar="PATH", action="append", dest="configs",
                        help="cluster.toml (default: ./cluster.toml, then "
                             "$XDG_CONFIG_HOME/r37-cockpit/cluster.toml); give it again for more clusters")
    parser.add_argument("--cluster", metavar="NAME", help=CLUSTER_HELP)
    parser.add_argument("--read-only", action="store_true", help=READ_ONLY_HELP)
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    done: set[str] = set()
    for name, (module, summary) in COMMANDS.items():
        if module not in wanted:
            sub.add_parser(name, help=summary, add_help=False)
        elif module not in done:            # its module registers all of its commands at once
            command_module(name).register(sub)
            done.add(module)
    for child in _subparsers(parser, "--config"):
        child.add_argument("--config", metavar="PATH", action="append", dest="configs_after",
                           default=argparse.SUPPRESS, help="cluster.toml (also accepted before the command)")
    for child in _subparsers(parser, "--cluster"):
        child.add_argument("--cluster", metavar="NAME", default=argparse.SUPPRESS,
                           help="the cluster to use (also accepted before the command)")
    for child in _subparsers(parser, "--read-only"):
        child.add_argument("--read-only", action="store_true", default=argparse.SUPPRESS,
                           help="change no host (also accepted before the command)")
    return parser


def command_of(argv: Sequence[str]) -> str | None:
    """The command `argv` names (None: the default, the TUI), read with the light parser; an argv that
    is wrong before its command is reported here, with argparse's message."""
    args, _rest = build_parser(()).parse_known_args(argv)
    return args.command


CLUSTER_HELP = ("the cluster to use, by its `[cluster] name`: the main cluster.toml's, one in `cluster.d/` "
                "beside it, or another --config's (default: the main one)")

READ_ONLY_HELP = ("change no host: setup, launch, stop and ssh are refused (exit 3) and hidden in the TUI; "
                  "preflight, status, logs, stats, chat and bench still work. `[ui] read_only = true` in "
                  "cluster.toml turns it on as well, and no option turns that off")


def _subparsers(parser: argparse.ArgumentParser, option: str) -> list[argparse.ArgumentParser]:
    """Every parser below this one without `option`, so a global option works after any command as well
    as before it."""
    found = []
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for child in dict.fromkeys(action.choices.values()):
                if not any(option in a.option_strings for a in child._actions):
                    found.append(child)
                found += _subparsers(child, option)
    return found


def _choose_config(args: argparse.Namespace) -> None:
    """`args.config`: the one file this command runs with — the main `--config` (or None: discovery), or
    with `--cluster NAME` the file of that cluster; `args.config_files`: every `--config` given."""
    own = getattr(args, "config", None)             # a subcommand's own --config option, if it has one
    given = [*([own] if isinstance(own, str | os.PathLike) else ()),
             *(getattr(args, "configs", None) or ()), *(getattr(args, "configs_after", None) or ())]
    args.config_files = given
    args.config = given[0] if given else None
    name = getattr(args, "cluster", None)
    if name is not None:
        from cockpit.config.clusters import choose_cluster, load_clusters
        args.config = str(choose_cluster(load_clusters(given), name).path)


# Commands that never reach a host: no command log session (and no SSH stack imported for one).
LOCAL_COMMANDS = frozenset({"config", "sim", "history", "events", "replay", "serve"})


def _command_log(args: argparse.Namespace, argv: list[str]) -> AbstractContextManager[object]:
    """The session file of this command's host commands, which it asks for under its own name (the
    command log, `cockpit.recipe.history`)."""
    if args.command in LOCAL_COMMANDS:
        return nullcontext()
    from cockpit.recipe.history import session
    from cockpit.recipe.readonly import command_change
    return session(args.command, argv, getattr(args, "config", None), __version__,
                   changes=command_change(args.command, vars(args)) is not None)


def main(argv: Sequence[str] | None = None) -> int:
    given = list(argv if argv is not None else sys.argv[1:])
    command = command_of(given)
    parser = build_parser([command or "tui"])
    args = parser.parse_args(given if command else [*given, "tui"])
    want_json = bool(getattr(args, "json", False))
    try:
        _choose_config(args)
        if not getattr(args, "tui", False):     # the TUI turns it on once its first frame is drawn
            startup.end()
        with _command_log(args, given):
            return int(args.func(args) or EXIT_OK)
    except ConfigError as exc:
        print(exc.render(), file=sys.stderr)
        if want_json:
            print_json({**exc.as_json(), "error": {"code": exc.code, "message": exc.render(),
                                                   "remedy": CODES[exc.code].remedy}})
        return EXIT_USAGE
    except CliError as exc:
        message = remedy(args, str(exc))
        print(f"r37-cockpit: {message}", file=sys.stderr)
        if want_json:
            print_json(error_json(exc.code, message))
        return exc.exit_code
    except BrokenPipeError:  # output piped into `head` and the like: stop quietly
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return EXIT_OK
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        if want_json:
            print_json(error_json("interrupted", "interrupted"))
        return EXIT_INTERRUPTED
    except Exception as exc:  # the user gets a sentence, developers a traceback on demand
        if os.environ.get("R37_DEBUG"):
            traceback.print_exc()
        print(f"r37-cockpit: internal error: {type(exc).__name__}: {exc} "
              "(set R37_DEBUG=1 to see the traceback)", file=sys.stderr)
        if want_json:
            print_json(error_json("internal", f"{type(exc).__name__}: {exc}"))
        return EXIT_INTERNAL
