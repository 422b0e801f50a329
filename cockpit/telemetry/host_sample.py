"""What a host's stats sampler channel prints (`cockpit.hosts.stats_sampler`), read line by line.

Lines are tagged: `G`/`A` one `nvidia-smi --query-gpu` / `--query-compute-apps` loop line, `X G|A STATUS`
that loop ended, `K` one line of the kernel-log reader (an NVRM Xid line, a refusal, or the reader's own
`#r37` note) and `X K STATUS` when it ended, and one round of the builtin loop: `T EPOCHREALTIME`, `M` one
/proc/meminfo line, `F PATH<TAB>VALUE` one sysfs file of an HCA port, `E`. `SamplerReader.feed` turns each
line into what it completes (a `GpuReading`, a `GpuApp`, a `HostRound`, a `ToolExit`, an `XidEvent`, a
`KlogNote`); anything else is ignored, a round that never ends is bounded, nothing raises.
Formats: docs/host-tools.md.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from cockpit.hosts.shell import KLOG_TAG
from cockpit.safetext import neutralise
from cockpit.telemetry.gpu import GpuParseError, GpuReading, parse_gpu_line
from cockpit.telemetry.gpu_events import MAX_KLINE, XidEvent, denied_reason, parse_xid_line

GPU_FIELDS = ("timestamp", "index", "name", "utilization.gpu", "clocks.sm", "clocks.max.sm", "power.draw",
              "temperature.gpu", "pstate", "memory.total", "memory.used", "clocks_event_reasons.active")
APP_FIELDS = ("pid", "process_name", "used_memory")
MAX_ROUND_LINES = 2000        # meminfo is ~55 lines and a port ~35 files: more is not one round
MAX_NUMBER_DIGITS = 30
_PORT_FILE = re.compile(r"/sys/class/infiniband/([A-Za-z0-9_.:@-]{1,64})/ports/([0-9]{1,3})/"
                        r"(state|counters/port_xmit_data|counters/port_rcv_data|hw_counters/([A-Za-z0-9_]{1,64}))")


def _uint(text: str) -> int | None:
    text = text.strip()
    return int(text) if text.isascii() and text.isdigit() and len(text) <= MAX_NUMBER_DIGITS else None


def parse_meminfo(text: str) -> dict[str, int]:
    """/proc/meminfo as bytes (values with a `kB` unit × 1024; counts like HugePages_Total kept as is)."""
    out: dict[str, int] = {}
    for line in text.splitlines():
        key, sep, rest = line.partition(":")
        parts = rest.split()
        value = _uint(parts[0]) if sep and parts else None
        if value is None:
            continue
        out[key.strip()] = value * 1024 if len(parts) > 1 and parts[1].lower() == "kb" else value
    return out


@dataclass(frozen=True)
class GpuApp:
    """One compute process on the GPU (`--query-compute-apps`); used_mib None: not reported."""

    pid: int
    name: str
    used_mib: int | None


@dataclass(frozen=True)
class PortCounters:
    """One HCA port's sysfs files as one round read them (None: the file was not there)."""

    hca: str
    port: int
    state: str | None = None            # `4: ACTIVE`, `1: DOWN`
    xmit_words: int | None = None       # port_xmit_data: octets / 4
    rcv_words: int | None = None        # port_rcv_data: octets / 4
    hw: dict[str, int] = field(default_factory=dict)

    @property
    def active(self) -> bool | None:
        return None if self.state is None else self.state.upper().endswith("ACTIVE")


@dataclass(frozen=True)
class HostRound:
    """One round of the builtin loop: the host's clock when it began, meminfo (bytes) and port files."""

    at: float
    meminfo: dict[str, int]
    ports: tuple[PortCounters, ...]


@dataclass(frozen=True)
class ToolExit:
    """An `nvidia-smi` loop of the channel ended (`which`: "G" or "A"), with its exit status."""

    which: str
    status: int | None
    said: str = ""                      # the last thing it printed that was not a reading


@dataclass(frozen=True)
class KlogNote:
    """What the kernel-log reader said of itself: `source` (journalctl, dmesg, none), `readable` (a kernel
    line was read), `denied` (the tool refused: `text` is the reason)."""

    what: str
    text: str = ""


Event = GpuReading | GpuParseError | GpuApp | HostRound | ToolExit | XidEvent | KlogNote


def parse_kernel_line(rest: str) -> XidEvent | KlogNote | None:
    """One `K` line's payload."""
    rest = rest[:MAX_KLINE]
    if rest.startswith(KLOG_TAG + " "):
        what, _, text = rest[len(KLOG_TAG) + 1:].strip().partition(" ")
        if what == "source" and text in ("journalctl", "dmesg", "none"):
            return KlogNote("source", text)
        return KlogNote("readable") if what == "readable" else None
    xid = parse_xid_line(rest)
    if xid is not None:
        return xid
    reason = denied_reason(rest)
    return KlogNote("denied", reason) if reason else None


def parse_app_line(line: str) -> GpuApp | None:
    cells = [c.strip() for c in line.split(",")]
    if len(cells) != len(APP_FIELDS):
        return None
    pid = _uint(cells[0])
    if pid is None:
        return None
    used = _uint(cells[2].removesuffix("MiB").strip())
    return GpuApp(pid, cells[1][:128], used)


class SamplerReader:
    """Feed it the channel's lines in order; `feed` returns what each line completed."""

    def __init__(self) -> None:
        self._round_at: float | None = None
        self._mem: list[str] = []
        self._files: list[tuple[str, str]] = []
        self._last_files: list[tuple[str, str]] = []     # the port files of the last whole round
        self._last_ports: tuple[PortCounters, ...] = ()  # … as parsed (a steady round is not parsed again)
        self._said = {"G": "", "A": "", "K": ""}

    def feed(self, line: str) -> Event | None:
        tag, _, rest = line.partition(" ")
        if tag == "G":
            reading = parse_gpu_line(rest, list(GPU_FIELDS))
            if isinstance(reading, GpuParseError):
                self._said["G"] = rest.strip()[:300]
            return reading
        if tag == "A":
            app = parse_app_line(rest)
            if app is None:
                self._said["A"] = rest.strip()[:300]
            return app
        if tag == "K":
            event = parse_kernel_line(rest)
            if event is None and rest.strip():
                self._said["K"] = neutralise(rest.strip()[:300])
            return event
        if tag == "X":
            which, _, status = rest.partition(" ")
            if which in self._said:
                return ToolExit(which, _uint(status), self._said[which])
            return None
        if tag == "T":
            try:
                at = float(rest.strip().replace(",", "."))
            except ValueError:
                at = None
            self._round_at, self._mem, self._files = at, [], []
            return None
        if self._round_at is None:
            return None
        if tag == "M" and len(self._mem) < MAX_ROUND_LINES:
            self._mem.append(rest)
        elif tag == "F" and rest.strip() == "=":
            self._files = list(self._last_files)      # every port file reads as in the last round
        elif tag == "F" and len(self._files) < MAX_ROUND_LINES:
            path, _, value = rest.partition("\t")
            self._files.append((path, value))
        elif tag == "E" and line.strip() == "E":
            ports = self._last_ports if self._files == self._last_files else _ports(self._files)
            done = HostRound(self._round_at, parse_meminfo("\n".join(self._mem)), ports)
            self._last_files, self._last_ports = self._files, ports
            self._round_at, self._mem, self._files = None, [], []
            return done
        return None


def _ports(files: list[tuple[str, str]]) -> tuple[PortCounters, ...]:
    ports: dict[tuple[str, int], dict[str, object]] = {}
    for path, value in files:
        m = _PORT_FILE.fullmatch(path)
        if m is None:
            continue
        hca, port, what, hw = m.group(1), int(m.group(2)), m.group(3), m.group(4)
        entry = ports.setdefault((hca, port), {"hw": {}})
        if what == "state":
            entry["state"] = value.strip()[:64]
        elif hw is not None:
            n = _uint(value)
            if n is not None:
                entry["hw"][hw] = n  # type: ignore[index]
        else:
            entry["xmit_words" if what.endswith("xmit_data") else "rcv_words"] = _uint(value)
    return tuple(PortCounters(hca, port, **kw) for (hca, port), kw in ports.items())  # type: ignore[arg-type]
