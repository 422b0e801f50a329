"""`r37-cockpit config …`: check, import and export the cluster configuration."""

from __future__ import annotations

import argparse

from cockpit.cli.common import add_json, load, print_json


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser("config", help="check, import and export cluster.toml")
    s = p.add_subparsers(dest="config_command", metavar="CONFIG_COMMAND", required=True)
    check = s.add_parser("check", help="validate a cluster.toml and print the resolved config")
    check.add_argument("path", nargs="?", default=None)
    add_json(check)
    check.set_defaults(func=cmd_check)


def cmd_check(args: argparse.Namespace) -> int:
    if args.path:
        args.config = args.path
    path, config = load(args)
    if args.json:
        print_json({"path": str(path), "config": config.model_dump()})
    else:
        print(f"{path}: ok — cluster {config.cluster.name}, {len(config.hosts)} hosts")
    return 0
