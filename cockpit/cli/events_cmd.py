"""`r37-cockpit events`: what happened to the cluster, in order, from its recording (the flight recorder,
`cockpit.recipe.recording`): verdicts, rank conditions, failures with their cause, hosts lost and back,
alerts raised and cleared, who launched, stopped or relaunched, bench runs."""

from __future__ import annotations

import argparse
import time

from cockpit.cli.commands import SUMMARY
from cockpit.cli.common import EXIT_OK, EXIT_USAGE, CliError, add_json, load, print_json, usage_error


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("events", help=SUMMARY["events"],
                       description="The incident timeline: every recorded event of the cluster in time order "
                                   "(recorded while the cockpit, `stats --watch` or `status --watch-engine` "
                                   "runs, and by launch, stop and relaunch). Times: 15m, 2h, 3d (ago), HH:MM "
                                   "(today), YYYY-MM-DD[ HH:MM[:SS]], or seconds since the epoch.")
    p.add_argument("--since", metavar="T", help="only events at or after T")
    p.add_argument("--until", metavar="T", help="only events at or before T")
    p.add_argument("--rank", type=int, metavar="N", help="only rank N's events (and the cluster's own)")
    p.add_argument("--limit", type=int, default=10_000, metavar="N",
                   help="at most N events, the oldest first (default 10000)")
    add_json(p)
    p.set_defaults(func=cmd_events)


def cmd_events(args: argparse.Namespace) -> int:
    from cockpit.recipe.recording import event_line, parse_when, path_for
    from cockpit.safetext import safe
    from cockpit.telemetry.recorder import RecordingUnreadable, read_events

    _, cfg = load(args)
    now = time.time()
    try:
        since = None if args.since is None else parse_when(args.since, now)
        until = None if args.until is None else parse_when(args.until, now)
    except ValueError as exc:
        raise usage_error(str(exc)) from None
    if args.rank is not None and args.rank not in cfg.ranks:
        raise usage_error(f"--rank {args.rank}: the cluster has ranks {', '.join(map(str, cfg.ranks))}")
    if args.limit < 1:
        raise usage_error("--limit must be at least 1")
    path = path_for(cfg)
    try:
        events = read_events(path, since=since, until=until, rank=args.rank, limit=args.limit)
    except FileNotFoundError:
        events = None
    except RecordingUnreadable as exc:
        raise CliError(f"the recording {path} cannot be read: {exc} (the next cockpit that records sets it "
                       "aside and begins a new one)", EXIT_USAGE, "file-corrupt") from None
    if args.json:
        print_json({"ok": True, "cluster": cfg.cluster.name, "recording": str(path),
                    "since": since, "until": until, "rank": args.rank,
                    "events": [e.to_dict() for e in events or ()]})
        return EXIT_OK
    if events is None:
        print(f"no recording of cluster {safe(cfg.cluster.name, 80)} yet ({path}): the cockpit, "
              "`stats --watch` and `status --watch-engine` record while they run")
        return EXIT_OK
    if not events:
        print("no event recorded in that range")
        return EXIT_OK
    for e in events:
        print(safe(event_line(e), 2400))
    return EXIT_OK
