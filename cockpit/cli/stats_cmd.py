"""`r37-cockpit stats`: GPU, memory, RDMA and engine stats of every rank, and their alerts, headless.

`--once` (the default) takes one full sample of every rank (two rounds, so rates exist) and prints a
table, or the stats JSON (`cockpit.telemetry.stats_json`) with `--json`; exit 1 while an alert is active
or a rank could not be sampled (unknown is never pass), 0 only when every rank was sampled and nothing
alerts. `--watch` prints one line per rank every interval and a line for each alert that begins or
clears (one JSON object per interval with `--json`), until Ctrl-C (exit 0); with `--serve-metrics
HOST:PORT` (or `[stats] serve_metrics`) it also serves the stats in Prometheus text format.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import signal
import sys
import time
from collections.abc import AsyncIterator
from typing import Any

from cockpit.cli.commands import SUMMARY
from cockpit.cli.common import (
    EXIT_FAILURE,
    EXIT_OK,
    EXIT_USAGE,
    CliError,
    add_json,
    load,
    print_json,
    remedy,
    run_async,
    table,
    usage_error,
)
from cockpit.cli.stats_range import add_options as add_range_options
from cockpit.cli.stats_range import run_range
from cockpit.config import ClusterConfig, split_listen
from cockpit.config.models import STATS_INTERVAL_S
from cockpit.hosts import Fleet
from cockpit.recipe.monitor import StatsMonitor
from cockpit.recipe.recording import recorded
from cockpit.recipe.watch import ClusterWatcher
from cockpit.safetext import safe
from cockpit.telemetry.cluster_stats import Alert, ClusterStats, RankStats
from cockpit.telemetry.exporter import ExporterError, MetricsServer
from cockpit.telemetry.gpu_events import BAD_REASONS, reason_label, reasons_text
from cockpit.telemetry.notify import notifier_for
from cockpit.telemetry.stats_json import stats_dict

GIB = 1 << 30
DASH = "-"
CLOSE_GRACE = 2.0                # seconds the monitor and the watcher each get to close


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("stats", help=SUMMARY["stats"],
                       description="Sample every rank's GPU (nvidia-smi), memory, RDMA ports and rank 0's "
                                   "engine /metrics. --once (default): one full sample, exit 1 while an "
                                   "alert is active or a rank could not be sampled, 0 otherwise. --watch: "
                                   "one line per rank per interval until Ctrl-C, optionally serving the "
                                   "stats to Prometheus. Read-only; 2 for a bad option.")
    mode = p.add_mutually_exclusive_group()
    mode.add_argument("--once", action="store_true", help="one full sample of every rank (the default)")
    mode.add_argument("--watch", action="store_true", help="one line per rank every interval until Ctrl-C")
    p.add_argument("--interval", type=float, default=None, metavar="S",
                   help="seconds between samples (default: [stats] interval_s)")
    p.add_argument("--serve-metrics", metavar="HOST:PORT", default=None,
                   help="with --watch: serve the stats in Prometheus text format at http://HOST:PORT/metrics "
                        "(default: [stats] serve_metrics; loopback unless you say otherwise)")
    p.add_argument("--timeout", type=float, default=None, metavar="S",
                   help="seconds to wait for the first full sample (default: ssh.connect_timeout + 10 + "
                        "3 intervals)")
    add_range_options(p, mode)
    add_json(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    _, cfg = load(args)
    if args.since is not None or args.until is not None or args.rank is not None or args.step is not None:
        return run_range(args, cfg)         # a recorded window (cockpit/cli/stats_range.py)
    interval = _interval(args, cfg)
    listen = _listen(args, cfg)
    timeout = args.timeout if args.timeout is not None else cfg.ssh.connect_timeout + 10 + 3 * interval
    if not timeout > 0:
        raise usage_error(f"--timeout {args.timeout:g}: give a number of seconds above 0")
    if args.watch:
        try:
            return run_async(_watch(args, cfg, interval, timeout, listen))
        except KeyboardInterrupt:   # Ctrl-C before the watch's own handler was installed: the same end
            return EXIT_OK
    return run_async(_once(args, cfg, interval, timeout))


def _interval(args: argparse.Namespace, cfg: ClusterConfig) -> float:
    if args.interval is None:
        return cfg.stats.interval_s
    lo, hi = STATS_INTERVAL_S
    if not lo <= args.interval <= hi:   # also refuses nan
        raise usage_error(f"--interval {args.interval:g}: give {lo:g} to {hi:g} seconds")
    return float(args.interval)


def _listen(args: argparse.Namespace, cfg: ClusterConfig) -> tuple[str, int] | None:
    if args.serve_metrics is not None and not args.watch:
        raise usage_error("--serve-metrics serves the stats while watching: add --watch (--once prints one "
                          "sample and exits)")
    value = args.serve_metrics if args.serve_metrics is not None else cfg.stats.serve_metrics
    if not args.watch or value is None:
        return None
    try:
        return split_listen(value)
    except ValueError as exc:
        where = "--serve-metrics" if args.serve_metrics is not None else "[stats] serve_metrics"
        raise usage_error(f"{where}: {exc}") from None


# ---- the sample -------------------------------------------------------------------------------------


@contextlib.asynccontextmanager
async def _sampling(cfg: ClusterConfig, interval: float) -> AsyncIterator[tuple[Fleet, ClusterWatcher,
                                                                               StatsMonitor]]:
    """The fleet, its watcher and the stats monitor, closed in that reverse order; the monitor and the
    watcher get CLOSE_GRACE seconds each, then the fleet closes anyway (a channel still being opened when
    the command is interrupted ends with its connection)."""
    async with Fleet(cfg) as fleet:
        watcher = ClusterWatcher(fleet, cfg)
        monitor = StatsMonitor(fleet, cfg, watcher, interval)
        watcher.start()
        monitor.start()
        try:
            yield fleet, watcher, monitor
        finally:
            for closing in (monitor.close(), watcher.close()):
                task = asyncio.ensure_future(closing)
                await asyncio.wait({task}, timeout=CLOSE_GRACE)


async def _start(fleet: Fleet, cfg: ClusterConfig, watcher: ClusterWatcher, monitor: StatsMonitor,
                 timeout: float) -> None:
    """Wait for the hosts, the first full sample and the watcher's first look (containers, the API and
    its /metrics), all within the deadline; then judge the alerts once."""
    deadline = time.monotonic() + timeout
    await fleet.wait_connected(min(timeout, cfg.ssh.connect_timeout + 2))
    await monitor.first_sample(max(0.5, deadline - time.monotonic()))
    while not watcher.looked() and time.monotonic() < deadline:
        await asyncio.sleep(0.1)
    # the API answers: rates need two /metrics reads, so wait for the second one (within the deadline)
    while time.monotonic() < deadline and _rates_due(watcher, monitor):
        await asyncio.sleep(0.1)
    monitor.judge()


def _rates_due(watcher: ClusterWatcher, monitor: StatsMonitor) -> bool:
    api = watcher.timeline.api
    e = monitor.stats.engine
    return api is not None and api.ready and (e is None or (e.interval_s is None and not e.error))


def unsampled(fleet: Fleet, stats: ClusterStats, now: float) -> dict[int, str]:
    """rank -> why it has no current sample: its host is not connected, its sampler is not sampling, or
    its readings are missing or stale."""
    out = {}
    for rank, s in sorted(stats.ranks.items()):
        status = fleet[rank].status
        if not status.connected:
            out[rank] = f"host {status.state.value}" + (f": {status.error}" if status.error else "")
        elif s.sampler != "sampling":
            out[rank] = f"sampler {s.sampler}" + (f": {s.error}" if s.error else "")
        elif s.round_at is None or s.gpu_at is None:
            out[rank] = "no full sample yet" + (f": {s.error}" if s.error else "")
        elif s.stale(stats.interval_s, now):
            age = s.age(now)
            out[rank] = f"no readings for {age:.0f} s" if age is not None else "no readings"
    return out


async def _once(args: argparse.Namespace, cfg: ClusterConfig, interval: float, timeout: float) -> int:
    async with _sampling(cfg, interval) as (fleet, watcher, monitor):
        await _start(fleet, cfg, watcher, monitor, timeout)
        now = time.time()
        stats = monitor.stats
        missing = unsampled(fleet, stats, now)
        hosts = {r: fleet[r].target for r in cfg.ranks}
        ok = not missing and not stats.alerts
        if args.json:
            data = stats_dict(stats, now, hosts)
            for a in data["alerts"]:
                a["remedy"] = remedy(args, a["remedy"])
            data["ok"] = ok
            data["unsampled"] = [{"rank": r, "reason": why} for r, why in missing.items()]
            print_json(data)
        else:
            print(remedy(args, stats_text(stats, now, hosts, cfg.stats.xid_alert_s)))
        for rank, why in missing.items():
            print(f"r37-cockpit: rank {rank} ({safe(hosts[rank])}) could not be sampled: {safe(why)}",
                  file=sys.stderr)
        if stats.alerts:
            print(f"r37-cockpit: {len(stats.alerts)} alert(s) active", file=sys.stderr)
        return EXIT_OK if ok else EXIT_FAILURE


def _num(value: float | None, fmt: str = "{:.0f}", unit: str = "") -> str:
    return DASH if value is None else fmt.format(value) + unit


def _gib(value: int | None) -> str:
    return DASH if value is None else f"{value / GIB:.1f}"


def _rates(s: RankStats) -> tuple[str, str]:
    tx = [p.tx_gbps for p in s.ports if p.tx_gbps is not None]
    rx = [p.rx_gbps for p in s.ports if p.rx_gbps is not None]
    return (f"{sum(tx):.2f}" if tx else DASH), (f"{sum(rx):.2f}" if rx else DASH)


def gpu_events_text(stats: ClusterStats, now: float, xid_window_s: float) -> str:
    """Per rank: the clock event reasons of its newest reading and the Xid lines of its kernel log within the
    alert window (`not readable: why` / `not known yet` where the log was not read, never "none")."""
    out = [f"GPU events (clock event reasons; Xid lines of the last {xid_window_s:g} s):"]
    for rank, s in sorted(stats.ranks.items()):
        fresh = s.gpu is not None and not s.stale(stats.interval_s, now)
        reasons = reasons_text(s.gpu.event_reasons) if fresh and s.gpu is not None else DASH
        recent = [x for x in s.xids if (age := s.xid_age(x, now)) is not None and age <= xid_window_s]
        if recent:
            xid = "; ".join(f"{x.xid} {x.name} ({'critical' if x.critical else 'not critical'}, "
                            f"{s.xid_age(x, now) or 0:.0f} s ago)" for x in recent[-3:])
        elif s.klog.readable:
            xid = f"none ({s.klog.source})"
        else:
            xid = s.klog.text()
        out.append(f"  rank {rank}: clocks {reasons}; Xid {safe(xid, 600)}")
    return "\n".join(out)


def stats_text(stats: ClusterStats, now: float, hosts: dict[int, str], xid_window_s: float = 3600) -> str:
    """The `--once` table: one row per rank, GPU events, the engine, then every alert with its remedy."""
    rows = []
    for rank, s in sorted(stats.ranks.items()):
        g, m = s.gpu, s.memory
        stale = s.stale(stats.interval_s, now)
        tx, rx = _rates(s)
        ports = " ".join(f"{p.hca}/{p.port}:{'up' if p.active else 'DOWN' if p.active is False else '?'}"
                         for p in s.ports)
        age = s.age(now)
        state = s.sampler + (" (stale)" if stale and s.sampler == "sampling" else "")
        rows.append([str(rank), safe(hosts.get(rank, ""), 60), state,
                     _num(g.util if g else None, unit=" %"),
                     f"{_num(g.sm if g else None)}/{_num(g.max_sm if g else None)}",
                     _num(g.power_w if g else None, "{:.1f}", " W"),
                     _num(g.temp_c if g else None, unit=" °C"),
                     safe(g.pstate or DASH) if g else DASH,
                     f"{_gib(m.available_bytes if m else None)}/{_gib(m.total_bytes if m else None)}",
                     _gib(m.engine_bytes if m else None), tx, rx, safe(ports, 200) or DASH,
                     _num(age, "{:.1f}", " s")])
    out = [table(rows, ["RANK", "HOST", "SAMPLER", "UTIL", "SM/MAX MHZ", "POWER", "TEMP", "PSTATE",
                        "MEM AVAIL/TOTAL GIB", "ENGINE GIB", "TX GB/S", "RX GB/S", "PORTS", "AGE"])]
    for rank, s in sorted(stats.ranks.items()):
        if s.error:
            out.append(f"rank {rank}: {safe(s.error)}")
    out.append(gpu_events_text(stats, now, xid_window_s))
    out.append(engine_text(stats, now))
    if stats.alerts:
        out.append(f"{len(stats.alerts)} alert(s):")
        for a in stats.alerts:
            out.append(f"  {alert_text(a)}\n    what to do: {safe(a.remedy)}")
    else:
        out.append("no alerts")
    return "\n".join(out)


def engine_text(stats: ClusterStats, now: float) -> str:
    e = stats.engine
    if e is None:
        return f"engine: no /metrics read ({safe(stats.engine_note or 'the API was not read')})"
    if e.error:
        return f"engine: /metrics unreadable: {safe(e.error)}"
    kv = None if e.kv_cache_usage is None else e.kv_cache_usage * 100
    parts = [f"running {_num(e.running)}", f"waiting {_num(e.waiting)}", f"KV {_num(kv, '{:.1f}', ' %')}",
             f"gen {_num(e.generation_tokens_per_s, '{:.1f}')} tok/s",
             f"prompt {_num(e.prompt_tokens_per_s, '{:.1f}')} tok/s",
             f"TTFT p50/p99 {_num(e.ttft_p50_s, '{:.3f}')}/{_num(e.ttft_p99_s, '{:.3f}')} s",
             f"ITL p50/p99 {_num(e.itl_p50_s, '{:.4f}')}/{_num(e.itl_p99_s, '{:.4f}')} s",
             f"age {max(0.0, now - e.at):.1f} s"]
    return "engine: " + ", ".join(parts)


def alert_text(a: Alert) -> str:
    where = "cluster" if a.rank is None else f"rank {a.rank}"
    return f"{a.severity.upper()} {where} {a.kind}: {safe(a.message)}"


# ---- watch ------------------------------------------------------------------------------------------


def watch_line(s: RankStats, stats: ClusterStats, now: float) -> str:
    """One rank at one interval: util, SM clock, power, temperature, memory available, RDMA and alerts."""
    kinds = [a.kind for a in stats.alerts if a.rank == s.rank]
    tail = f"  alerts: {', '.join(kinds)}" if kinds else ""
    held = [n for n in s.reasons_since if n in BAD_REASONS]
    if held:
        tail = f"  clocks: {', '.join(reason_label(n) for n in held)}{tail}"
    stamp = time.strftime("%H:%M:%S", time.localtime(now))
    if s.sampler != "sampling" or s.stale(stats.interval_s, now):
        age = s.age(now)
        why = s.sampler + (f", no readings for {age:.0f} s" if age is not None else ", no readings")
        return f"{stamp} rank {s.rank}  {why}" + (f" ({safe(s.error, 200)})" if s.error else "") + tail
    g, m = s.gpu, s.memory
    tx, rx = _rates(s)
    return (f"{stamp} rank {s.rank}  util {_num(g.util if g else None, unit='%')}  "
            f"SM {_num(g.sm if g else None)} MHz  {_num(g.power_w if g else None, '{:.1f}', ' W')}  "
            f"{_num(g.temp_c if g else None, unit=' °C')}  mem {_gib(m.available_bytes if m else None)} GiB "
            f"avail  tx {tx} rx {rx} Gb/s{tail}")


class Watcher:
    """Prints every judgement of the monitor: rank lines (or a JSON line) and alert changes."""

    def __init__(self, args: argparse.Namespace, stats: ClusterStats, hosts: dict[int, str]) -> None:
        self.args = args
        self.stats = stats
        self.hosts = hosts
        self.shown: dict[tuple[str, int | None], Alert] = {}

    def emit(self) -> None:
        now = time.time()
        stats = self.stats
        if self.args.json:
            data = stats_dict(stats, now, self.hosts)
            for a in data["alerts"]:
                a["remedy"] = remedy(self.args, a["remedy"])
            sys.stdout.write(json.dumps(data, default=str) + "\n")
        else:
            current = {a.key: a for a in stats.alerts}
            stamp = time.strftime("%H:%M:%S", time.localtime(now))
            lines = [f"{stamp} ALERT {alert_text(a)} — what to do: {safe(remedy(self.args, a.remedy))}"
                     for k, a in current.items() if k not in self.shown]
            lines += [f"{stamp} CLEARED {alert_text(a)}" for k, a in self.shown.items() if k not in current]
            self.shown = current
            lines += [watch_line(s, stats, now) for _, s in sorted(stats.ranks.items())]
            sys.stdout.write("\n".join(lines) + "\n")
        sys.stdout.flush()


async def _watch(args: argparse.Namespace, cfg: ClusterConfig, interval: float, timeout: float,
                 listen: tuple[str, int] | None) -> int:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    try:
        async with _sampling(cfg, interval) as (fleet, watcher, monitor):
            with _serving(monitor.stats, listen), recorded(cfg, "stats --watch", watcher, monitor):
                await _until(stop, _start(fleet, cfg, watcher, monitor, timeout))
                if stop.is_set():
                    return EXIT_OK
                for rank, why in unsampled(fleet, monitor.stats, time.time()).items():
                    print(f"r37-cockpit: rank {rank} ({safe(fleet[rank].target)}) not sampled yet: "
                          f"{safe(why)}", file=sys.stderr)
                printer = Watcher(args, monitor.stats, {r: fleet[r].target for r in cfg.ranks})
                ticked = asyncio.Event()
                monitor.subscribe(ticked.set)
                notifier = notifier_for(cfg.alerts, cfg.cluster.name)
                if notifier is not None:        # [alerts] command: every alert raised or cleared
                    notifier.start()
                    def judged() -> None:
                        notifier.observe(monitor.stats.alerts)
                    monitor.subscribe(judged)
                    judged()
                try:
                    printer.emit()
                    while not stop.is_set():
                        ticked.clear()
                        await _until(stop, ticked.wait())
                        if not stop.is_set():
                            printer.emit()
                finally:
                    if notifier is not None:
                        await notifier.drain(min(5.0, notifier.timeout_s + 1))
                        await notifier.close()
    finally:
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.remove_signal_handler(sig)
    return EXIT_OK


async def _until(stop: asyncio.Event, work: Any) -> None:
    """Run `work` until it is done or `stop` is set, whichever comes first; raises what `work` raised."""
    task = asyncio.ensure_future(work)
    stopper = asyncio.ensure_future(stop.wait())
    try:
        await asyncio.wait({task, stopper}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for t in (task, stopper):
            t.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await t     # a failure of `work` is raised here


@contextlib.contextmanager
def _serving(stats: ClusterStats, listen: tuple[str, int] | None) -> Any:
    if listen is None:
        yield None
        return
    server = MetricsServer(stats, *listen)
    try:
        server.start()
    except ExporterError as exc:
        raise CliError(f"cannot serve the stats: {exc}", EXIT_USAGE, "usage") from None
    print(f"serving the stats at {server.url} (Prometheus text format)", file=sys.stderr, flush=True)
    try:
        yield server
    finally:
        server.close()
