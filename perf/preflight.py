"""Wall time of a full preflight of a simulated cluster against its number of hosts, each next to the floor
measured in the same run: one plain `ssh HOST true` per host, all in parallel, with the cluster's
ssh_config. Hosts are checked in parallel, so preflight time should stay flat as hosts are added.
Target: preflight <= 2x the floor at every size.

    python perf/preflight.py                         # a 4-host demo cluster in a temp dir
    python perf/preflight.py --hosts 4 8 16          # one demo cluster per size, one after another
    python perf/preflight.py --hosts 2 8 --lab       # lab clusters (root, Linux)
    python perf/preflight.py --dir DIR               # an already running sim cluster (DIR/cluster.toml)
    python perf/preflight.py --runs 7 --json

Each preflight run opens a fresh Fleet (SSH connect, auth and the checks), like `r37-cockpit preflight`.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from exact_wait import wait_exactly

from cockpit.config import ClusterConfig, load_config
from cockpit.hosts import Fleet
from cockpit.recipe.checks import CheckResult, PreflightFinished
from cockpit.recipe.preflight import run_preflight
from cockpit.sim.size import MAX_HOSTS, MIN_HOSTS

TARGET_RATIO = 2.0


def ssh_floor(cluster_dir: Path, cfg: ClusterConfig) -> float:
    """Seconds for one `ssh -F DIR/ssh_config spark-N true` per host, all started at once."""
    names = [f"spark-{h.rank}" for h in cfg.by_rank()]
    start = time.perf_counter()
    argv = ["ssh", "-F", str(cluster_dir / "ssh_config"), "-o", "BatchMode=yes"]
    procs = [subprocess.Popen([*argv, name, "true"], stdin=subprocess.DEVNULL) for name in names]
    codes = [wait_exactly(p, 60) for p in procs]
    elapsed = time.perf_counter() - start
    if any(codes):
        raise SystemExit(f"ssh floor failed: exit codes {codes}")
    return elapsed


def machine_busy_s() -> float:
    """CPU seconds this machine has spent busy (all CPUs, /proc/stat), 0.0 where there is no /proc."""
    try:
        fields = [int(x) for x in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    except (OSError, ValueError):
        return 0.0
    idle = fields[3] + (fields[4] if len(fields) > 4 else 0)
    return (sum(fields[:8]) - idle) / os.sysconf("SC_CLK_TCK")


async def one_preflight(cfg: ClusterConfig) -> dict[str, float | int | bool]:
    start, cpu, busy = time.perf_counter(), time.process_time(), machine_busy_s()
    first = None
    async with Fleet(cfg) as fleet:
        async for ev in run_preflight(fleet, cfg):
            if isinstance(ev, CheckResult) and first is None:
                first = time.perf_counter() - start
            if isinstance(ev, PreflightFinished):
                final = ev
    total = time.perf_counter() - start
    return {"total": total, "first_result": first or total, "results": len(final.results), "ok": final.ok,
            "cockpit_cpu": time.process_time() - cpu, "machine_cpu": machine_busy_s() - busy}


def measure(cluster_dir: Path, runs: int) -> dict[str, object]:
    cfg = load_config(cluster_dir / "cluster.toml")
    ssh_floor(cluster_dir, cfg)                      # warm: host keys cached, sshd forked once
    asyncio.run(one_preflight(cfg))
    floors, pre = [], []
    for _ in range(runs):                            # interleaved, so both see the same machine load
        floors.append(ssh_floor(cluster_dir, cfg))
        pre.append(asyncio.run(one_preflight(cfg)))
    floor = statistics.median(floors)
    total = statistics.median(float(p["total"]) for p in pre)
    out: dict[str, object] = {
        "hosts": len(cfg.hosts), "runs": runs, "checks": pre[-1]["results"],
        "floor_ssh_true_s": round(floor, 3), "floor_runs_s": [round(x, 3) for x in floors],
        "preflight_s": round(total, 3), "preflight_runs_s": [round(float(p["total"]), 3) for p in pre],
        "first_result_s": round(statistics.median(float(p["first_result"]) for p in pre), 3),
        "ratio": round(total / floor, 2), "target_ratio": TARGET_RATIO,
        # the simulated hosts share this machine's CPUs: machine CPU near cpus x preflight_s means the
        # hosts' side is CPU-bound here (a real cluster has one machine per host)
        "cockpit_cpu_s": round(statistics.median(float(p["cockpit_cpu"]) for p in pre), 3),
        "machine_cpu_s": round(statistics.median(float(p["machine_cpu"]) for p in pre), 3),
        "cpus": os.cpu_count() or 1,
    }
    out["cpu_floor_s"] = round(float(str(out["machine_cpu_s"])) / int(str(out["cpus"])), 3)
    return out


def measure_new_cluster(n: int, lab: bool, runs: int) -> dict[str, object]:
    """Start a demo (or lab) cluster of `n` hosts in a temp dir, measure it, stop it."""
    from cockpit.sim import cluster
    tmp = Path(tempfile.mkdtemp(prefix=f"r37-bench-{'lab' if lab else 'demo'}-{n}-"))
    try:
        if lab:
            from cockpit.sim.lab import lab_up
            lab_up(tmp, n=n)
        else:
            cluster.demo_up(tmp, n=n)
        return {"kind": "lab" if lab else "demo", **measure(tmp, runs)}
    finally:
        if cluster.Manifest.load(tmp) is not None:
            cluster.down(tmp)
        shutil.rmtree(tmp, ignore_errors=True)


def table(rows: list[dict[str, object]]) -> str:
    lines = [f"{'kind':5} {'hosts':>5} {'checks':>6} {'floor s':>8} {'preflight s':>11} {'first s':>8} "
             f"{'ratio':>6} {'vs smallest':>11} {'cockpit cpu s':>13} {'machine cpu s':>13} "
             f"{'cpu floor s':>11}"]
    base = float(str(rows[0]["preflight_s"])) if rows else 1.0
    for r in rows:
        pre = float(str(r["preflight_s"]))
        lines.append(f"{r.get('kind', '-')!s:5} {r['hosts']!s:>5} {r['checks']!s:>6} "
                     f"{float(str(r['floor_ssh_true_s'])):8.3f} {pre:11.3f} "
                     f"{float(str(r['first_result_s'])):8.3f} {float(str(r['ratio'])):5.2f}x "
                     f"{pre / base:10.2f}x {float(str(r['cockpit_cpu_s'])):13.3f} "
                     f"{float(str(r['machine_cpu_s'])):13.3f} {float(str(r['cpu_floor_s'])):11.3f}")
    return "\n".join(lines)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dir", type=Path, help="a running sim cluster directory (instead of starting ones)")
    ap.add_argument("--hosts", type=int, nargs="+", default=[4], metavar="N",
                    help=f"cluster sizes to start and measure in turn ({MIN_HOSTS} to {MAX_HOSTS})")
    ap.add_argument("--lab", action="store_true", help="start lab clusters (root, Linux) instead of demos")
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    bad = [n for n in args.hosts if not MIN_HOSTS <= n <= MAX_HOSTS]
    if bad:
        ap.error(f"--hosts {bad[0]}: a simulated cluster has {MIN_HOSTS} to {MAX_HOSTS} hosts")
    if args.runs < 1:
        ap.error("--runs must be at least 1")
    if args.dir is not None:
        rows = [{"kind": "dir", **measure(args.dir.resolve(), args.runs)}]
    else:
        rows = [measure_new_cluster(n, args.lab, args.runs) for n in args.hosts]
    if args.json:
        print(json.dumps(rows, indent=2))                # one object per cluster size
        return 0
    print(f"full preflight vs floor (parallel `ssh host true`), median of {args.runs} runs each")
    print(table(rows))
    worst = max(float(str(r["ratio"])) for r in rows)
    print(f"worst ratio {worst:.2f}x (target <= {TARGET_RATIO:g}x at every size); "
          f"{rows[0]['cpus']} CPUs shared by the cockpit and every simulated host")
    print("cpu floor = machine cpu s / CPUs: the least wall time this machine needs for the work of the "
          "hosts' tools; preflight near it means the simulated hosts, not the cockpit, set the pace")
    return 0


if __name__ == "__main__":
    sys.exit(main())
