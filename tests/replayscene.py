"""A recorded session for the replay tests, made by the real recorder: `recipe.recording.Recording` driven
with a ClusterStats history and verdict events, as the live cockpit drives it, at fixed times (the
recording's clock is pinned while it is made; nothing else of the test's clock is).

The scene, from T0: recording begins; every rank samples each second for 120 s (util 90 %, SM 2405 MHz;
rank 2's SM clock drops to 820 MHz from T0+60); the engine generates 50.6 tok/s; verdict READY at T0+30;
rank 2's clock-latched alert raised at T0+65 and cleared at T0+110; verdict DOWN (rank 2 failed first)
at T0+100; recording ends at T0+120."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from cockpit.config import ClusterConfig
from cockpit.recipe.recording import Recording
from cockpit.recipe.timeline import ClusterVerdict, VerdictChanged
from cockpit.telemetry.cluster_stats import Alert, ClusterStats

T0 = time.mktime((2026, 3, 14, 22, 58, 0, 0, 0, -1))
READY_AT, ALERT_AT, DOWN_AT, CLEARED_AT, END = 30, 65, 100, 110, 120
LATCHED = Alert("clock-latched", 2, T0 + ALERT_AT, "SM clock latched: under load at 820 MHz",
                "reboot the host", "fail")


def record_scene(config: ClusterConfig, path: Path) -> Path:
    """Write the scene to `path` with the real recorder; returns `path`."""
    clock = [T0]
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr("cockpit.recipe.recording.time.time", lambda: clock[0])
        rec = Recording(config, path=path, command="tui").start()
        stats = ClusterStats(list(config.ranks), 1.0, config.cluster.name)
        ready = ClusterVerdict("ready", "cluster READY: API answers /health and lists the model")
        down = ClusterVerdict("down", "rank 2 failed first: NCCL error", 2, "check the fabric")
        for s in range(END + 1):
            clock[0] = T0 + s
            for rank in stats.ranks:
                sm = 820.0 if rank == 2 and s >= 60 else 2405.0
                stats.history[rank].add(T0 + s, {"util": 90.0, "sm_mhz": sm, "power_w": 80.0 + rank,
                                                 "temp_c": 61.0, "mem_available_gib": 20.0,
                                                 "tx_gbps": 12.5, "rx_gbps": 12.5})
            stats.engine_history.add(T0 + s, {"gen_tps": 50.6, "prompt_tps": 900.0, "kv_pct": 12.0,
                                              "running": 3.0, "waiting": 0.0})
            if s == READY_AT:
                rec.on_event(VerdictChanged(ready))
            if s == DOWN_AT:
                rec.on_event(VerdictChanged(down))
            stats.set_alerts((LATCHED,) if ALERT_AT <= s < CLEARED_AT else ())
            rec.record_stats(stats)
        rec.close()
    return path
