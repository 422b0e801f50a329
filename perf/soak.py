"""Soak benchmark: the TUI left running on a demo cluster with logs on; RSS and CPU every minute; a verdict.

Needs a running demo cluster (`r37-cockpit sim up --dir DIR`). The real `CockpitApp` runs headless under
Textual's Pilot with the Logs pane shown, connected over SSH like `r37-cockpit tui` (its watcher, header
and Hosts pane poll as usual). On every host a stand-in container named like the engine's prints
`--rate` lines/s (an engine's steady chatter) for the whole run, so the followers stay busy. Every
`--every` seconds (60) it prints RSS, CPU share since the last sample, lines received and retained. At the
end the least-squares slope of RSS over the samples (the first, warm-up one left out) gives the verdict:
"flat" when it is at most `--max-slope` MB/min, else "growing". The run uses a copy of cluster.toml with
`[ui] log_buffer_lines = --buffer-lines` (1000 per rank), so the log store is full by the first sample and
the growth it rightly has is not mistaken for a leak. It refuses a cluster that `sim up` did not make or
that has a container of that name; at the end it stops and removes exactly the containers it created (by
their IDs), never one by name.

    python perf/soak.py --dir DIR [--minutes 60] [--every 60] [--rate 20] [--max-slope 1.0]
                              [--buffer-lines 1000] [--json]

FAIL (exit 1) when growing, or when no log line reached the store (nothing was measured).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from flood import flood_containers, require_sim
from logs import rss_mb

from cockpit.config import load_config
from cockpit.tui.app import CockpitApp
from cockpit.tui.panes.logs import LogsPane


def slope_per_min(points: list[tuple[float, float]]) -> float:
    """Least-squares slope of (seconds, MB) points, in MB per minute."""
    n = len(points)
    if n < 2:
        return float("nan")
    mx = sum(t for t, _ in points) / n
    my = sum(v for _, v in points) / n
    den = sum((t - mx) ** 2 for t, _ in points)
    return 60 * sum((t - mx) * (v - my) for t, v in points) / den if den else float("nan")


def with_buffer(toml: str, lines: int) -> str:
    """cluster.toml with `[ui] log_buffer_lines` set (the per-rank cap of the Logs pane's store)."""
    if "\n[ui]\n" in "\n" + toml:
        return toml.replace("[ui]\n", f"[ui]\nlog_buffer_lines = {lines}\n", 1)
    return toml.rstrip("\n") + f"\n\n[ui]\nlog_buffer_lines = {lines}\n"


async def soak(cluster_dir: Path, minutes: float, every: float, rate: float, max_slope: float,
               buffer_lines: int, out: Any) -> dict[str, Any]:
    # a small per-rank cap: the store is full after the warm-up sample, so what the log store rightly
    # holds stops growing and any further growth is the cockpit's own
    require_sim(cluster_dir)
    created: dict[int, str] = {}
    toml = Path(tempfile.mkdtemp(prefix="r37-soak-")) / "cluster.toml"
    toml.write_text(with_buffer((cluster_dir / "cluster.toml").read_text(), buffer_lines))
    cfg = load_config(toml)
    app = CockpitApp(cfg, toml)
    samples: list[dict[str, Any]] = []
    seconds = minutes * 60
    try:
        async with app.run_test(size=(160, 45)) as pilot:
            app.action_show_pane("logs")
            await pilot.pause(0.5)
            pane = app.query_one(LogsPane)
            if not await app.fleet.wait_connected(20):
                raise SystemExit("the TUI's fleet did not connect")
            await flood_containers(cfg, True, rate, seconds + 2 * every, created)
            t0, cpu0 = time.perf_counter(), time.process_time()
            last_t, last_cpu = t0, cpu0
            while True:
                await pilot.pause(min(every, max(0.0, t0 + seconds - time.perf_counter())) or 0.01)
                now, cpu = time.perf_counter(), time.process_time()
                s = {"t_s": round(now - t0, 1), "rss_mb": round(rss_mb(), 1),
                     "cpu_share": round((cpu - last_cpu) / max(now - last_t, 1e-9), 3),
                     "received": pane.store.received, "retained": pane.store.live,
                     "dropped": pane.store.dropped}
                samples.append(s)
                print(f"  {s['t_s']:>7.1f} s: RSS {s['rss_mb']:>6.1f} MB, CPU {s['cpu_share'] * 100:5.1f} %, "
                      f"lines received {s['received']:,}, retained {s['retained']:,}", file=out, flush=True)
                last_t, last_cpu = now, cpu
                if now - t0 >= seconds - 0.5:
                    break
    finally:
        await flood_containers(cfg, False, rate, 0, created)
    points = [(s["t_s"], s["rss_mb"]) for s in samples[1:]]
    slope = slope_per_min(points)
    received = samples[-1]["received"] if samples else 0
    measured_nothing = received == 0 or len(points) < 2
    verdict = "unknown" if measured_nothing else ("flat" if slope <= max_slope else "growing")
    return {"minutes": minutes, "every_s": every, "offered_lines_per_s": rate * len(cfg.ranks),
            "buffer_lines_per_rank": buffer_lines,
            "samples": samples, "slope_mb_per_min": round(slope, 3), "max_slope_mb_per_min": max_slope,
            "verdict": verdict, "measured_nothing": measured_nothing, "passed": verdict == "flat"}


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--dir", type=Path, required=True, help="a running demo cluster's directory")
    p.add_argument("--minutes", type=float, default=60.0)
    p.add_argument("--every", type=float, default=60.0, help="seconds between samples")
    p.add_argument("--rate", type=float, default=20.0, help="lines/s each host's container prints")
    p.add_argument("--max-slope", type=float, default=1.0, help="MB/min of RSS growth still called flat")
    p.add_argument("--buffer-lines", type=int, default=1000,
                   help="[ui] log_buffer_lines for the run (per rank; full after the first sample)")
    p.add_argument("--json", action="store_true")
    a = p.parse_args()
    out = sys.stderr if a.json else sys.stdout
    print(f"TUI soak: Logs pane shown, {a.rate:g} lines/s on each of the demo hosts, {a.minutes:g} min, "
          f"log buffer {a.buffer_lines:,} lines/rank", file=out)
    r = asyncio.run(soak(a.dir, a.minutes, a.every, a.rate, a.max_slope, a.buffer_lines, out))
    if a.json:
        print(json.dumps(r, indent=2))
    else:
        first, last = r["samples"][0], r["samples"][-1]
        print(f"RSS {first['rss_mb']} -> {last['rss_mb']} MB; slope {r['slope_mb_per_min']} MB/min after the "
              f"first sample (flat <= {r['max_slope_mb_per_min']:g}); {last['received']:,} lines received")
        if r["measured_nothing"]:
            print("FAIL: no log line reached the store or too few samples: nothing was measured")
        print(f"verdict: {r['verdict']}")
        print("PASS" if r["passed"] else "FAIL")
    return 0 if r["passed"] else 1


if __name__ == "__main__":
    sys.exit(main())
