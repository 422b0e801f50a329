"""Replay of a recorded session (`r37-cockpit replay`): the flight recorder's rows fed back into the
core models the live panes render, as they stood at a moving replay time.

- `ReplayClock`: the replay time, which the operator pauses, moves and speeds up; its `label()` is the
  one text the header shows ("REPLAY 2026-12-04 03:12:05 ×2 ⏸").
- `Replay(path, ranks, interval_s)`: the recording, opened read-only. `state_at(t)` rebuilds what the
  cockpit knew at `t`: a `ClusterStats` (each rank's newest recorded figures and the recorded points
  before them as its history, rank 0's engine figures, the alerts raised and not yet cleared), the
  verdict (the newest recorded verdict change), the live model of the cluster (`ClusterTimeline`: every
  rank's phases, failure, stop, host; the API status and the engine's liveness) rebuilt from the recorded
  events (`recipe.replay_timeline`), and the recorded events up to then.

What is not recorded (logs, chat, bench runs' turns, setup output, host connections) is not rebuilt:
the replay says so instead of showing anything live.
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from cockpit.recipe.replay_timeline import timeline_at
from cockpit.recipe.timeline import ClusterTimeline
from cockpit.recipe.timeline_events import ClusterVerdict
from cockpit.telemetry.cluster_stats import (
    ENGINE_SERIES,
    HISTORY_POINTS,
    RANK_SERIES,
    Alert,
    ClusterStats,
    MemoryStats,
    RankStats,
)
from cockpit.telemetry.engine_stats import EngineStatsReading
from cockpit.telemetry.gpu import GpuReading
from cockpit.telemetry.recorder import (
    Event,
    RecordingUnreadable,
    open_for_reading,
    read_events,
    read_series,
)

SPEEDS = (0.25, 0.5, 1.0, 2.0, 5.0, 10.0, 30.0, 60.0, 300.0)
NOT_RECORDED = "not recorded: replay shows the recorded verdicts, stats, alerts and events"
NO_VERDICT = ClusterVerdict("unknown", "no verdict recorded before this time")
VERDICT_STATES = {"idle", "launching", "ready", "hung", "down", "stopped", "stopping", "host-lost",
                  "unknown", "incomplete"}


def stamp(t: float) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(t))


@dataclass
class ReplayClock:
    """The replay time within [start, end]: runs at `speed` recorded seconds per second unless paused;
    reaching the end pauses it."""

    start: float
    end: float
    at: float
    speed: float = 1.0
    paused: bool = False
    wall: Callable[[], float] = time.monotonic
    _since: float = field(default=0.0, init=False)

    def __post_init__(self) -> None:
        self.at = min(max(self.at, self.start), self.end)
        self._since = self.wall()

    def now(self) -> float:
        """The replay time now (moves it on by the wall time passed times the speed)."""
        wall = self.wall()
        if not self.paused:
            self.at += (wall - self._since) * self.speed
            if self.at >= self.end:
                self.at, self.paused = self.end, True
        self._since = wall
        return self.at

    def go(self, t: float) -> float:
        self.now()
        self.at = min(max(t, self.start), self.end)
        return self.at

    def move(self, seconds: float) -> float:
        return self.go(self.now() + seconds)

    def toggle(self) -> bool:
        """Pause or run on (from the start again when paused at the end); returns paused."""
        self.now()
        if self.paused and self.at >= self.end:
            self.at = self.start
        self.paused = not self.paused
        return self.paused

    def faster(self, step: int = 1) -> float:
        self.now()
        at = min(range(len(SPEEDS)), key=lambda i: abs(SPEEDS[i] - self.speed))
        self.speed = SPEEDS[min(max(at + step, 0), len(SPEEDS) - 1)]
        return self.speed

    def label(self, compact: bool = False) -> str:
        """"REPLAY 2026-12-04 03:12:05 ×2 ⏸" (the time only when compact); ⏸ while paused."""
        when = time.strftime("%H:%M:%S" if compact else "%Y-%m-%d %H:%M:%S", time.localtime(self.now()))
        return f"REPLAY {when} ×{self.speed:g}" + (" ⏸" if self.paused else "")


@dataclass(frozen=True)
class ReplayState:
    at: float
    stats: ClusterStats
    verdict: ClusterVerdict
    events: tuple[Event, ...]
    timeline: ClusterTimeline


def span(path: Path) -> tuple[float, float] | None:
    """The first and last time anything was recorded (None: nothing is). FileNotFoundError /
    RecordingUnreadable as `open_for_reading`."""
    con = open_for_reading(path)
    try:
        rows = [r for table in ("samples", "engine", "events")
                for r in con.execute(f"SELECT min(t), max(t) FROM {table}") if r[0] is not None]
    except sqlite3.DatabaseError as exc:
        raise RecordingUnreadable(str(exc)) from None
    finally:
        con.close()
    if not rows:
        return None
    return min(float(r[0]) for r in rows), max(float(r[1]) for r in rows)


class Replay:
    """A recording read back as the models stood at a time (see the module doc)."""

    def __init__(self, path: Path, ranks: list[int], interval_s: float, cluster: str = "",
                 hang_after_s: float = 90.0) -> None:
        self.path = path
        self.ranks = list(ranks)
        self.interval_s = interval_s
        self.cluster = cluster
        self.hang_after_s = hang_after_s
        found = span(path)
        if found is None:
            raise RecordingUnreadable("the recording holds nothing yet")
        self.start, self.end = found
        self.events = read_events(path)          # the whole timeline, once (it is small beside samples)

    def events_until(self, t: float) -> list[Event]:
        return [e for e in self.events if e.t <= t]

    def state_at(self, t: float) -> ReplayState:
        events = self.events_until(t)
        stats = ClusterStats(self.ranks, self.interval_s, self.cluster)
        since = t - HISTORY_POINTS * self.interval_s
        for row in read_series(self.path, "samples", since=since, until=t):
            rank = int(row["rank"])
            if rank not in stats.history:
                continue
            stats.history[rank].add(float(row["t"]), {name: row.get(name) for name in RANK_SERIES})
        for rank, history in stats.history.items():
            if history.times:
                stats.put(_rank_stats(rank, history.times[-1],
                                      {n: history.values(n)[-1] for n in RANK_SERIES}))
        engine_rows = read_series(self.path, "engine", since=since, until=t)
        for row in engine_rows:
            stats.engine_history.add(float(row["t"]), {name: row.get(name) for name in ENGINE_SERIES})
        if engine_rows:
            stats.engine = _engine_reading(engine_rows[-1])
        stats.set_alerts(alerts_at(events))
        verdict = verdict_at(events)
        timeline = timeline_at(events, self.ranks, self.hang_after_s)
        timeline.restore_verdict(verdict)
        return ReplayState(t, stats, verdict, tuple(events), timeline)


def _int(value: object) -> int | None:
    return None if value is None else round(float(value))  # type: ignore[arg-type]


def _float(value: object) -> float | None:
    return None if value is None else float(value)  # type: ignore[arg-type]


def _rank_stats(rank: int, at: float, v: dict[str, float | None]) -> RankStats:
    """A rank's figures as its newest recorded sample has them (what the sampler had read then)."""
    gpu = None
    if any(v.get(n) is not None for n in ("util", "sm_mhz", "power_w", "temp_c")):
        gpu = GpuReading(util=_int(v.get("util")), sm=_int(v.get("sm_mhz")), power_w=_float(v.get("power_w")),
                         temp_c=_int(v.get("temp_c")))
    avail = v.get("mem_available_gib")
    memory = None if avail is None else MemoryStats(None, None, int(avail * (1 << 30)), None)
    return RankStats(rank, sampler="sampling", gpu=gpu, gpu_at=at if gpu is not None else None,
                     memory=memory, round_at=at)


def _engine_reading(row: dict[str, object]) -> EngineStatsReading:
    kv = _float(row.get("kv_pct"))
    return EngineStatsReading(at=float(row["t"]), running=_int(row.get("running")),  # type: ignore[arg-type]
                              waiting=_int(row.get("waiting")),
                              kv_cache_usage=None if kv is None else kv / 100,
                              generation_tokens_per_s=_float(row.get("gen_tps")),
                              prompt_tokens_per_s=_float(row.get("prompt_tps")))


def verdict_at(events: list[Event]) -> ClusterVerdict:
    """The newest recorded verdict change among `events` (time order)."""
    for e in reversed(events):
        if e.kind == "verdict":
            d = e.data
            state = str(d.get("state", ""))
            if state not in VERDICT_STATES:
                state = "unknown"
            first = d.get("first_failed")
            return ClusterVerdict(state, str(d.get("summary", e.summary)),  # type: ignore[arg-type]
                                  first if isinstance(first, int) else None, str(d.get("remedy", "")))
    return NO_VERDICT


def alerts_at(events: list[Event]) -> tuple[Alert, ...]:
    """The alerts raised and not cleared among `events` (a new recording session begins with none: its
    recorder raises again what is still active)."""
    active: dict[tuple[str, int | None], Alert] = {}
    for e in events:
        kind = str(e.data.get("kind", ""))
        if e.kind == "recorder" and e.summary.startswith("recording begins"):
            active.clear()
        elif e.kind == "alert-raised" and kind:
            severity: Literal["warn", "fail"] = "warn" if e.data.get("severity") == "warn" else "fail"
            since = e.data.get("since")
            at = float(since) if isinstance(since, int | float) else e.t
            active[(kind, e.rank)] = Alert(kind, e.rank, at, str(e.data.get("message", e.summary)),
                                           str(e.data.get("remedy", "")), severity)
        elif e.kind == "alert-cleared" and kind:
            active.pop((kind, e.rank), None)
    return tuple(active.values())
