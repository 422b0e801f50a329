"""`r37-cockpit logs`: the container log of every rank (or one), merged by timestamp, headless.

Prints `RANK  TIMESTAMP  LINE` (RFC3339Nano, UTC). With `--follow` it keeps streaming until every
followed container stops (a lost host is waited for and resumed without duplicates); lines of different
ranks are held for a short window so they come out in timestamp order. `--json` prints one JSON object
per line (JSON Lines): `{"rank", "time", "ts_ns", "text"}` for log lines and `{"rank", "event",
"detail"}` for follower events.
"""

from __future__ import annotations

import argparse
import asyncio
import heapq
import json
import os
import re
import sys
import time
from collections.abc import AsyncIterator

from cockpit.cli.commands import SUMMARY
from cockpit.cli.common import EXIT_FAILURE, EXIT_OK, add_json, check_ranks, load, run_async, usage_error
from cockpit.config import ClusterConfig
from cockpit.hosts import Fleet
from cockpit.safetext import neutralise, safe
from cockpit.telemetry.logfilter import SEPARATOR, FilterError, LineFilter, StreamFilter, is_probe_line
from cockpit.telemetry.logfollow import FollowEvent, follow
from cockpit.telemetry.logline import LogLine, format_line, format_timestamp

REORDER_WINDOW = 0.3  # seconds a followed line waits for older lines of other ranks
_SINCE = re.compile(
    r"(?:\d+(?:\.\d+)?(?:ns|us|µs|ms|s|m|h))+"                      # Go duration: 10m, 1h30m, 90s
    r"|\d+(?:\.\d+)?"                                                # Unix time
    r"|\d{4}-\d{2}-\d{2}(?:T\d{2}:\d{2}(?::\d{2}(?:\.\d{1,9})?)?(?:Z|[+-]\d{2}:\d{2})?)?")  # RFC 3339


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("logs", help=SUMMARY["logs"],
                       description="Print `docker logs -t` of the R37 container on every rank (or one), "
                                   "merged by timestamp as `RANK  TIMESTAMP  LINE`. Read-only. Exit 1 if "
                                   "a rank could not be read, 2 for a bad option or --rank.")
    p.add_argument("--rank", type=int, default=None, help="only this rank")
    p.add_argument("-f", "--follow", action="store_true",
                   help="keep streaming until the containers stop (survives a host reconnect)")
    p.add_argument("--since", metavar="WHEN",
                   help="only lines since WHEN: a duration (10m, 1h30m), a Unix time or an RFC 3339 time")
    p.add_argument("-n", "--tail", type=int, metavar="N", help="only the last N lines of each rank")
    p.add_argument("--grep", metavar="RE",
                   help="only lines matching the regex (a leading ! keeps the lines that do not match)")
    p.add_argument("-C", "--context", type=int, default=0, metavar="N",
                   help="with --grep: N lines of context around each match")
    p.add_argument("--probes", action="store_true",
                   help="keep the engine's access-log lines of the cockpit's own probes (GET ...?r37-cockpit="
                        "probe), dropped by default as in the Logs pane")
    p.add_argument("--timeout", type=float, default=None,
                   help="seconds to wait for the hosts to connect (default: ssh.connect_timeout + 2)")
    add_json(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    _, config = load(args)
    check_ranks(config, [args.rank] if args.rank is not None else None)
    if args.since and not _SINCE.fullmatch(args.since):
        raise usage_error(f"--since {args.since!r}: give a duration (10m, 1h30m), a Unix time or an RFC 3339 "
                          "time (2026-11-29T22:59:17Z)")
    if args.tail is not None and args.tail < 0:
        raise usage_error("--tail must be 0 or more")
    if args.context < 0:
        raise usage_error("--context must be 0 or more")
    flt = None
    if args.grep:
        try:
            flt = LineFilter.parse(args.grep)
        except FilterError as exc:
            raise usage_error(f"--grep: {exc}") from None
    printer = Printer(json_out=args.json, flt=flt, context=args.context, probes=args.probes)
    ranks = [args.rank] if args.rank is not None else list(config.ranks)
    timeout = args.timeout if args.timeout is not None else config.ssh.connect_timeout + 2
    try:
        failed = run_async(stream_logs(config, ranks, printer, follow_=args.follow, since=args.since,
                                       tail=args.tail, timeout=timeout))
    except BrokenPipeError:  # `logs | head`: the reader has what it wanted
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return EXIT_OK
    return EXIT_FAILURE if failed else EXIT_OK


class Printer:
    """Writes lines (optionally filtered, with context) and follower events to stdout/stderr."""

    def __init__(self, *, json_out: bool, flt: LineFilter | None, context: int, probes: bool = False):
        self.json_out = json_out
        self.grep = StreamFilter(flt, context) if flt is not None else None
        self.probes = probes

    def lines(self, lines: list[LogLine]) -> None:
        out = sys.stdout
        if not self.probes:
            lines = [line for line in lines if not is_probe_line(line.text)]
        entries = self.grep.feed(lines) if self.grep else [(line, 0) for line in lines]
        for line, kind in entries:
            if kind == SEPARATOR or line is None:
                if not self.json_out:
                    out.write("--\n")
            elif self.json_out:
                out.write(json.dumps({"rank": line.rank, "time": format_timestamp(line.ts), "ts_ns": line.ts,
                                      "text": line.text}) + "\n")
            else:   # the follower neutralised the text; neutralise() returns a clean line as it is
                out.write(neutralise(format_line(line)) + "\n")
        out.flush()

    def event(self, ev: FollowEvent) -> None:
        if ev.state == "following":
            return
        if self.json_out:
            sys.stdout.write(json.dumps({"rank": ev.rank, "event": ev.state, "detail": ev.detail}) + "\n")
            sys.stdout.flush()
        elif ev.state != "ended":
            print(f"r37-cockpit: rank {ev.rank}: {ev.state}" + (f" ({safe(ev.detail)})" if ev.detail else ""),
                  file=sys.stderr)


async def stream_logs(config: ClusterConfig, ranks: list[int], printer: Printer, *, follow_: bool,
                      since: str | None, tail: int | None, timeout: float) -> list[int]:
    """Run the followers of `ranks` and print in timestamp order; returns the ranks that failed."""
    failed: list[int] = []
    async with Fleet(config) as fleet:
        await fleet.wait_connected(timeout)
        if not follow_:
            for rank in ranks:
                if not fleet[rank].status.connected:
                    s = fleet[rank].status
                    why = f" ({safe(s.error)})" if s.error else ""
                    print(f"r37-cockpit: rank {rank}: {s.state.value}{why}", file=sys.stderr)
                    failed.append(rank)
            ranks = [r for r in ranks if r not in failed]
        sources = [follow(fleet[r], config.cluster.container_name, follow=follow_, since=since, tail=tail,
                          resume=follow_) for r in ranks]
        if follow_:
            failed += await _print_live(sources, printer)
        else:
            failed += await _print_all(sources, printer)
    return sorted(set(failed))


async def _drain(source: AsyncIterator[LogLine | FollowEvent], lines: list[LogLine],
                 events: list[FollowEvent]) -> None:
    async for item in source:
        if isinstance(item, LogLine):
            lines.append(item)
        else:
            events.append(item)


async def _print_all(sources: list[AsyncIterator[LogLine | FollowEvent]], printer: Printer) -> list[int]:
    per_rank: list[list[LogLine]] = [[] for _ in sources]
    events: list[FollowEvent] = []
    await asyncio.gather(*(_drain(s, per_rank[i], events) for i, s in enumerate(sources)))
    printer.lines(list(heapq.merge(*per_rank)))
    for ev in events:
        printer.event(ev)
    return [ev.rank for ev in events if ev.state in ("error", "lost")]


async def _print_live(sources: list[AsyncIterator[LogLine | FollowEvent]], printer: Printer) -> list[int]:
    pending: list[tuple[float, LogLine]] = []
    failed: list[int] = []

    async def pump(source: AsyncIterator[LogLine | FollowEvent]) -> None:
        async for item in source:
            if isinstance(item, LogLine):
                pending.append((time.monotonic(), item))
            else:
                if item.state == "error":
                    failed.append(item.rank)
                printer.event(item)

    def emit(until: float) -> None:
        due = [line for t, line in pending if t <= until]
        if due:
            pending[:] = [(t, line) for t, line in pending if t > until]
            printer.lines(sorted(due))

    tasks = [asyncio.create_task(pump(s)) for s in sources]
    try:
        while not all(t.done() for t in tasks):
            await asyncio.sleep(REORDER_WINDOW / 3)
            emit(time.monotonic() - REORDER_WINDOW)
        emit(float("inf"))
        for t in tasks:
            t.result()
    finally:
        for t in tasks:
            t.cancel()
    return failed
