"""`r37-cockpit config …`: check, import and export the cluster configuration. Exit 2 for a bad
cluster.toml or cluster.env (or a rank no host has), 3 when the output file exists and --force was not
given, 1 when the output cannot be written."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from cockpit import configcmd
from cockpit.cli.common import EXIT_FAILURE, EXIT_OK, EXIT_REFUSED, EXIT_USAGE, add_json, load, print_json
from cockpit.safetext import neutralise_block

EXIT_FOR = {configcmd.CONFIG: EXIT_USAGE, configcmd.EXISTS: EXIT_REFUSED, configcmd.IO: EXIT_FAILURE}
CODE_FOR = {configcmd.CONFIG: "config-invalid", configcmd.EXISTS: "file-exists", configcmd.IO: "write-failed"}


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("config", help="check, import and export cluster.toml",
                       description="Check cluster.toml, import the recipe's cluster.env (read, never "
                                   "executed) and export one rank's cluster.env.")
    s = p.add_subparsers(dest="config_command", metavar="CONFIG_COMMAND", required=True)

    check = s.add_parser("check", help="validate a cluster.toml and print the resolved config",
                         description="Validate cluster.toml. Every problem is printed as FILE: KEY: REASON; "
                                     "exit 2 if there is any.")
    check.add_argument("path", nargs="?", default=None, help="cluster.toml (default: discovered)")
    add_json(check)
    check.set_defaults(func=cmd_check)

    imp = s.add_parser("import-env", help="write cluster.toml from the recipe's cluster.env",
                       description="Read a cluster.env WITHOUT executing it (assignments and the NODE_IPS "
                                   "array only; command substitution and expansions are refused) and "
                                   "write cluster.toml. Never overwrites without --force (exit 3).")
    imp.add_argument("env", type=Path, help="the cluster.env to read")
    imp.add_argument("--out", type=Path, default=Path("cluster.toml"), help="default ./cluster.toml")
    imp.add_argument("--force", action="store_true", help="replace an existing output file")
    add_json(imp)
    imp.set_defaults(func=cmd_import)

    exp = s.add_parser("export-env", help="write one rank's cluster.env from cluster.toml",
                       description="Print (or write with --out) one rank's cluster.env, every value quoted "
                                   "safely. Never overwrites without --force (exit 3).")
    exp.add_argument("--rank", type=int, required=True)
    exp.add_argument("--out", type=Path, default=None, help="file to write (default: stdout)")
    exp.add_argument("--force", action="store_true", help="replace an existing output file")
    add_json(exp)
    exp.set_defaults(func=cmd_export)


def _emit(ok: bool, text: str, data: dict, as_json: bool) -> int:
    """Print the result (text neutralised: a path or key of a hostile file may hold escapes)."""
    if as_json:
        if not ok:   # the stable error code beside the kind (cockpit.errorcodes)
            data.setdefault("code", CODE_FOR.get(data.get("error", configcmd.CONFIG), "config-invalid"))
        print_json(data)
    elif ok:
        text = neutralise_block(text)
        print(text, end="" if text.endswith("\n") else "\n")
    else:
        print(neutralise_block(text), file=sys.stderr)
    return EXIT_OK if ok else EXIT_FOR.get(data.get("error", configcmd.CONFIG), EXIT_FAILURE)


def cmd_check(args: argparse.Namespace) -> int:
    ok, text, data = configcmd.check(args.path or args.config)
    return _emit(ok, text, data, args.json)


def cmd_import(args: argparse.Namespace) -> int:
    ok, text, data = configcmd.import_env(args.env, args.out, force=args.force)
    return _emit(ok, text, data, args.json)


def cmd_export(args: argparse.Namespace) -> int:
    _, config = load(args)
    ok, text, data = configcmd.export_env(config, args.rank, args.out, force=args.force)
    return _emit(ok, text, data, args.json)
