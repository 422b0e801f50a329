"""Cost of the flight recorder: CPU and bytes per day for 4 ranks sampled every second, next to a floor.

Two measurements, each next to a floor measured in the same run:

(a) A recorded day, compressed: `--hours` (default 6) of stats at 1 s are fed through the real feed
    (`recipe.recording.Recording.record_stats` reading a `ClusterStats` history, as the monitor's
    judgement does) into the real store, one commit per 2 simulated seconds (10 rows: what a real second
    of 4 ranks + the engine batches up in `COMMIT_EVERY_S`), plus a verdict, a condition and an alert
    every 10 simulated minutes. Printed: CPU seconds per simulated hour (this process, every thread) and
    bytes on disk (database + WAL after a checkpoint), both scaled to a day; the floor: the same rows as
    JSON lines appended to a plain file, flushed every 10 rows.
(b) Real time: `--realtime` seconds (default 30) of the same feed at 1 Hz with the writer committing every
    2 s: this process's CPU per wall second in % of one core, next to the same loop without the recorder.

Targets: <= 1 % of one core and <= 50 MB per day for 4 ranks at 1 s.

    python perf/recorder.py
    python perf/recorder.py --hours 24 --realtime 60 --json
"""

from __future__ import annotations

import argparse
import json
import math
import sqlite3
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from cockpit.config import load_config
from cockpit.recipe.recording import Recording
from cockpit.telemetry.cluster_stats import Alert, ClusterStats
from cockpit.telemetry.recorder import file_bytes

REPO = Path(__file__).resolve().parents[1]
CPU_TARGET_PCT = 1.0
BYTES_TARGET_PER_DAY = 50e6
RANKS = 4
DAY_S = 86_400


def config():  # type: ignore[no-untyped-def]
    cfg = load_config(REPO / "tests" / "fixtures" / "cluster.toml")
    return cfg.model_copy(update={"recorder": cfg.recorder.model_copy(update={"retention_days": 3650,
                                                                              "max_mb": 100_000})})


def point(second: int, rank: int) -> dict[str, float | None]:
    """One realistic stats point: whole numbers where the tools print them, full floats where rates are
    computed (memory in GiB, RDMA Gb/s)."""
    w = math.sin(second / 300 + rank)
    return {"util": float(int(60 + 35 * w)), "sm_mhz": float(2405 - (second + rank) % 7),
            "power_w": round(35 + 10 * w, 2), "temp_c": float(int(60 + 5 * w)),
            "mem_available_gib": (24.5 - rank - 0.001 * (second % 997)) + w / 1e3,
            "tx_gbps": 12.5 + w * 1.37, "rx_gbps": 12.1 - w * 1.29}


def engine_point(second: int) -> dict[str, float | None]:
    w = math.sin(second / 200)
    return {"gen_tps": 200 + 40 * w, "prompt_tps": 900 + 100 * w, "kv_pct": 40 + 10 * w,
            "running": float(int(4 + 3 * w)), "waiting": 0.0}


def feed(stats: ClusterStats, t: float, second: int) -> None:
    for rank in range(RANKS):
        stats.history[rank].add(t, point(second, rank))
    stats.engine_history.add(t, engine_point(second))


def events_every(rec: Recording | None, second: int, t: float) -> None:
    if rec is not None and second % 600 == 0:
        rec.event("verdict", f"cluster ready: cluster READY ({second})", at=t, data={"state": "ready"})
        rec.event("condition", f"rank 2: booting → ready ({second})", rank=2, at=t)


def recorded_day(hours: float, directory: Path) -> dict[str, Any]:
    cfg = config()
    seconds = int(hours * 3600)
    path = directory / "day.sqlite3"
    stats = ClusterStats(list(range(RANKS)), 1.0)
    rec = Recording(cfg, path=path, command="bench")
    rec.recorder.commit_rows, rec.recorder.commit_every_s = 10, 3600.0   # a commit per 2 s of rows
    rec.start()
    t0 = time.time() - seconds
    cpu0 = time.process_time()
    for s in range(seconds):
        t = t0 + s
        feed(stats, t, s)
        events_every(rec, s, t)
        if s % 600 == 300:
            stats.set_alerts((Alert("clock-latched", 1, t, "SM clock latched", "reboot"),))
        elif s % 600 == 400:
            stats.set_alerts(())
        rec.record_stats(stats)
        if s % 1000 == 0:
            rec.recorder.flush(60)          # keep the queue short: the writer keeps up as in real time
    rec.close()
    cpu = time.process_time() - cpu0
    con = sqlite3.connect(path)
    con.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    rows = sum(con.execute(f"SELECT count(*) FROM {t}").fetchone()[0]
               for t in ("samples", "engine", "events"))
    con.close()
    size = file_bytes(path)

    plain = directory / "day.jsonl"
    stats = ClusterStats(list(range(RANKS)), 1.0)
    cpu0 = time.process_time()
    with plain.open("w") as f:
        n = 0
        for s in range(seconds):
            t = t0 + s
            feed(stats, t, s)
            for rank in range(RANKS):
                f.write(json.dumps({"t": t, "rank": rank, **point(s, rank)}) + "\n")
            f.write(json.dumps({"t": t, **engine_point(s)}) + "\n")
            n += RANKS + 1
            if n % 10 == 0:
                f.flush()
    floor_cpu = time.process_time() - cpu0
    scale = DAY_S / seconds
    return {"hours": hours, "rows": rows, "commits": rec.recorder.commits, "dropped": rec.recorder.dropped,
            "bytes_per_day": size * scale, "cpu_s_per_day": cpu * scale,
            "floor_bytes_per_day": plain.stat().st_size * scale, "floor_cpu_s_per_day": floor_cpu * scale,
            "cpu_pct_of_core": 100 * cpu * scale / DAY_S,
            "floor_cpu_pct_of_core": 100 * floor_cpu * scale / DAY_S}


def realtime(seconds: float, directory: Path) -> dict[str, Any]:
    def run(record: bool) -> float:
        stats = ClusterStats(list(range(RANKS)), 1.0)
        rec = Recording(config(), path=directory / "rt.sqlite3", command="bench").start() if record else None
        cpu0, wall0 = time.process_time(), time.monotonic()
        s = 0
        while time.monotonic() - wall0 < seconds:
            t = time.time()
            feed(stats, t, s)
            events_every(rec, s, t)
            if rec is not None:
                rec.record_stats(stats)
            s += 1
            time.sleep(max(0.0, wall0 + s - time.monotonic()))
        cpu, wall = time.process_time() - cpu0, time.monotonic() - wall0
        if rec is not None:
            rec.close()
        return 100 * cpu / wall
    without = run(False)
    with_rec = run(True)
    return {"seconds": seconds, "cpu_pct_with": with_rec, "cpu_pct_without": without,
            "cpu_pct_recorder": with_rec - without}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--hours", type=float, default=6.0, help="simulated hours recorded (default 6)")
    ap.add_argument("--realtime", type=float, default=30.0,
                    help="seconds of the 1 Hz real-time run (0: skip)")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="r37-recorder-bench-") as tmp:
        day = recorded_day(args.hours, Path(tmp))
        rt = realtime(args.realtime, Path(tmp)) if args.realtime > 0 else None
    ok = (day["rows"] > 0 and day["dropped"] == 0 and day["bytes_per_day"] <= BYTES_TARGET_PER_DAY
          and day["cpu_pct_of_core"] <= CPU_TARGET_PCT
          and (rt is None or rt["cpu_pct_recorder"] <= CPU_TARGET_PCT))
    if args.json:
        print(json.dumps({"ok": ok, "day": day, "realtime": rt}, indent=2))
        return 0 if ok else 1
    print(f"recorded {day['hours']:g} h of 4 ranks + engine at 1 s: {day['rows']} rows, "
          f"{day['commits']} commits, {day['dropped']} dropped")
    print(f"  bytes per day : {day['bytes_per_day'] / 1e6:7.1f} MB   (floor, plain JSONL: "
          f"{day['floor_bytes_per_day'] / 1e6:.1f} MB)   target <= {BYTES_TARGET_PER_DAY / 1e6:.0f} MB")
    print(f"  CPU per day   : {day['cpu_s_per_day']:7.1f} s  = {day['cpu_pct_of_core']:.3f} % of a core   "
          f"(floor: {day['floor_cpu_s_per_day']:.1f} s = {day['floor_cpu_pct_of_core']:.3f} %)   target <= "
          f"{CPU_TARGET_PCT:g} %")
    if rt is not None:
        print(f"real time, {rt['seconds']:g} s at 1 Hz: {rt['cpu_pct_with']:.3f} % of a core with the "
              f"recorder, {rt['cpu_pct_without']:.3f} % without: the recorder {rt['cpu_pct_recorder']:.3f} %")
    print("PASS" if ok else "FAIL")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
