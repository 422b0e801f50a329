"""`r37-cockpit fabric`: perftest's ib_write_bw and ib_write_lat between pairs of ranks (see
`cockpit.recipe.fabric`). The commands are printed before they run; while the engine serves the test is
refused unless `--yes`. Exit 0 when every pair passed, 1 when one is slow or failed, 2 for a bad option,
3 when refused."""

from __future__ import annotations

import argparse
import sys

from cockpit.cli.commands import SUMMARY
from cockpit.cli.common import (
    EXIT_FAILURE,
    EXIT_OK,
    EXIT_REFUSED,
    CliError,
    add_json,
    load,
    print_json,
    run_async,
    usage_error,
)
from cockpit.config import ClusterConfig
from cockpit.safetext import safe


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("fabric", help=SUMMARY["fabric"],
                       description="Run perftest's ib_write_bw and ib_write_lat between pairs of ranks over "
                                   "each host's ib_hca, gid_index and fabric IP (the server on one host, the "
                                   "client on the other, one pair at a time, each run under `timeout`), and "
                                   "judge every pair against the ports' active rate and the other pairs. "
                                   "The commands are shown before they run. Refused while the engine serves "
                                   "unless --yes. Exit 0 when every pair passed, 1 when one is slow or "
                                   "failed, 2 for a bad option, 3 when refused. The result is kept for the "
                                   "launch gate `[fabric] require_passed`.")
    p.add_argument("--pairs", choices=("all", "ring"), default="all",
                   help="all: every pair of ranks (default); ring: each rank with the next")
    p.add_argument("--size", type=int, default=None, metavar="BYTES",
                   help="ib_write_bw message size (default: [fabric] size_bytes, 1 MiB)")
    p.add_argument("-y", "--yes", action="store_true", help="run even while the engine serves")
    add_json(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from cockpit.recipe.fabric import choose_pairs, fabric_text, planned_commands
    _, cfg = load(args)
    size = args.size if args.size is not None else cfg.fabric.size_bytes
    if not 2 <= size <= 1 << 30:
        raise usage_error(f"--size {size}: give 2 to {1 << 30} bytes")
    pairs = choose_pairs(cfg.ranks, args.pairs)
    if not pairs:
        raise usage_error("the fabric test needs at least two ranks")
    planned = planned_commands(cfg, pairs, size)
    if not args.json:
        print(f"fabric test: {len(pairs)} pair(s), {len(planned)} commands, one pair at a time:")
        for line in planned:
            print(f"  {line}")
        sys.stdout.flush()
    data = run_async(_run(cfg, pairs, size, args.yes, args.json))
    if args.json:
        print_json(data)
    else:
        print(fabric_text(data, sorted(cfg.ranks)))
    return EXIT_OK if data["ok"] else EXIT_FAILURE


async def _run(cfg: ClusterConfig, pairs: list[tuple[int, int]], size: int, yes: bool,
               quiet: bool) -> dict[str, object]:
    from cockpit.hosts import Fleet
    from cockpit.locations import state_dir
    from cockpit.recipe.fabric import PairResult, engine_serving, run_fabric, save_result

    async with Fleet(cfg) as fleet:
        await fleet.wait_connected(cfg.ssh.connect_timeout + 5)
        down = [s.rank for s in fleet.statuses if not s.connected]
        if down:
            why = "; ".join(safe(s.error or s.state, 200) for s in fleet.statuses if not s.connected)
            raise CliError(f"rank(s) {', '.join(map(str, down))} not connected: {why}", EXIT_FAILURE,
                           "host-unreachable")
        serving = await engine_serving(fleet, cfg)
        if serving and not yes:
            raise CliError(f"the engine runs on rank(s) {', '.join(map(str, serving))}: the fabric test "
                           "would compete with its traffic and its figures would be wrong; add --yes to run "
                           "it anyway", EXIT_REFUSED, "needs-confirmation")

        def progress(p: PairResult) -> None:
            if quiet:
                return
            bw = f"{p.bw.avg_gbps:.1f} Gb/s" if p.bw else "—"
            lat = f"{p.lat.avg_us:.2f} µs" if p.lat and p.lat.avg_us is not None else "—"
            print(f"pair {p.pair}: {bw}, {lat}" + (f" — {safe(p.problem, 200)}" if p.problem else ""),
                  flush=True)

        report = await run_fabric(fleet, cfg, pairs, size, progress)
    data = report.as_dict()
    try:
        save_result(state_dir(), report)
    except OSError as exc:
        print(f"r37-cockpit: the result was not kept for the launch gate: {exc}", file=sys.stderr)
    if not report.passed:
        data["code"] = "fabric-failed"
    return data
