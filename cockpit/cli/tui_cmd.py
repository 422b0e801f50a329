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
            print(stopped_line(directory, n, cluster.down(directory), temporary=args.dir is None), flush=True)
    return 0


def stopped_line(directory: Path, hosts: int, stopped: list[str], *, temporary: bool) -> str:
    """What the demo stopped when the cockpit exited (`cockpit.sim.cluster.down`'s list), in one line
    (and a line per file it kept)."""
    from cockpit.safetext import safe
    kept = [s for s in stopped if s.startswith("kept ")]
    processes = [s for s in stopped if "process " in s]
    text = (f"stopped the simulated cluster in {safe(str(directory))}: {hosts} hosts, "
            f"{len(processes)} process{'' if len(processes) == 1 else 'es'}"
            + ("; its temporary directory is removed" if temporary else ""))
    return "\n".join([text, *(f"  {safe(k)}" for k in kept)])
