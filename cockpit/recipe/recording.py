"""The flight recorder, fed: the live models of a running cockpit turned into rows of the cluster's
recording (`cockpit.telemetry.recorder`).

`Recording(cfg)` owns the cluster's `Recorder` while the TUI, `stats --watch` or `status --watch-engine`
runs. It is fed through the subscriptions the models already have, so nothing in them knows about it:

- `attach_watcher(watcher)`: every event of the live model (`ClusterWatcher.subscribe`): verdict changes
  with their summary and remedy, a rank's condition (booting, ready, failed …) when it changes with the
  event that changed it, failures with their cause line, hosts lost and back, the API and the engine's
  liveness, phases entered.
- `attach_monitor(monitor)`: after every judgement (`StatsMonitor.subscribe`), the stats points of every
  rank and of the engine not recorded yet (from the models' own history, so none is missed or doubled)
  and the alerts raised and cleared since the last judgement.

`note_action(cfg, kind, summary)` records what a person did (launch, stop, relaunch, bench) with who did
it (`user@host` of the admin box) and which pane or command asked; the process's recording of that
cluster takes it, or one is opened for it (headless `launch`, `stop`) and closed when the process ends.
Every text is bounded and passes `history.redact` (a secret is never written).
"""

from __future__ import annotations

import atexit
import contextlib
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from cockpit.config import ClusterConfig
from cockpit.hosts import origin
from cockpit.locations import recordings_dir
from cockpit.recipe import timeline as T
from cockpit.recipe.history import redact
from cockpit.recipe.ledger import cluster_key
from cockpit.recipe.lock import local_host, local_user
from cockpit.safetext import clip
from cockpit.telemetry.cluster_stats import ENGINE_SERIES, RANK_SERIES, Alert, ClusterStats, History
from cockpit.telemetry.gpu_events import MAX_XID_KEYS
from cockpit.telemetry.recorder import MAX_TEXT, SUFFIX, Event, Recorder, Retention

if TYPE_CHECKING:
    from cockpit.recipe.monitor import StatsMonitor
    from cockpit.recipe.watch import ClusterWatcher

Warn = Callable[[str], None]

_active: dict[Path, Recording] = {}


def who() -> str:
    """The person acting: `user@host` of the admin box (never anything secret)."""
    return f"{local_user()}@{local_host()}"


def path_for(cfg: ClusterConfig) -> Path:
    """The recording of this cluster: `<state dir>/recordings/<cluster key>.sqlite3`."""
    return recordings_dir() / f"{cluster_key(cfg)}{SUFFIX}"


def _text(text: str) -> str:
    return clip(redact(text), MAX_TEXT)


def _stderr(message: str) -> None:
    print(f"r37-cockpit: warning: {message}", file=sys.stderr)


class Recording:
    """One cluster's recording in this process (see the module doc)."""

    def __init__(self, cfg: ClusterConfig, *, path: Path | None = None, on_warning: Warn | None = None,
                 command: str = "") -> None:
        self.cfg = cfg
        self.path = path if path is not None else path_for(cfg)
        self.command = command
        r = cfg.recorder
        self.recorder = Recorder(self.path, Retention(r.retention_days, r.max_mb * 1_000_000),
                                 on_warning=on_warning)
        self._sampled: dict[int, float] = {}
        self._engine_at = 0.0
        self._alerts: dict[tuple[str, int | None], Alert] = {}
        self._xids: dict[int, dict[tuple[object, ...], None]] = {}   # Xid lines noted per rank
        self._conditions: dict[int, str] = {}
        self._verdict: tuple[str, str] | None = None
        self._started = False

    @property
    def warnings(self) -> list[str]:
        return self.recorder.warnings

    def start(self) -> Recording:
        if not self._started:
            self._started = True
            self.recorder.start()
            _active.setdefault(self.path, self)
            self.event("recorder", f"recording begins ({self.command or 'cockpit'}, {who()})",
                       data={"who": who(), "command": self.command})
        return self

    def close(self) -> None:
        if not self._started:
            return
        self.event("recorder", f"recording ends ({self.command or 'cockpit'})")
        if _active.get(self.path) is self:
            del _active[self.path]
        self.recorder.close()

    def __enter__(self) -> Recording:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()

    def event(self, kind: str, summary: str, *, rank: int | None = None, data: dict[str, Any] | None = None,
              at: float | None = None) -> None:
        self.recorder.put_event(time.time() if at is None else at, kind, _text(summary), rank=rank,
                                data=data)

    # ---- the live model -----------------------------------------------------------------------------

    def attach_watcher(self, watcher: ClusterWatcher) -> None:
        watcher.subscribe(lambda event: self.on_event(event, watcher.timeline))

    def on_event(self, event: T.LaunchEvent, timeline: T.ClusterTimeline | None = None) -> None:
        now = time.time()
        if isinstance(event, T.VerdictChanged):
            v = event.verdict
            if self._verdict != (v.state, v.summary):
                self._verdict = (v.state, v.summary)
                self.event("verdict", f"cluster {v.state}: {v.summary}", data=v.to_dict(), at=now)
        elif isinstance(event, T.RankFailed):
            f = event.failure
            data = {**f.to_dict(), "cause": _text(f.cause),
                    "context": [_text(line) for line in f.context[-5:]]}
            self.event("failure", f"rank {f.rank}: {f.label}: {f.cause}", rank=f.rank, data=data, at=f.at)
        elif isinstance(event, T.HostChanged):
            kind = "host-lost" if event.lost else "host-back"
            what = "lost" if event.lost else "back"
            detail = f": {event.detail}" if event.detail else ""
            self.event(kind, f"rank {event.rank}: host {what}{detail}", rank=event.rank, at=event.at)
        elif isinstance(event, T.ApiChanged):
            s = event.readiness
            self.event("api", f"API {s.state}: {s.message}", at=now,
                       data={"state": s.state, "message": _text(s.message), "remedy": _text(s.remedy)})
        elif isinstance(event, T.EngineChanged):
            lv = event.liveness
            self.event("engine", f"engine {lv.state}: {lv.message}", data=lv.to_dict(), at=now)
        elif isinstance(event, T.PhaseEntered):
            self.event("phase", f"rank {event.rank}: {event.phase.value}", rank=event.rank, at=event.at,
                       data={"phase": event.phase.value})
        elif isinstance(event, T.RankStopped | T.RankUnknown | T.RankRecovered):
            word = ("stopped" if isinstance(event, T.RankStopped)
                    else "unknown" if isinstance(event, T.RankUnknown) else "recovered")
            text = (f"rank {event.rank} stopped ({event.detail})" if isinstance(event, T.RankStopped)
                    else f"rank {event.rank} {word}: {event.detail}")
            self.event(word, text, rank=event.rank, at=event.at, data={"detail": _text(event.detail)})
        if timeline is not None:
            self._note_conditions(timeline, event, now)

    def _note_conditions(self, timeline: T.ClusterTimeline, event: T.LaunchEvent, now: float) -> None:
        cause = type(event).__name__
        for rank, tl in timeline.ranks.items():
            cond = tl.condition
            before = self._conditions.get(rank)
            if cond == before:
                continue
            self._conditions[rank] = cond
            why = tl.failure.cause if tl.failure is not None else ""
            self.event("condition", f"rank {rank}: {before or '—'} → {cond}" + (f" ({why})" if why else ""),
                       rank=rank, data={"from": before, "to": cond, "cause": cause}, at=now)

    # ---- the stats ----------------------------------------------------------------------------------

    def attach_monitor(self, monitor: StatsMonitor) -> None:
        monitor.subscribe(lambda: self.on_judged(monitor))

    def on_judged(self, monitor: StatsMonitor) -> None:
        self.record_stats(monitor.stats)

    def record_stats(self, stats: ClusterStats) -> None:
        """The points of every rank and of the engine not recorded yet, and the alerts' changes."""
        for rank, history in stats.history.items():
            last = self._sampled.get(rank, 0.0)
            for at, values in _new_points(history, last, RANK_SERIES):
                self.recorder.put_sample(at, rank, values)
                self._sampled[rank] = at
        for at, values in _new_points(stats.engine_history, self._engine_at, ENGINE_SERIES):
            self.recorder.put_engine(at, values)
            self._engine_at = at
        self._note_xids(stats)
        self._note_alerts(stats.alerts)

    def _note_xids(self, stats: ClusterStats) -> None:
        """One `xid` event per Xid line a rank's sampler read that this recording has not noted yet (with
        the line's own time by the host's clock in its data)."""
        now = time.time()
        for rank, s in stats.ranks.items():
            seen = self._xids.setdefault(rank, {})
            for x in s.xids:
                if x.key in seen:
                    continue
                seen[x.key] = None
                while len(seen) > MAX_XID_KEYS:
                    del seen[next(iter(seen))]
                severity = "critical" if x.critical else "non-critical"
                self.event("xid", f"rank {rank}: Xid {x.xid} ({x.name}, {severity}) on {x.pci}: {x.detail}",
                           rank=rank, at=now,
                           data={"xid": x.xid, "pci": x.pci, "host_at": x.at, "critical": x.critical,
                                 "detail": _text(x.detail), "remedy": x.remedy})

    def _note_alerts(self, alerts: tuple[Alert, ...]) -> None:
        now = time.time()
        current = {a.key: a for a in alerts}
        for key, a in current.items():
            if key not in self._alerts:
                self.event("alert-raised", f"{a.severity.upper()} {a.kind}"
                           + (f" rank {a.rank}" if a.rank is not None else "") + f": {a.message}",
                           rank=a.rank, data={"kind": a.kind, "severity": a.severity, "since": a.since,
                                              "message": _text(a.message), "remedy": _text(a.remedy)},
                           at=a.since)
        for key, a in self._alerts.items():
            if key not in current:
                where = f" rank {a.rank}" if a.rank is not None else ""
                self.event("alert-cleared", f"cleared {a.kind}{where} (raised {_clock(a.since)})",
                           rank=a.rank, data={"kind": a.kind, "since": a.since}, at=now)
        self._alerts = current


def _clock(at: float) -> str:
    return time.strftime("%H:%M:%S", time.localtime(at))


def _new_points(history: History, after: float,
                names: tuple[str, ...]) -> list[tuple[float, dict[str, float | None]]]:
    """The points of `history` newer than `after`, oldest first."""
    times = list(history.times)
    if not times or times[-1] <= after:
        return []
    series = {n: list(history.series.get(n, ())) for n in names}
    n = len(times)
    out = []
    for i in range(n - 1, -1, -1):
        if times[i] <= after:
            break
        # every series gets one value per point, so each ends with the newest point
        out.append((times[i], {name: (line[j] if (j := i - n + len(line)) >= 0 else None)
                               for name, line in series.items()}))
    out.reverse()
    return out


# ---- what people do ----------------------------------------------------------------------------------------

def active(cfg: ClusterConfig) -> Recording | None:
    """The recording of this cluster running in this process, if any."""
    return _active.get(path_for(cfg))


def note_action(cfg: ClusterConfig, kind: str, summary: str, *, rank: int | None = None,
                data: dict[str, Any] | None = None) -> None:
    """Record an action (launch, stop, relaunch, bench …) with who did it and what asked for it. Never
    raises and never blocks: the process's recording of the cluster takes the row, or one is started
    for it (its warnings go to stderr) and closed when the process ends."""
    if not cfg.recorder.enabled:
        return
    try:
        rec = active(cfg)
        if rec is None:
            rec = Recording(cfg, on_warning=_stderr, command=origin.current() or "cockpit").start()
            atexit.register(rec.close)
        rec.event(kind, f"{summary} (by {who()})", rank=rank,
                  data={**(data or {}), "who": who(), "asked_by": origin.current()})
    except Exception as exc:  # a recording never breaks an action
        with contextlib.suppress(Exception):
            _stderr(f"recording: {type(exc).__name__}: {exc}")


def note_bench(cfg: ClusterConfig, status: str, records: Path, model: str = "") -> None:
    """A bench run ended: its outcome and where its records are."""
    note_action(cfg, "bench", f"bench run {status}: records in {records}",
                data={"records": str(records), "status": status, "model": model})


def recording_for(cfg: ClusterConfig, command: str, on_warning: Warn | None = None) -> Recording | None:
    """A started Recording of `cfg` for a command that watches the cluster (None when `[recorder]
    enabled = false`); warnings go to stderr unless `on_warning` is given."""
    if not cfg.recorder.enabled:
        return None
    return Recording(cfg, on_warning=on_warning or _stderr, command=command).start()


@contextlib.contextmanager
def recorded(cfg: ClusterConfig, command: str, watcher: ClusterWatcher | None = None,
             monitor: StatsMonitor | None = None) -> Iterator[Recording | None]:
    """Record what `watcher` and `monitor` see while the block runs (nothing when disabled)."""
    rec = recording_for(cfg, command)
    if rec is not None:
        if watcher is not None:
            rec.attach_watcher(watcher)
        if monitor is not None:
            rec.attach_monitor(monitor)
    try:
        yield rec
    finally:
        if rec is not None:
            rec.close()


# ---- reading back: the incident timeline -----------------------------------------------------------------

_UNITS = {"s": 1.0, "m": 60.0, "h": 3600.0, "d": 86_400.0}


def parse_when(text: str, now: float | None = None) -> float:
    """A time given on the command line: `15m` / `2h` / `3d` / `90s` ago, `HH:MM[:SS]` today (local),
    `YYYY-MM-DD[ HH:MM[:SS]]` or with a `T` (local), or seconds since the epoch. ValueError otherwise."""
    now = time.time() if now is None else now
    t = text.strip()
    if len(t) >= 2 and t[-1] in _UNITS and t[:-1].replace(".", "", 1).isdigit():
        return now - float(t[:-1]) * _UNITS[t[-1]]
    with contextlib.suppress(ValueError):
        value = float(t)
        if value > 1e8:
            return value
    for fmt in ("%H:%M", "%H:%M:%S"):
        with contextlib.suppress(ValueError):
            clock = time.strptime(t, fmt)
            day = time.localtime(now)
            return time.mktime((day.tm_year, day.tm_mon, day.tm_mday, clock.tm_hour, clock.tm_min,
                                clock.tm_sec, 0, 0, -1))
    for fmt in ("%Y-%m-%d", "%Y-%m-%d %H:%M", "%Y-%m-%d %H:%M:%S", "%Y-%m-%dT%H:%M", "%Y-%m-%dT%H:%M:%S"):
        with contextlib.suppress(ValueError):
            return time.mktime(time.strptime(t, fmt))
    raise ValueError(f"{text!r} is not a time: give 15m, 2h or 3d (ago), HH:MM (today), "
                     "YYYY-MM-DD[ HH:MM[:SS]] or seconds since the epoch")


def event_line(e: Event, day: bool = True) -> str:
    """One event as a line of text (not neutralised: the caller prints it safely)."""
    stamp = time.strftime("%Y-%m-%d %H:%M:%S" if day else "%H:%M:%S", time.localtime(e.t))
    rank = "—" if e.rank is None else str(e.rank)
    return f"{stamp}  {rank:>2}  {e.kind:<13} {e.summary}"
