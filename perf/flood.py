"""Flood benchmark: all four log streams flooding over the real SSH path while keys are pressed in the TUI.

Needs a running demo cluster (`r37-cockpit sim up --dir DIR`). The real `CockpitApp` runs headless under
Textual's Pilot with the Logs pane shown, connected to the cluster over SSH like `r37-cockpit tui`. First
the baseline: the same key presses with no flood (no container). Then on every host a stand-in container
named like the engine's (the Logs pane follows that name) prints `--rate` lines/s for `--seconds`; the
pane's followers (`docker logs -f -t`, one SSH channel per host) receive them while a key task presses `t`
(timestamps toggle) every 250 ms and times key -> action -> next frame. Printed: key latency p50/p99/max
for both phases, RSS every few seconds, lines received, and the log store's dropped lines (evicted by the
per-rank cap, and skipped because a reader outran the pane). The runtime image is loaded first where it
is missing; the flood containers are the benchmark's own and are removed at the end.

    python perf/flood.py --dir DIR [--seconds 60] [--rate 5000] [--baseline-seconds 10] [--json]

Targets (issue 11): key latency p99 < 100 ms under the flood; RSS <= 300 MB. FAIL (exit 1) when a target
is missed or when no flood line reached the store (a benchmark that measured nothing).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from logs import _ensure_image, pct, press_and_time, rss_mb

from cockpit.config import ClusterConfig, load_config
from cockpit.hosts import Fleet, Result
from cockpit.hosts.shell import command
from cockpit.recipe import containers as dk
from cockpit.tui.app import CockpitApp
from cockpit.tui.panes.logs import LogsPane

LATENCY_TARGET_MS = 100.0
RSS_TARGET_MB = 300.0
KEY_EVERY = 0.25

# one line per iteration, written in batches every 10 ms to hold `rate` lines/s for `seconds`
FLOOD = ("import sys, time\n"
         "rate, seconds = float(sys.argv[1]), float(sys.argv[2])\n"
         "t0 = time.time(); n = 0; w = sys.stdout.write\n"
         "while (now := time.time()) - t0 < seconds:\n"
         "    due = int((now - t0) * rate)\n"
         "    while n < due:\n"
         "        n += 1; w(f'(Worker_TP0 pid=305) INFO flood line {n} [loggers.py:127] Engine 000: "
         "Avg prompt throughput: 0.0 tokens/s\\n')\n"
         "    sys.stdout.flush(); time.sleep(0.01)\n")


def summary(lat: list[float]) -> dict[str, Any]:
    return {"keys": len(lat), "p50_ms": round(statistics.median(lat), 1) if lat else None,
            "p99_ms": round(pct(lat, 0.99), 1) if lat else None,
            "max_ms": round(max(lat), 1) if lat else None}


async def press_keys(app: CockpitApp, pane: LogsPane, seconds: float, rss: list[tuple[float, float]],
                     t_start: float) -> list[float]:
    lat: list[float] = []
    next_rss = 0.0
    t_end = time.perf_counter() + seconds
    while time.perf_counter() < t_end:
        await asyncio.sleep(KEY_EVERY)
        lat.append(await press_and_time(app, pane))
        now = time.perf_counter()
        if now >= next_rss:
            rss.append((round(now - t_start, 1), round(rss_mb(), 1)))
            next_rss = now + 5.0
    return lat


def require_sim(cluster_dir: Path) -> None:
    """Refuse anything but a simulated cluster (`r37-cockpit sim up`): a benchmark never runs its
    containers on hosts it did not make."""
    toml = cluster_dir / "cluster.toml"
    head = toml.read_text(errors="replace")[:200] if toml.is_file() else ""
    if not (head.startswith("# Written by `r37-cockpit sim up`") and (cluster_dir / "hosts").is_dir()):
        raise SystemExit(f"{cluster_dir} is not a simulated cluster made by `r37-cockpit sim up`: refused "
                         "(this benchmark starts containers on the hosts)")


async def flood_containers(cfg: ClusterConfig, start: bool, rate: float, seconds: float,
                           created: dict[int, str]) -> None:
    """Start the benchmark's flooding containers, named like the engine's, on every host, recording the
    ID of each one it created in `created`; or (start False) stop and remove exactly those IDs, never a
    container by name and never one it did not create (a refused start creates nothing)."""
    name = cfg.cluster.container_name
    async with Fleet(cfg) as fleet:
        if not await fleet.wait_connected(20):
            raise SystemExit("the demo cluster's hosts did not all connect")
        if start:
            await _ensure_image(fleet, cfg)
            have = await fleet.run_all(command(["docker", "ps", "-a", "--format", "{{.Names}}"]))
            taken = [r for r, res in have.items() if isinstance(res, Result) and name in res.stdout.split()]
            if taken:
                raise SystemExit(f"a container named {name} exists on ranks {taken}: use a fresh cluster")
            res = await fleet.run_all(command(["docker", "run", "-d", "--name", name, "--entrypoint",
                                               "python3", cfg.runtime.image_tag, "-c", FLOOD, str(rate),
                                               str(seconds)]))
            for r, x in res.items():
                cid = dk.container_id_from_output(x.stdout) if isinstance(x, Result) else None
                if cid is not None:
                    created[r] = cid
            bad = {r: x for r, x in res.items() if not (isinstance(x, Result) and x.ok)}
            if bad:
                raise SystemExit(f"the flood containers did not start: {bad}")
        else:
            mine = dict(created)
            await fleet.run_all(lambda h: command(dk.stop_argv(mine[h.rank])), ranks=list(mine))
            await fleet.run_all(lambda h: command(dk.rm_argv(mine[h.rank])), ranks=list(mine))
            created.clear()


async def bench(cluster_dir: Path, seconds: float, rate: float, baseline_s: float) -> dict[str, Any]:
    require_sim(cluster_dir)
    cfg = load_config(cluster_dir / "cluster.toml")
    app = CockpitApp(cfg, cluster_dir / "cluster.toml")
    created: dict[int, str] = {}
    rss: list[tuple[float, float]] = []
    t_start = time.perf_counter()
    try:
        async with app.run_test(size=(160, 45)) as pilot:
            app.action_show_pane("logs")
            await pilot.pause(0.5)
            pane = app.query_one(LogsPane)
            if not await app.fleet.wait_connected(20):
                raise SystemExit("the TUI's fleet did not connect")
            base = await press_keys(app, pane, baseline_s, rss, t_start)
            base_received = pane.store.received
            await flood_containers(cfg, True, rate, seconds, created)
            t0 = time.perf_counter()
            flood = await press_keys(app, pane, seconds, rss, t_start)
            elapsed = time.perf_counter() - t0
            await pilot.pause(1.0)
            store = pane.store
            skipped = sum(store.rank(r).skipped for r in cfg.ranks)
            result = {
                "baseline": {**summary(base), "seconds": baseline_s, "lines": base_received},
                "flood": {**summary(flood), "seconds": round(elapsed, 1), "offered_lines_per_s": rate * 4,
                          "received": store.received - base_received,
                          "received_per_s": round((store.received - base_received) / elapsed),
                          "retained": store.live, "dropped": store.dropped, "dropped_skipped": skipped,
                          "dropped_evicted": store.dropped - skipped,
                          "per_rank_capacity": store.capacity},
                "rss_mb": rss, "rss_mb_max": max(v for _, v in rss),
            }
    finally:
        await flood_containers(cfg, False, rate, seconds, created)
    f = result["flood"]
    result["targets"] = {"key_p99_ms": LATENCY_TARGET_MS, "rss_mb": RSS_TARGET_MB}
    result["measured_nothing"] = f["received"] == 0
    result["passed"] = (not result["measured_nothing"] and f["p99_ms"] is not None
                        and f["p99_ms"] < LATENCY_TARGET_MS and result["rss_mb_max"] <= RSS_TARGET_MB)
    return result


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--dir", type=Path, required=True, help="a running demo cluster's directory")
    p.add_argument("--seconds", type=float, default=60.0, help="how long the four streams flood")
    p.add_argument("--rate", type=float, default=5000.0, help="lines/s each host's container prints")
    p.add_argument("--baseline-seconds", type=float, default=10.0, help="keys pressed with no flood")
    p.add_argument("--json", action="store_true")
    a = p.parse_args()
    r = asyncio.run(bench(a.dir, a.seconds, a.rate, a.baseline_seconds))
    if a.json:
        print(json.dumps(r, indent=2))
        return 0 if r["passed"] else 1
    b, f = r["baseline"], r["flood"]
    print("TUI (Logs pane shown, connected over SSH) with 4 flooding stand-in containers on the demo hosts")
    print(f"baseline (no flood, {b['seconds']:g} s): key p50/p99/max {b['p50_ms']}/{b['p99_ms']}/"
          f"{b['max_ms']} ms over {b['keys']} keys")
    print(f"flood ({f['seconds']:g} s, offered {f['offered_lines_per_s']:,.0f} lines/s): key p50/p99/max "
          f"{f['p50_ms']}/{f['p99_ms']}/{f['max_ms']} ms over {f['keys']} keys (target p99 < "
          f"{LATENCY_TARGET_MS:g} ms)")
    print(f"  lines received {f['received']:,} ({f['received_per_s']:,}/s), retained {f['retained']:,}, "
          f"dropped {f['dropped']:,} (evicted by the {f['per_rank_capacity']:,}/rank cap "
          f"{f['dropped_evicted']:,}, skipped by a reader that outran the pane {f['dropped_skipped']:,})")
    print("  RSS MB over time (s, MB): " + ", ".join(f"{t:g}:{v:g}" for t, v in r["rss_mb"]))
    print(f"  RSS max {r['rss_mb_max']} MB (target <= {RSS_TARGET_MB:g})")
    if r["measured_nothing"]:
        print("  FAIL: no flood line reached the log store: nothing was measured")
    print("PASS" if r["passed"] else "FAIL")
    return 0 if r["passed"] else 1


if __name__ == "__main__":
    sys.exit(main())
