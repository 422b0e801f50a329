"""`r37-cockpit tui` (the default) and `r37-cockpit demo`."""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

from cockpit.cli.commands import SUMMARY
from cockpit.cli.common import EXIT_REFUSED, CliError, load
from cockpit.cli.sim_cmd import add_hosts, host_count
from cockpit.config import load_config


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("tui", help=SUMMARY["tui"])
    p.set_defaults(func=run_tui, tui=True)
    d = sub.add_parser("demo", help=SUMMARY["demo"],
                       description="Start the simulated cluster (four hosts unless --hosts; no root needed), "
                                   "open the cockpit on it and stop the cluster when the cockpit exits.")
    d.add_argument("--dir", type=Path, default=None, help="cluster directory (default: a temporary one)")
    d.add_argument("--speed", type=float, default=None, help="boot time compression of the simulated engine")
    add_hosts(d)
    d.set_defaults(func=run_demo, tui=True)


def run_tui(args: argparse.Namespace) -> int:
    from cockpit.config.clusters import load_clusters
    from cockpit.tui.app import CockpitApp
    path, config = load(args)
    clusters = load_clusters(getattr(args, "config_files", None) or [])
    CockpitApp(config, path, clusters=clusters, read_only=args.read_only).run()
    return 0


def run_demo(args: argparse.Namespace) -> int:
    from cockpit.sim import cluster
    from cockpit.tui.app import CockpitApp
    n = host_count(args)
    with tempfile.TemporaryDirectory(prefix="r37-demo-") as tmp:
        directory = (args.dir or Path(tmp)).resolve()
        print(f"starting the simulated cluster in {directory} …", flush=True)
        try:
            toml = cluster.demo_up(directory, n=n, **({"speed": args.speed} if args.speed else {}))
        except cluster.DirInUse as exc:
            raise CliError(str(exc), EXIT_REFUSED, "file-exists") from None
        except cluster.SimError as exc:
            raise CliError(str(exc)) from None
        try:
            CockpitApp(load_config(toml), toml, read_only=args.read_only).run()
        finally:
            cluster.down(directory)
    return 0
