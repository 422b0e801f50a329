"""Wall time of a full preflight of a cluster next to the floor: one plain `ssh HOST true` per host, all
in parallel, with the cluster's ssh_config. Target: preflight <= 2x the floor.

    python bench/perf/preflight.py                     # starts a lab (root) in a temp dir, then stops it
    python bench/perf/preflight.py --dir DIR           # an already running sim cluster (DIR/cluster.toml)
    python bench/perf/preflight.py --runs 7 --json

Each preflight run opens a fresh Fleet (SSH connect, auth and the checks), like `r37-cockpit preflight`.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from cockpit.config import ClusterConfig, load_config
from cockpit.hosts import Fleet
from cockpit.recipe.checks import CheckResult, PreflightFinished
from cockpit.recipe.preflight import run_preflight


def ssh_floor(cluster_dir: Path, cfg: ClusterConfig) -> float:
    """Seconds for one `ssh -F DIR/ssh_config spark-N true` per host, all started at once."""
    names = [f"spark-{h.rank}" for h in cfg.by_rank()]
    start = time.perf_counter()
    argv = ["ssh", "-F", str(cluster_dir / "ssh_config"), "-o", "BatchMode=yes"]
    procs = [subprocess.Popen([*argv, name, "true"], stdin=subprocess.DEVNULL) for name in names]
    codes = [p.wait(60) for p in procs]
    elapsed = time.perf_counter() - start
    if any(codes):
        raise SystemExit(f"ssh floor failed: exit codes {codes}")
    return elapsed


async def one_preflight(cfg: ClusterConfig) -> dict[str, float | int | bool]:
    start = time.perf_counter()
    first = None
    async with Fleet(cfg) as fleet:
        async for ev in run_preflight(fleet, cfg):
            if isinstance(ev, CheckResult) and first is None:
                first = time.perf_counter() - start
            if isinstance(ev, PreflightFinished):
                final = ev
    total = time.perf_counter() - start
    return {"total": total, "first_result": first or total, "results": len(final.results), "ok": final.ok}


def measure(cluster_dir: Path, runs: int) -> dict[str, object]:
    cfg = load_config(cluster_dir / "cluster.toml")
    ssh_floor(cluster_dir, cfg)                      # warm: host keys cached, sshd forked once
    asyncio.run(one_preflight(cfg))
    floors, pre = [], []
    for _ in range(runs):
        floors.append(ssh_floor(cluster_dir, cfg))
        pre.append(asyncio.run(one_preflight(cfg)))
    floor = statistics.median(floors)
    total = statistics.median(float(p["total"]) for p in pre)
    return {
        "hosts": len(cfg.hosts), "runs": runs, "checks": pre[-1]["results"],
        "floor_ssh_true_s": round(floor, 3), "floor_runs_s": [round(x, 3) for x in floors],
        "preflight_s": round(total, 3), "preflight_runs_s": [round(float(p["total"]), 3) for p in pre],
        "first_result_s": round(statistics.median(float(p["first_result"]) for p in pre), 3),
        "ratio": round(total / floor, 2), "target_ratio": 2.0,
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dir", type=Path, help="a running sim cluster directory (default: start a lab)")
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    stop: Callable[[], None] | None = None
    if args.dir is None:
        from cockpit.sim import cluster
        from cockpit.sim.lab import lab_up
        tmp = Path(tempfile.mkdtemp(prefix="r37-bench-lab-"))
        lab_up(tmp)
        def stop() -> None:
            cluster.down(tmp)
            shutil.rmtree(tmp, ignore_errors=True)

        args.dir = tmp
    try:
        out = measure(args.dir.resolve(), args.runs)
    finally:
        if stop:
            stop()
    if args.json:
        print(json.dumps(out, indent=2))
    else:
        print(f"{out['hosts']} hosts, {out['checks']} check results, median of {out['runs']} runs")
        print(f"floor (parallel ssh true): {out['floor_ssh_true_s']:.3f} s")
        print(f"full preflight:            {out['preflight_s']:.3f} s "
              f"(first result after {out['first_result_s']:.3f} s)")
        print(f"ratio: {out['ratio']:.2f}x (target <= {out['target_ratio']:.0f}x)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
