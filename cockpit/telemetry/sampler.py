"""Sample every rank's GPU, memory and RDMA ports into the `ClusterStats` model.

Per host one long-lived channel (`hosts.stats_sampler`): started when the host connects, started again
after a reconnect or when one of its nvidia-smi loops ended (after TOOL_RETRY_S), never a new SSH exec
per sample. `starts` counts the channels started per rank (the benchmark's remote-process figure).
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable

from cockpit.config import ClusterConfig
from cockpit.hosts import CommandTimeout, Fleet, Host, HostUnavailable, ShellCommand, stats_sampler
from cockpit.telemetry.cluster_stats import MAX_XIDS, MIB, ClusterStats, MemoryStats, stale_after
from cockpit.telemetry.gpu import GpuParseError, GpuReading
from cockpit.telemetry.gpu_events import KLOG_REMEDY, MAX_XID_KEYS, KlogStatus, XidEvent, reasons_of
from cockpit.telemetry.host_sample import (
    APP_FIELDS,
    GPU_FIELDS,
    GpuApp,
    HostRound,
    KlogNote,
    PortCounters,
    SamplerReader,
    ToolExit,
)
from cockpit.telemetry.rdma import port_stats

RETRY_S = 1.0                 # after the channel ended or the host was lost
TOOL_RETRY_S = 10.0           # after an nvidia-smi loop ended (a driver that came back is seen again)
SILENT_ROUNDS = 10            # a channel that printed nothing for this many intervals ...
SILENT_MIN_S = 10.0           # ... (and at least this long) is closed and started again
CLOSE_WAIT_S = 2.0            # a channel being closed gets this long to end
APP_GONE_ROUNDS = 2.5         # a compute process not listed for this many intervals has gone
MAX_APPS = 64


def memory_of(meminfo: dict[str, int], gpu: GpuReading | None, apps: tuple[GpuApp, ...]) -> MemoryStats:
    """Unified memory unless the GPU reports its own (a discrete GPU: memory.total is a number)."""
    kind = gpu.memory_kind if gpu is not None else None
    used = [a.used_mib for a in apps if a.used_mib is not None]
    return MemoryStats(kind=kind, total_bytes=meminfo.get("MemTotal"),
                       available_bytes=meminfo.get("MemAvailable"),
                       engine_bytes=sum(used) * MIB if used else None,
                       gpu_total_mib=gpu.mem_total_mib if gpu and kind == "discrete" else None,
                       gpu_used_mib=gpu.mem_used_mib if gpu and kind == "discrete" else None)


class _RankSampler:
    """The reading state of one rank's channel."""

    def __init__(self, rank: int, stats: ClusterStats) -> None:
        self.rank = rank
        self.stats = stats
        self.reader = SamplerReader()
        self.apps: dict[int, tuple[GpuApp, float]] = {}
        self.meminfo: dict[str, int] = {}
        self.prev_ports: dict[tuple[str, int], PortCounters] = {}
        self.prev_round: float | None = None
        self.tool_ended: float | None = None
        self.heard = time.monotonic()      # when the channel last printed a line
        # Xid lines counted (a new channel reads them again)
        self.xid_seen: dict[tuple[object, ...], None] = {}

    def reset(self) -> None:
        """A new channel: rates start again from its first round; the kernel log is read again (an Xid
        line already counted is not counted twice)."""
        self.reader = SamplerReader()
        self.prev_ports, self.prev_round, self.tool_ended = {}, None, None
        self.heard = time.monotonic()
        self.stats.update(self.rank, klog=KlogStatus())

    def _reasons(self, reading: GpuReading, now: float) -> dict[str, float]:
        """When each active reason was first seen active without a break (unknown mask: none held)."""
        active = reasons_of(reading.event_reasons) or ()
        before = self.stats.ranks[self.rank].reasons_since
        return {name: before.get(name, now) for name in active}

    def _xid(self, x: XidEvent) -> None:
        cur = self.stats.ranks[self.rank]
        klog = cur.klog if cur.klog.readable else KlogStatus(cur.klog.source, True)
        if x.key in self.xid_seen:
            if klog is not cur.klog:
                self.stats.update(self.rank, klog=klog)
            return
        self.xid_seen[x.key] = None
        while len(self.xid_seen) > MAX_XID_KEYS:
            del self.xid_seen[next(iter(self.xid_seen))]
        total = dict(cur.xid_total)
        total[x.xid] = total.get(x.xid, 0) + 1
        self.stats.update(self.rank, xids=(*cur.xids, x)[-MAX_XIDS:], xid_total=total, klog=klog)

    def _klog(self, note: KlogNote) -> None:
        cur = self.stats.ranks[self.rank].klog
        if note.what == "source":
            if note.text == "none":
                klog = KlogStatus("none", False, "neither journalctl nor dmesg on the host")
            else:
                klog = KlogStatus(note.text, None)   # type: ignore[arg-type]
        elif note.what == "readable":
            if cur.readable is False:
                return                               # refused: a line of another kind proves nothing
            klog = KlogStatus(cur.source, True)
        elif cur.readable:
            return                                   # a line of it was read: a later hint changes nothing
        else:
            klog = KlogStatus(cur.source, False, f"{note.text}; {KLOG_REMEDY}")
        self.stats.update(self.rank, klog=klog)

    def _klog_ended(self, event: ToolExit) -> None:
        cur = self.stats.ranks[self.rank].klog
        if cur.readable is False:
            return
        said = f": {event.said}" if event.said else ""
        why = f"{cur.source or 'the kernel-log reader'} ended (exit {event.status}){said}"
        if cur.readable:
            self.stats.update(self.rank, klog=KlogStatus(cur.source, None, f"{why}; read again on the next "
                                                                          "channel"))
        else:
            self.stats.update(self.rank, klog=KlogStatus(cur.source, False, f"{why}; {KLOG_REMEDY}"))

    def feed(self, line: str) -> bool:
        """One channel line; True when it ended a round (a history point was recorded)."""
        self.heard = time.monotonic()
        event = self.reader.feed(line)
        if event is None:
            return False
        now = time.time()
        if isinstance(event, GpuReading):
            memory = self.stats.ranks[self.rank].memory
            if memory is not None and memory.kind is None and self.meminfo:
                # the rounds began before nvidia-smi's first line: the memory's kind is known from now on
                apps = tuple(sorted((a for a, _ in self.apps.values()), key=lambda a: a.pid))
                memory = memory_of(self.meminfo, event, apps)
            self.stats.update(self.rank, gpu=event, gpu_at=now, error=None, sampler="sampling",
                              reasons_since=self._reasons(event, now), memory=memory)
        elif isinstance(event, XidEvent):
            self._xid(event)
        elif isinstance(event, KlogNote):
            self._klog(event)
        elif isinstance(event, ToolExit) and event.which == "K":
            self._klog_ended(event)
        elif isinstance(event, GpuParseError):
            self.stats.update(self.rank, error=f"nvidia-smi: {event.reason}")
        elif isinstance(event, GpuApp):
            if len(self.apps) < MAX_APPS or event.pid in self.apps:
                self.apps[event.pid] = (event, now)
        elif isinstance(event, ToolExit):
            said = f": {event.said}" if event.said else ""
            self.stats.update(self.rank, error=f"nvidia-smi ended (exit {event.status}){said}")
            self.tool_ended = self.tool_ended or now
        elif isinstance(event, HostRound):
            self._round(event, now)
            return True
        return False

    def _round(self, rnd: HostRound, now: float) -> None:
        gone = now - APP_GONE_ROUNDS * self.stats.interval_s
        self.apps = {pid: (a, t) for pid, (a, t) in self.apps.items() if t >= gone}
        apps = tuple(sorted((a for a, _ in self.apps.values()), key=lambda a: a.pid))
        dt = rnd.at - self.prev_round if self.prev_round is not None else 0.0
        ports = tuple(port_stats(p, self.prev_ports.get((p.hca, p.port)), dt) for p in rnd.ports)
        self.prev_ports = {(p.hca, p.port): p for p in rnd.ports}
        self.prev_round = rnd.at
        self.meminfo = rnd.meminfo
        cur = self.stats.ranks[self.rank]
        fresh = cur.gpu_at is not None and now - cur.gpu_at <= stale_after(self.stats.interval_s)
        gpu = cur.gpu if fresh else None
        self.stats.update(self.rank, apps=apps, memory=memory_of(rnd.meminfo, gpu, apps), ports=ports,
                          round_at=now, host_clock=rnd.at, sampler="sampling")
        self.stats.record(self.rank, now)


class StatsSampler:
    """Keep one sampler channel per host running until closed; `stats` is always current."""

    def __init__(self, fleet: Fleet, cfg: ClusterConfig, stats: ClusterStats, *,
                 on_round: Callable[[int], None] | None = None) -> None:
        self.fleet = fleet
        self.cfg = cfg
        self.stats = stats
        self.on_round = on_round
        self.starts: dict[int, int] = dict.fromkeys(cfg.ranks, 0)
        self._tasks: list[asyncio.Task[None]] = []

    def command(self, rank: int) -> str:
        """The exact shell line of `rank`'s channel (what the operator is shown)."""
        return self._command(rank).line

    def _command(self, rank: int) -> ShellCommand:
        return stats_sampler(self.stats.interval_s, GPU_FIELDS, APP_FIELDS, self.cfg.host(rank).ib_hca,
                             klog_since_s=self.cfg.stats.xid_alert_s)

    def start(self) -> None:
        if not self._tasks:
            self._tasks = [asyncio.create_task(self._run(r), name=f"stats-{r}") for r in self.cfg.ranks]

    async def close(self) -> None:
        """Cancel every channel; each gets CLOSE_WAIT_S to end (a channel still opening included)."""
        tasks, self._tasks = self._tasks, []
        for task in tasks:
            task.cancel()
        if tasks:
            await asyncio.wait(tasks, timeout=2 * CLOSE_WAIT_S + 1)
        for task in tasks:
            if task.done() and not task.cancelled():
                with contextlib.suppress(Exception):
                    task.exception()

    async def __aenter__(self) -> StatsSampler:
        self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def _run(self, rank: int) -> None:
        host = self.fleet[rank]
        state = _RankSampler(rank, self.stats)
        cmd = self._command(rank)
        silent = max(SILENT_MIN_S, SILENT_ROUNDS * self.stats.interval_s)
        while True:
            if not host.status.connected:
                self.stats.update(rank, sampler="host down" if host.status.down else "starting",
                                  error=host.status.error)
                await host.wait_connected()
            state.reset()
            self.starts[rank] += 1
            channel = asyncio.create_task(self._read(host, cmd, state), name=f"stats-{rank}-channel")
            try:
                while not channel.done():
                    await asyncio.wait({channel}, timeout=min(silent, 1.0))
                    if not channel.done() and time.monotonic() - state.heard > silent:
                        self.stats.update(rank, sampler="failed", error=f"the sampler channel was silent for "
                                                                         f"{silent:g} s: starting it again")
                        break
            finally:
                if not channel.done():
                    channel.cancel()
                    await asyncio.wait({channel}, timeout=CLOSE_WAIT_S)
            await asyncio.sleep(RETRY_S)

    async def _read(self, host: Host, cmd: ShellCommand, state: _RankSampler) -> None:
        """One channel, until it ends, the host is lost or an nvidia-smi loop ended TOOL_RETRY_S ago."""
        rank = state.rank
        try:
            async for line in host.stream(cmd, merge_stderr=False):
                if state.feed(line) and self.on_round is not None:
                    self.on_round(rank)
                if state.tool_ended is not None and time.time() - state.tool_ended >= TOOL_RETRY_S:
                    return                       # try nvidia-smi again on a new channel
            if host.status.connected:
                self.stats.update(rank, sampler="failed", error="the sampler channel ended")
        except (HostUnavailable, CommandTimeout) as exc:
            self.stats.update(rank, sampler="host down", error=str(exc))
