"""`r37-cockpit stats --since T [--until T] [--rank N] [--step S] [--json]`: the stats of a recorded
window, from the cluster's recording (the flight recorder, `cockpit.telemetry.recorder`); connects to
nothing. Text: per rank and for the engine, the points and min / mean / max of each figure; `--json`: the
same summary and every point (or the mean of each `--step`)."""

from __future__ import annotations

import argparse
import math
import time
from typing import Any

from cockpit.cli.common import EXIT_OK, EXIT_USAGE, CliError, print_json, table, usage_error
from cockpit.config import ClusterConfig

MAX_POINTS = 10_000           # points per rank printed without --step; beyond, a step is chosen


def add_options(parser: argparse.ArgumentParser, mode: argparse._MutuallyExclusiveGroup) -> None:
    mode.add_argument("--since", metavar="T",
                      help="the recorded stats from T on (15m, 2h, 3d ago; HH:MM today; YYYY-MM-DD[ HH:MM]): "
                           "read from the cluster's recording, no host is asked")
    parser.add_argument("--until", metavar="T", help="with --since: up to T (default: now)")
    parser.add_argument("--rank", type=int, metavar="N", help="with --since: only rank N (and the engine)")
    parser.add_argument("--step", type=float, metavar="S",
                        help=f"with --since: the mean of every S seconds (default: every sample, or steps "
                             f"that keep {MAX_POINTS} points per rank)")


def run_range(args: argparse.Namespace, cfg: ClusterConfig) -> int:
    from cockpit.recipe.recording import parse_when, path_for
    from cockpit.safetext import safe
    from cockpit.telemetry.recorder import RecordingUnreadable, read_series, summarise_series

    if args.since is None:
        raise usage_error("--until, --rank and --step go with --since (a recorded window)")
    now = time.time()
    try:
        since = parse_when(args.since, now)
        until = now if args.until is None else parse_when(args.until, now)
    except ValueError as exc:
        raise usage_error(str(exc)) from None
    if until < since:
        raise usage_error("--until is before --since")
    if args.rank is not None and args.rank not in cfg.ranks:
        raise usage_error(f"--rank {args.rank}: the cluster has ranks {', '.join(map(str, cfg.ranks))}")
    if args.step is not None and not (math.isfinite(args.step) and args.step > 0):
        raise usage_error("--step: give a number of seconds above 0")
    path = path_for(cfg)
    try:
        summary = summarise_series(path, "samples", since=since, until=until, rank=args.rank)
        engine = summarise_series(path, "engine", since=since, until=until)
        most = max((s["points"] for s in summary.values()), default=0)
        step = args.step
        if step is None and most > MAX_POINTS:
            step = float(math.ceil((until - since) / MAX_POINTS))
        points = read_series(path, "samples", since=since, until=until, rank=args.rank, step=step) \
            if args.json else []
        engine_points = read_series(path, "engine", since=since, until=until, step=step) if args.json else []
    except FileNotFoundError:
        summary, engine, points, engine_points, step = {}, {}, [], [], args.step
        if not args.json:
            print(f"no recording of cluster {safe(cfg.cluster.name, 80)} yet ({path}): the cockpit, "
                  "`stats --watch` and `status --watch-engine` record while they run")
            return EXIT_OK
    except RecordingUnreadable as exc:
        raise CliError(f"the recording {path} cannot be read: {exc}", EXIT_USAGE, "file-corrupt") from None
    if args.json:
        ranks: dict[str, list[dict[str, Any]]] = {}
        for p in points:
            ranks.setdefault(str(p.pop("rank")), []).append(p)
        print_json({"ok": True, "cluster": cfg.cluster.name, "recording": str(path), "since": since,
                    "until": until, "step_s": step, "summary": {**summary, **engine}, "ranks": ranks,
                    "engine": engine_points})
        return EXIT_OK
    print(f"recorded stats of cluster {safe(cfg.cluster.name, 80)}, {_when(since)} … {_when(until)}")
    if not summary and not engine:
        print("no sample recorded in that range")
        return EXIT_OK
    print(range_text(summary, engine))
    return EXIT_OK


def _when(t: float) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(t))


def _f(entry: dict[str, Any], series: str, which: str, fmt: str = "{:.0f}") -> str:
    value = entry.get(series, {}).get(which)
    return "—" if value is None else fmt.format(value)


def range_text(summary: dict[str, dict[str, Any]], engine: dict[str, dict[str, Any]]) -> str:
    rows = [[rank, str(e["points"]), f"{_f(e, 'util', 'mean')}/{_f(e, 'util', 'max')}",
             f"{_f(e, 'sm_mhz', 'min')}/{_f(e, 'sm_mhz', 'mean')}",
             f"{_f(e, 'power_w', 'mean', '{:.1f}')}/{_f(e, 'power_w', 'max', '{:.1f}')}",
             _f(e, "temp_c", "max"), _f(e, "mem_available_gib", "min", "{:.1f}"),
             _f(e, "tx_gbps", "mean", "{:.2f}"), _f(e, "rx_gbps", "mean", "{:.2f}")]
            for rank, e in sorted(summary.items(), key=lambda kv: int(kv[0]))]
    out = [table(rows, ["RANK", "SAMPLES", "UTIL % mean/max", "SM MHz min/mean", "POWER W mean/max",
                        "TEMP max", "MEMAVAIL GiB min", "TX Gb/s mean", "RX Gb/s mean"])] if rows else []
    e = engine.get("engine")
    if e is not None:
        one = "{:.1f}"
        out.append(f"engine: {e['points']} points; generated {_f(e, 'gen_tps', 'mean', one)} tok/s mean, "
                   f"{_f(e, 'gen_tps', 'max', one)} max; prompt {_f(e, 'prompt_tps', 'mean', one)} tok/s "
                   f"mean; KV cache {_f(e, 'kv_pct', 'max', one)} % max; running "
                   f"{_f(e, 'running', 'max')} max, waiting {_f(e, 'waiting', 'max')} max")
    return "\n".join(out)
