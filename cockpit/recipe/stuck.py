"""Which rank is stuck: per-rank evidence of a hung engine and the rank(s) that differ (pure, plus one read).

The live model says the engine is hung (`ClusterTimeline.verdict`: one cluster-wide word). A tensor-parallel
deadlock has a shape the four ranks show between them: the rank that never entered the collective sits at
0 % with a low SM clock while its peers spin at ~100 % inside NCCL waiting for it (the reverse also occurs:
one rank spinning alone while the others idle). `stuck_report` reads the evidence of every rank from the one
model (the stats sampler's `ClusterStats`: GPU utilisation, SM clock, RDMA rates; the timeline: the last log
line and when the host wrote it) and, when the operator asks for them, the Python stacks of the engine
(`read_stacks`: `py-spy dump` inside the container, read-only, bounded, with a deadline) and names the odd
rank(s) with a reason and a remedy.

Truth in time: a reading that is missing or stale is "unknown", never evidence; an unknown rank is never
named, and the report says which ranks were not read.
"""

from __future__ import annotations

import asyncio
import re
import time
from dataclasses import asdict, dataclass, field
from typing import Any, Literal

from cockpit.config import ClusterConfig
from cockpit.hosts import CommandTimeout, Fleet, HostUnavailable, Result, command
from cockpit.recipe.timeline import ClusterTimeline
from cockpit.safetext import neutralise, neutralise_block
from cockpit.telemetry.cluster_stats import ClusterStats, stale_after
from cockpit.telemetry.gpu import LOADED_UTIL

BUSY_UTIL = 50               # % from which a rank counts as spinning (NCCL busy-waits at ~100 %)
RDMA_MOVING_GBPS = 0.01      # Gbit/s (both ways summed) from which a rank's fabric counts as moving
STACK_TIMEOUT_S = 15.0       # seconds one `py-spy dump` may take
STACK_MAX_BYTES = 64 * 1024  # bytes of a dump kept per rank
STACK_MAX_LINES = 400        # lines of a dump kept per rank
LAST_LINE_CHARS = 200        # characters of a rank's last log line shown

GpuLoad = Literal["idle", "busy", "partial", "unknown"]
StuckState = Literal["odd", "none-differs", "unknown"]
StackState = Literal["read", "no-py-spy", "failed", "no-container", "host-down"]

REMEDY_ODD = (
    "rank {ranks} is where the engine stopped: read its stacks (`r37-cockpit status --stacks`) and its last "
    "lines (`r37-cockpit logs --rank {first} -n 200`); stop the cluster head first (`r37-cockpit stop`) and "
    "relaunch (`r37-cockpit launch --replace-stopped`); if it recurs on the same rank, check that host "
    "(GPU errors in `dmesg`, its fabric link with `r37-cockpit fabric`)"
)
REMEDY_SAME = (
    "every rank reads alike, so the hang is not one rank's: read the stacks of all ranks "
    "(`r37-cockpit status --stacks`) and rank 0's last lines (`r37-cockpit logs --rank 0 -n 200`); stop the "
    "cluster head first (`r37-cockpit stop`) and relaunch (`r37-cockpit launch --replace-stopped`)"
)
REMEDY_UNKNOWN = (
    "wait for the stats sampler to read every rank (`r37-cockpit stats`; `r37-cockpit hosts` shows the "
    "links); until then no rank is named"
)


@dataclass(frozen=True)
class RankStacks:
    """The engine's Python stacks on one rank: `state` says whether they were read; `text` is the dump
    (neutralised, bounded), `summary` one line per process: where its main thread is."""

    rank: int
    state: StackState
    text: str = ""
    summary: tuple[str, ...] = ()
    detail: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {"rank": self.rank, "state": self.state, "summary": list(self.summary), "detail": self.detail,
                "text": self.text}


@dataclass(frozen=True)
class RankEvidence:
    """What one rank shows while the engine is hung; None: not read (or stale), never a zero."""

    rank: int
    util: int | None = None              # utilization.gpu, %
    sm_mhz: int | None = None            # clocks.sm
    max_sm_mhz: int | None = None        # clocks.max.sm
    gpu_age_s: float | None = None       # age of the GPU reading
    rdma_gbps: float | None = None       # tx + rx over every port, Gbit/s, since the previous round
    last_line: str | None = None         # the last line of its engine log read (neutralised, bounded)
    last_line_age_s: float | None = None  # seconds since its host wrote that line (host clock vs this one)
    stacks: RankStacks | None = None
    note: str = ""                       # why a reading is missing

    @property
    def load(self) -> GpuLoad:
        if self.util is None:
            return "unknown"
        if self.util < LOADED_UTIL:
            return "idle"
        return "busy" if self.util >= BUSY_UTIL else "partial"

    @property
    def rdma_moving(self) -> bool | None:
        return None if self.rdma_gbps is None else self.rdma_gbps >= RDMA_MOVING_GBPS

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["load"] = self.load
        d["rdma_moving"] = self.rdma_moving
        d["stacks"] = self.stacks.to_dict() if self.stacks is not None else None
        return d


@dataclass(frozen=True)
class StuckReport:
    """The per-rank evidence of a hung engine and its judgement: `odd` names the rank(s) that differ
    (empty when none does or when too little was read: `state` says which)."""

    state: StuckState
    odd: tuple[int, ...]
    reason: str
    remedy: str
    ranks: tuple[RankEvidence, ...] = field(default=())
    unknown: tuple[int, ...] = ()         # ranks whose GPU was not read: never named
    at: float = 0.0                       # this machine's clock when it was judged

    def evidence(self, rank: int) -> RankEvidence | None:
        return next((e for e in self.ranks if e.rank == rank), None)

    def to_dict(self) -> dict[str, Any]:
        return {"state": self.state, "odd": list(self.odd), "reason": self.reason, "remedy": self.remedy,
                "unknown": list(self.unknown), "at": self.at, "ranks": [e.to_dict() for e in self.ranks]}


def _names(ranks: tuple[int, ...] | list[int]) -> str:
    return ", ".join(map(str, ranks))


def _pct(ev: list[RankEvidence]) -> str:
    vals = sorted(e.util for e in ev if e.util is not None)
    if not vals:
        return "?"
    return f"{vals[0]} %" if vals[0] == vals[-1] else f"{vals[0]}–{vals[-1]} %"


def _clock(ev: list[RankEvidence]) -> str:
    vals = sorted(e.sm_mhz for e in ev if e.sm_mhz is not None)
    if not vals:
        return ""
    return f" at {vals[0]} MHz" if vals[0] == vals[-1] else f" at {vals[0]}–{vals[-1]} MHz"


def judge(evidence: list[RankEvidence], at: float | None = None) -> StuckReport:
    """Name the rank(s) whose GPU differs from the others' (the minority of idle against spinning ranks);
    RDMA and the logs are shown as evidence and back the reason up. Fewer than two ranks read: unknown."""
    at = time.time() if at is None else at
    ev = tuple(sorted(evidence, key=lambda e: e.rank))
    known = [e for e in ev if e.load != "unknown"]
    unknown = tuple(e.rank for e in ev if e.load == "unknown")
    missing = f"; rank {_names(unknown)} not read (unknown, not evidence)" if unknown else ""
    if len(known) < 2:
        return StuckReport("unknown", (), f"too few ranks read to compare ({len(known)} of {len(ev)})"
                                          + missing, REMEDY_UNKNOWN, ev, unknown, at)
    idle = [e for e in known if e.load == "idle"]
    busy = [e for e in known if e.load == "busy"]
    odd: list[RankEvidence] = []
    if idle and busy and len(idle) + len(busy) == len(known) and len(idle) != len(busy):
        odd, rest = (idle, busy) if len(idle) < len(busy) else (busy, idle)
        ranks = tuple(e.rank for e in odd)
        if len(odd) + len(unknown) >= len(rest):      # the ranks not read could make it an even split
            return StuckReport("unknown", (), f"rank {_names(ranks)} {odd[0].load} while rank "
                                              f"{_names([e.rank for e in rest])} {rest[0].load}, but rank "
                                              f"{_names(unknown)} not read: too few readings to name a rank",
                               REMEDY_UNKNOWN, ev, unknown, at)
        if odd is idle:
            reason = (f"rank {_names(ranks)} idle at {_pct(idle)}{_clock(idle)} while rank "
                      f"{_names([e.rank for e in rest])} spin at {_pct(rest)}{_clock(rest)} (waiting in a "
                      f"collective for it): the classic tensor-parallel deadlock, rank {_names(ranks)} never "
                      "entered the collective")
        else:
            reason = (f"rank {_names(ranks)} spins at {_pct(busy)}{_clock(busy)} while rank "
                      f"{_names([e.rank for e in rest])} idle at {_pct(rest)}: rank {_names(ranks)} waits in "
                      "a collective the others never entered")
        moving = {e.rank: e.rdma_moving for e in known if e.rdma_moving is not None}
        if moving and not any(moving.values()):
            reason += "; no RDMA traffic on any rank read"
        elif moving and any(moving.values()):
            reason += f"; RDMA moving on rank {_names([r for r, m in moving.items() if m])}"
        return StuckReport("odd", ranks, reason + missing,
                           REMEDY_ODD.format(ranks=_names(ranks), first=ranks[0]), ev, unknown, at)
    if len(known) > 1 and len({e.load for e in known}) == 1:
        return StuckReport("none-differs", (), f"no rank differs: rank {_names([e.rank for e in known])} all "
                                               f"{known[0].load} ({_pct(known)}{_clock(known)})" + missing,
                           REMEDY_SAME, ev, unknown, at)
    loads = ", ".join(f"rank {e.rank} {e.load} {e.util} %" for e in known)
    return StuckReport("none-differs", (), f"no single rank differs: {loads}" + missing, REMEDY_SAME, ev,
                       unknown, at)


def evidence_of(timeline: ClusterTimeline, stats: ClusterStats | None, stacks: dict[int, RankStacks] | None,
                now: float | None = None) -> list[RankEvidence]:
    """Every rank's evidence from the one model: stale or absent readings are None, with a note why."""
    now = time.time() if now is None else now
    out = []
    stale = stale_after(stats.interval_s) if stats is not None else 0.0
    for rank, tl in timeline.ranks.items():
        s = stats.ranks.get(rank) if stats is not None else None
        notes = []
        util = sm = max_sm = None
        gpu_age = rdma = None
        if s is None:
            notes.append("not sampled")
        else:
            if s.gpu is not None and s.gpu_at is not None and now - s.gpu_at <= stale:
                util, sm, max_sm, gpu_age = s.gpu.util, s.gpu.sm, s.gpu.max_sm, max(0.0, now - s.gpu_at)
            else:
                notes.append(f"GPU not read ({s.error or s.sampler})" if s.gpu is None
                             else "GPU reading stale")
            rates = [(p.tx_gbps or 0.0) + (p.rx_gbps or 0.0) for p in s.ports
                     if p.tx_gbps is not None or p.rx_gbps is not None]
            if rates and s.round_at is not None and now - s.round_at <= stale:
                rdma = sum(rates)
        last = tl.last_line
        line = age = None
        if last is not None:
            line = neutralise(last[1])[:LAST_LINE_CHARS]
            age = max(0.0, now - last[0])
        out.append(RankEvidence(rank, util, sm, max_sm, gpu_age, rdma, line, age,
                                (stacks or {}).get(rank), "; ".join(notes)))
    return out


def stuck_report(timeline: ClusterTimeline, stats: ClusterStats | None,
                 stacks: dict[int, RankStacks] | None = None, now: float | None = None) -> StuckReport | None:
    """The report when the live model says the engine is hung; None otherwise (nothing is stuck)."""
    if timeline.verdict.state != "hung" and timeline.compute_verdict().state != "hung":
        return None
    now = time.time() if now is None else now
    return judge(evidence_of(timeline, stats, stacks, now), now)


# ---- the engine's Python stacks (an explicit operator action, never on a tick) --------------------------

_PROCESS = re.compile(r"^Process (\d+): (.*)$")
_THREAD = re.compile(r'^Thread (0x[0-9A-Fa-f]+|\d+) \(([a-z+]+)\)(?:: "(.*)")?$')
_FRAME = re.compile(r"^    (\S.*?) \((.+?)\)$")


def summarise_dump(text: str) -> tuple[str, ...]:
    """One line per process of a `py-spy dump`: its pid, and where its first (innermost) frame of each thread
    that is not idle is, else of its main thread ("idle in …")."""
    out: list[str] = []
    proc = ""
    thread: tuple[str, str] | None = None      # (status, name)
    chosen: dict[str, str] = {}
    first_idle = ""

    def flush() -> None:
        if proc:
            where = "; ".join(f"{st} in {fr}" for st, fr in chosen.items()) or first_idle or "no Python frame"
            out.append(f"{proc}: {where}")

    for raw in text.splitlines():
        m = _PROCESS.match(raw)
        if m:
            flush()
            cmd = m.group(2) if len(m.group(2)) <= 48 else m.group(2)[:47] + "…"
            proc, thread, chosen, first_idle = f"pid {m.group(1)} ({cmd})", None, {}, ""
            continue
        t = _THREAD.match(raw)
        if t:
            thread = (t.group(2), t.group(3) or t.group(1))
            continue
        f = _FRAME.match(raw)
        if f and thread is not None:
            status, _name = thread
            frame = f"{f.group(1)} ({f.group(2)})"
            if status != "idle" and status not in chosen:
                chosen[status] = frame
            elif status == "idle" and not first_idle:
                first_idle = f"idle in {frame}"
            thread = None                          # only the innermost frame of each thread
    flush()
    return tuple(out[:8])


def stacks_argv(container: str) -> list[str]:
    """`py-spy dump` of the container's main process and its children (the engine core and its workers),
    run inside the container: read-only (py-spy only reads the processes' memory)."""
    return ["docker", "exec", container, "py-spy", "dump", "--pid", "1", "--subprocesses"]


def _stacks_of(rank: int, res: Result | Exception) -> RankStacks:
    if isinstance(res, HostUnavailable):
        return RankStacks(rank, "host-down", detail=neutralise(str(res))[:300])
    if isinstance(res, Exception):
        return RankStacks(rank, "failed", detail=neutralise(str(res))[:300])
    said = neutralise((res.stderr or "").strip().splitlines()[-1] if (res.stderr or "").strip() else "")[:300]
    if res.exit_status == 127 or "executable file not found" in (res.stderr or ""):
        return RankStacks(rank, "no-py-spy", detail="py-spy not in the image")
    if "No such container" in (res.stderr or "") or "is not running" in (res.stderr or ""):
        return RankStacks(rank, "no-container", detail=said)
    if not res.ok:
        return RankStacks(rank, "failed", detail=f"exit {res.exit_status}: {said}" if said
                          else f"exit {res.exit_status}")
    lines = (res.stdout or "").splitlines()
    more = len(lines) - STACK_MAX_LINES
    text = neutralise_block("\n".join(lines[:STACK_MAX_LINES]))
    if more > 0:
        text += f"\n… [{more} more lines not shown]"
    return RankStacks(rank, "read", text, summarise_dump("\n".join(lines[:STACK_MAX_LINES])),
                      "output truncated" if res.truncated or more > 0 else "")


async def read_stacks(fleet: Fleet, cfg: ClusterConfig, timeline: ClusterTimeline,
                      timeout: float = STACK_TIMEOUT_S) -> dict[int, RankStacks]:
    """`py-spy dump` inside every rank's running engine container, at once, each within `timeout` seconds and
    STACK_MAX_BYTES of output. Read-only; the operator asks for it (a key, `status --stacks`)."""
    out: dict[int, RankStacks] = {}
    todo: dict[int, str] = {}
    for rank, tl in timeline.ranks.items():
        c = tl.container
        if c is None or not c.running:
            out[rank] = RankStacks(rank, "no-container", detail="no running engine container")
        else:
            todo[rank] = tl.container_id or c.id or cfg.cluster.container_name

    async def one(rank: int, ref: str) -> RankStacks:
        try:
            res = await fleet[rank].run(command(stacks_argv(ref)), timeout=timeout,
                                        max_output=STACK_MAX_BYTES)
        except (HostUnavailable, CommandTimeout) as exc:
            return _stacks_of(rank, exc)
        return _stacks_of(rank, res)

    found = await asyncio.gather(*(one(r, ref) for r, ref in todo.items()))
    out.update({s.rank: s for s in found})
    return dict(sorted(out.items()))
