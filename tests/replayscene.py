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

from cockpit.api.liveness import Liveness
from cockpit.api.status import ApiStatus
from cockpit.config import ClusterConfig
from cockpit.recipe.containers import ContainerState
from cockpit.recipe.phases import Phase
from cockpit.recipe.recording import Recording
from cockpit.recipe.timeline import ClusterTimeline, ClusterVerdict, LaunchEvent, VerdictChanged
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


# ---- a launch, recorded from the live model ---------------------------------------------------------------

LAUNCHED_AT, READY2_AT, HUNG_AT, STOP_AT, STOPPED_AT = 3, 60, 90, 100, 105
HUNG_SINCE = 75
BOOT = ((Phase.RUNNING, 1), (Phase.DIST_INIT, 8), (Phase.LOADING, 20), (Phase.KV_CACHE, 40),
        (Phase.CUDA_GRAPHS, 45))


def record_launch(config: ClusterConfig, path: Path) -> dict[int, dict[int, tuple[str, str]]]:
    """A staged launch driven through the real live model (`ClusterTimeline`) and recorded by the real
    recorder from its events, as the watcher feeds it: ranks 3, 2, 1, 0 launched a second apart from
    T0+3, booting through their phases (workers wait for the head at T0+50, the head starts its API at
    T0+52); the API not ready from T0+8, ready at T0+60 (cluster READY); the engine serving at T0+62 and
    HUNG at T0+90 (flat since T0+75; rank 2's GPU idle at 0 % while the others spin at 100 %); a stop
    asked at T0+100, every rank stopped at T0+105 (API down); recording ends at T0+120.

    Returns the live model as it stood at every second: {s: {rank: (condition, phase)}}."""
    clock = [T0]
    model = ClusterTimeline(config.ranks, hang_after_s=config.engine.hang_after_s)
    seen: dict[int, dict[int, tuple[str, str]]] = {}
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr("cockpit.recipe.recording.time.time", lambda: clock[0])
        rec = Recording(config, path=path, command="tui").start()
        stats = ClusterStats(list(config.ranks), 1.0, config.cluster.name)

        def feed(events: list[LaunchEvent]) -> None:
            for event in model.settle(events):
                rec.on_event(event, model)

        order = sorted(config.ranks, reverse=True)
        for s in range(END + 1):
            clock[0] = t = T0 + s
            events: list[LaunchEvent] = []
            if s == 2:
                rec.event("launch", "launch ranks 3, 2, 1, 0 (by op@admin)")
                model.launch_in_progress = True
            for i, rank in enumerate(order):
                start = LAUNCHED_AT + i
                if s == start:
                    events += model[rank].launched(t, f"c{rank}")
                for phase, after in BOOT:
                    if s == start + after:
                        events += model[rank].enter(phase, t)
                if s == 50 and rank != min(order):
                    events += model[rank].enter(Phase.WAIT_HEAD, t)
            if s == 52:
                events += model[min(order)].enter(Phase.API_START, t)
            if s == 8:
                events += model.mark_api(ApiStatus("not_ready", "refused: the API is not up yet"), t)
            if s == READY2_AT:
                events += model.mark_api(ApiStatus("ready", "API ready: /health 200, model listed"), t)
                model.launch_in_progress = False
            if s == 62:
                events += model.mark_liveness(Liveness("serving", t, "50.6 tok/s generated, 8 running"))
            if s == HUNG_AT:
                events += model.mark_liveness(Liveness("hung", T0 + HUNG_SINCE, "8 running, 0 waiting, but "
                                                       "vllm:generation_tokens_total has not grown for 15 s",
                                                       "stop and relaunch"))
            if s == STOP_AT:
                for rank in order:
                    events += model[rank].request_stop(t)
            if s == STOPPED_AT:
                for rank in order:
                    events += model[rank].feed_container(ContainerState(
                        f"c{rank}", f"r37-rank{rank}", "exited", exit_code=0, finished_at=t,
                        started_at=T0 + LAUNCHED_AT), t)
                events += model.mark_api(ApiStatus("down", "rank 0 has no running container"), t)
            feed(events)
            for rank in stats.ranks:
                idle = rank == 2 and s >= HUNG_SINCE
                stats.history[rank].add(t, {"util": 0.0 if idle or s >= STOPPED_AT else 100.0,
                                            "sm_mhz": 600.0 if idle else 2405.0, "power_w": 80.0,
                                            "temp_c": 61.0, "mem_available_gib": 20.0,
                                            "tx_gbps": 0.0, "rx_gbps": 0.0})
            rec.record_stats(stats)
            seen[s] = {r: (tl.condition, tl.phase.value) for r, tl in model.ranks.items()}
        rec.close()
    return seen
