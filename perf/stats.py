"""Cost of the Stats sampler on a demo cluster: the cockpit's CPU and the remote processes it starts.

One process connects the fleet (4 demo hosts) and measures, for `--seconds` each:

- baseline: the fleet connected, no sampler;
- sampling: the same fleet with a `StatsMonitor` at `--interval` (1 s), after its first full sample (no
  TUI, no cluster watcher: rank 0's /metrics is the watcher's read and costs the same without Stats);
- baseline again, after the sampler is closed (how much the machine's own noise moves the figures).

(a) CPU: `time.process_time()` deltas of this process per second of wall time, sampling next to the
mean of the two baselines; the figure is sampling minus baseline, target <= 2 % of one core.
(b) Remote processes started per minute per host after start-up, sampling minus baseline. The demo
hosts run on this machine; by default the bench starts its demo cluster in a PID namespace of its own
(root, `unshare`), and counts that namespace's forks (its `ns_last_pid`, read with `nsenter`; each read
is one fork, subtracted): only the hosts' processes, none of the machine's. With `--dir` (a cluster
that is already running) it falls back to the kernel's fork counter of the whole machine (`processes`
in /proc/stat), which counts every other program too: both baselines are printed so the noise shows.
Target 0. `sampler.starts` (channels started per rank) is printed before and after the window.

    python perf/stats.py                 # starts a demo cluster in a temp dir, then stops it
    python perf/stats.py --dir DIR       # an already running `r37-cockpit sim up --dir DIR`
    python perf/stats.py --seconds 30 --interval 1 --json
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from cockpit.config import load_config
from cockpit.hosts import Fleet
from cockpit.recipe.monitor import StatsMonitor

CPU_TARGET_PCT = 2.0
FORK_TARGET = 0.0
FORK_NOISE = 0.5    # per host per minute allowed for the machine's own forks (--dir: whole-machine counter)
WARMUP_S = 3.0


def machine_forks() -> int:
    """The kernel's count of processes created since boot (`processes` in /proc/stat)."""
    with open("/proc/stat") as f:
        for line in f:
            if line.startswith("processes "):
                return int(line.split()[1])
    raise SystemExit("/proc/stat has no `processes` line")


class Namespace:
    """A demo cluster in a PID namespace of its own; `forks()` counts the processes created in it."""

    def __init__(self, cluster_dir: Path) -> None:
        self.dir = cluster_dir
        d, py = shlex.quote(str(cluster_dir)), shlex.quote(sys.executable)
        script = f"{py} -m cockpit sim up --dir {d} || exit 1; exec sleep 100000"
        with open(f"{cluster_dir}.log", "w") as log:    # sim up's output, and unshare's own notes
            self.proc = subprocess.Popen(["unshare", "--pid", "--fork", "--mount-proc", "sh", "-c", script],
                                         stdin=subprocess.DEVNULL, stdout=log, stderr=log)
        deadline = time.monotonic() + 60
        self.init: int | None = None
        while time.monotonic() < deadline and self.proc.poll() is None:
            kids = subprocess.run(["ps", "-o", "pid=,comm=", "--ppid", str(self.proc.pid)],
                                  capture_output=True, text=True).stdout.split()
            if len(kids) == 2 and kids[1] == "sleep":
                self.init = int(kids[0])
                break
            time.sleep(0.2)
        if self.init is None:
            self.close()
            raise SystemExit(f"the demo cluster did not come up in its namespace (see {cluster_dir}.log)")

    def forks(self) -> int:
        """Processes created in the namespace so far (not counting the reads themselves)."""
        out = subprocess.run([*self.enter, "cat", "/proc/sys/kernel/ns_last_pid"], capture_output=True,
                             text=True, check=True).stdout
        return int(out)

    @property
    def enter(self) -> list[str]:
        return ["nsenter", "-t", str(self.init), "-p", "-m"]

    def close(self) -> None:
        if self.init is not None:
            down = [sys.executable, "-m", "cockpit", "sim", "down", "--dir", str(self.dir)]
            subprocess.run([*self.enter, *down], capture_output=True, timeout=60)
            os.kill(self.init, signal.SIGKILL)   # the namespace's init: the rest of it goes with it
        self.proc.wait(10)


async def window(seconds: float, forks: Callable[[], int], read_cost: int) -> dict[str, float]:
    """CPU of this process (% of one core) and forks counted by `forks` over `seconds` of wall time."""
    wall0, cpu0, fork0 = time.monotonic(), time.process_time(), forks()
    await asyncio.sleep(seconds)
    wall, cpu = time.monotonic() - wall0, time.process_time() - cpu0
    n = forks() - fork0 - read_cost
    return {"seconds": round(wall, 2), "cpu_pct": round(100 * cpu / wall, 3), "forks": n,
            "forks_per_min": round(n * 60 / wall, 2)}


async def bench(cluster_dir: Path, seconds: float, interval: float, ns: Namespace | None) -> dict[str, Any]:
    cfg = load_config(cluster_dir / "cluster.toml")
    hosts = len(cfg.hosts)
    forks, read_cost = (ns.forks, 1) if ns is not None else (machine_forks, 0)
    async with Fleet(cfg) as fleet:
        if not await fleet.wait_connected(cfg.ssh.connect_timeout + 10):
            raise SystemExit("not every demo host connected")
        await asyncio.sleep(WARMUP_S)
        base1 = await window(seconds, forks, read_cost)
        monitor = StatsMonitor(fleet, cfg, None, interval)
        async with monitor:
            if not await monitor.first_sample(30):
                raise SystemExit("no full sample from every rank within 30 s")
            await asyncio.sleep(WARMUP_S)
            starts_before = dict(monitor.sampler.starts)
            sampling = await window(seconds, forks, read_cost)
            starts_after = dict(monitor.sampler.starts)
            rounds = {r: s.round_at is not None and time.time() - s.round_at < 3 * interval
                      for r, s in monitor.stats.ranks.items()}
        await asyncio.sleep(WARMUP_S)
        base2 = await window(seconds, forks, read_cost)
    base_cpu = (base1["cpu_pct"] + base2["cpu_pct"]) / 2
    base_forks = (base1["forks_per_min"] + base2["forks_per_min"]) / 2
    return {
        "hosts": hosts, "interval_s": interval, "seconds": seconds,
        "fork_counter": "the demo cluster's PID namespace" if ns is not None else "the whole machine",
        "baseline_before": base1, "sampling": sampling, "baseline_after": base2,
        "cpu_pct_of_one_core": round(sampling["cpu_pct"] - base_cpu, 3), "cpu_target_pct": CPU_TARGET_PCT,
        "remote_processes_per_min_per_host": round((sampling["forks_per_min"] - base_forks) / hosts, 2),
        "remote_processes_target": FORK_TARGET,
        "sampler_starts_before": starts_before, "sampler_starts_after": starts_after,
        "every_rank_current": all(rounds.values()),
    }


def report(r: dict[str, Any]) -> str:
    b1, s, b2 = r["baseline_before"], r["sampling"], r["baseline_after"]
    def row(name: str, w: dict[str, float]) -> str:
        return (f"{name:<28} {w['seconds']:6.1f} s  CPU {w['cpu_pct']:6.3f} % of one core  "
                f"forks {int(w['forks']):5d} ({w['forks_per_min']:.1f}/min)")
    cpu_ok = r["cpu_pct_of_one_core"] <= r["cpu_target_pct"]
    noise = FORK_NOISE if r["fork_counter"] == "the whole machine" else 0.0
    fork_ok = (r["remote_processes_per_min_per_host"] <= FORK_TARGET + noise
               and r["sampler_starts_after"] == r["sampler_starts_before"])
    return "\n".join([
        f"{r['hosts']} demo hosts, sampler every {r['interval_s']:g} s, {r['seconds']:g} s per window",
        f"forks counted in {r['fork_counter']}",
        row("baseline (fleet, no sampler)", b1),
        row("sampling (fleet + Stats)", s),
        row("baseline again", b2),
        f"(a) sampler CPU: {r['cpu_pct_of_one_core']:.3f} % of one core (sampling minus mean baseline; "
        f"target <= {r['cpu_target_pct']:g} %): {'PASS' if cpu_ok else 'FAIL'}",
        f"(b) remote processes started: {r['remote_processes_per_min_per_host']:.2f} per minute per host "
        f"(sampling minus mean baseline, / {r['hosts']}; target 0): {'PASS' if fork_ok else 'FAIL'}",
        f"    sampler.starts before the window {r['sampler_starts_before']}, "
        f"after {r['sampler_starts_after']}; every rank current at the end: {r['every_rank_current']}",
    ])


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dir", type=Path, help="a running demo cluster directory (default: start one)")
    ap.add_argument("--seconds", type=float, default=30.0, help="seconds per window (default 30)")
    ap.add_argument("--interval", type=float, default=1.0, help="sampler interval (default 1 s)")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    ns: Namespace | None = None
    tmp: Path | None = None
    if args.dir is None:
        if os.geteuid() != 0 or not shutil.which("unshare") or not shutil.which("nsenter"):
            raise SystemExit("without --dir the bench needs root and unshare/nsenter (a PID namespace for "
                             "the demo cluster); or pass --dir of a running `r37-cockpit sim up`")
        tmp = Path(tempfile.mkdtemp(prefix="r37-bench-stats-"))
        ns = Namespace(tmp / "cluster")
        args.dir = tmp / "cluster"
    try:
        out = asyncio.run(bench(args.dir.resolve(), args.seconds, args.interval, ns))
    finally:
        if ns is not None:
            ns.close()
        if tmp is not None:
            shutil.rmtree(tmp, ignore_errors=True)
    print(json.dumps(out, indent=2) if args.json else report(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
