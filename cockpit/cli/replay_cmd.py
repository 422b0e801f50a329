"""`r37-cockpit replay`: open the cockpit read-only on the cluster's recording, with a replay clock
(`cockpit.tui.replay_app`). No SSH connection is made."""

from __future__ import annotations

import argparse
import time
from pathlib import Path
from typing import TYPE_CHECKING

from cockpit.cli.commands import SUMMARY
from cockpit.cli.common import EXIT_OK, EXIT_USAGE, CliError, load, usage_error

if TYPE_CHECKING:
    from cockpit.config import ClusterConfig
    from cockpit.recipe.replay import Replay, ReplayClock

DESCRIPTION = ("Open the cockpit read-only on the cluster's recording (the flight recorder: verdicts, stats, "
               "alerts and events), at a replay time that runs, pauses (space) and moves (left/right 10 s, "
               "shift+left/right 1 min, g: go to a time, +/-: speed). No host is contacted. Times: 15m, 2h, "
               "3d (ago), HH:MM (today), YYYY-MM-DD[ HH:MM[:SS]], or seconds since the epoch.")


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("replay", help=SUMMARY["replay"], description=DESCRIPTION)
    p.add_argument("--at", metavar="T", help="start the replay at T (default: the recording's start)")
    p.add_argument("--speed", type=float, default=1.0, metavar="X",
                   help="recorded seconds per second (default 1)")
    p.add_argument("--paused", action="store_true", help="start paused")
    p.set_defaults(func=cmd_replay, tui=True)


def open_replay(args: argparse.Namespace) -> tuple[Path, ClusterConfig, Replay, ReplayClock]:
    """The config, the recording (a `Replay`) and its clock for these arguments, or a CliError."""
    from cockpit.recipe.recording import parse_when, path_for
    from cockpit.recipe.replay import Replay, ReplayClock, stamp
    from cockpit.telemetry.recorder import RecordingUnreadable, set_aside

    path_, cfg = load(args)
    if not 0 < args.speed <= 3600:
        raise usage_error(f"--speed {args.speed:g}: give a speed above 0 and at most 3600")
    path = path_for(cfg)
    try:
        replay = Replay(path, list(cfg.ranks), cfg.stats.interval_s, cfg.cluster.name,
                        cfg.engine.hang_after_s)
    except FileNotFoundError:
        raise CliError(f"no recording of cluster {cfg.cluster.name} to replay: {path} does not exist (the "
                       "cockpit, `stats --watch` and `status --watch-engine` record while they run, and "
                       "launch / stop note what they do)", EXIT_USAGE, "usage") from None
    except RecordingUnreadable as exc:
        if "newer" in str(exc) or "holds nothing" in str(exc):
            raise CliError(f"the recording {path} cannot be replayed: {exc}", EXIT_USAGE,
                           "file-corrupt" if "newer" in str(exc) else "usage") from None
        try:
            aside = set_aside(path)
        except OSError as err:
            raise CliError(f"the recording {path} cannot be read ({exc}) nor set aside ({err})", EXIT_USAGE,
                           "file-corrupt") from None
        raise CliError(f"the recording {path} cannot be read ({exc}); it was set aside as {aside.name} "
                       "(kept, not removed): nothing to replay; the next cockpit that records begins a "
                       "new one",
                       EXIT_USAGE, "file-corrupt") from None
    start = replay.start
    if args.at is not None:
        try:
            start = parse_when(args.at, time.time())
        except ValueError as exc:
            raise usage_error(f"--at: {exc}") from None
        if not replay.start <= start <= replay.end:
            raise usage_error(f"--at {args.at} ({stamp(start)}) is outside the recording: it spans "
                              f"{stamp(replay.start)} … {stamp(replay.end)}")
    clock = ReplayClock(replay.start, replay.end, start, speed=args.speed, paused=args.paused)
    return path_, cfg, replay, clock


def cmd_replay(args: argparse.Namespace) -> int:
    from cockpit.tui.replay_app import ReplayApp

    path, cfg, replay, clock = open_replay(args)
    ReplayApp(cfg, path, replay, clock).run()
    return EXIT_OK
