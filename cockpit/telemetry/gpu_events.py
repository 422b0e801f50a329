"""GPU events: nvidia-smi's clock event reasons and the kernel's NVRM Xid lines, with names and remedies.

**Clock event reasons** (`clocks_event_reasons.active`, called `clocks_throttle_reasons.active` before
driver 535): a hex bit mask, e.g. `0x0000000000000001` (an idle H200, tests/fixtures/samples/h200). The bits
are NVML's `nvmlClocksEventReason*` constants (NVML API reference, "Clocks Event Reasons"); the names are the
`--query-gpu=clocks_event_reasons.<name>` fields. `[N/A]` (GB10 prints it for fields it cannot report) is
None: not known, never "no reason".

**Xid** lines are what the NVIDIA kernel module logs on a GPU error: `NVRM: Xid (PCI:0000:01:00): 79,
pid=1234, name=python3, GPU has fallen off the bus.` (the `pid=`/`name=` part is absent in some Xids,
e.g. `NVRM: Xid (PCI:0000:01:00): 62, 323f0f30 …`). They are read from `journalctl -k` (short-iso stamps)
or `dmesg --time-format=iso`. The table of well-known Xids follows NVIDIA's "Xid Errors" document
(docs.nvidia.com/deploy/xid-errors/, its "Xid error listing" and the per-Xid recommended actions); an Xid
not in it is shown by number with the generic remedy.

Everything here is pure parsing of untrusted bytes: bounded, tolerant, never raises.
"""

from __future__ import annotations

import calendar
import re
from dataclasses import dataclass
from typing import Literal

from cockpit.safetext import neutralise

# ---- clock event reasons -------------------------------------------------------------------------------

# name (the nvidia-smi field suffix) -> (bit, short label shown)
REASONS: dict[str, tuple[int, str]] = {
    "gpu_idle": (0x1, "idle"),
    "applications_clocks_setting": (0x2, "app clocks"),
    "sw_power_cap": (0x4, "SW power cap"),
    "hw_slowdown": (0x8, "HW slowdown"),
    "sync_boost": (0x10, "sync boost"),
    "sw_thermal_slowdown": (0x20, "SW thermal"),
    "hw_thermal_slowdown": (0x40, "HW thermal"),
    "hw_power_brake_slowdown": (0x80, "power brake"),
    "display_clock_setting": (0x100, "display clocks"),
}
KNOWN_MASK = sum(bit for bit, _ in REASONS.values())
# the reasons that mean the GPU is being slowed by something wrong (an alert once held); the others
# (idle, SW power cap under full load, application clocks, sync boost) are how a healthy GPU runs
THERMAL = ("sw_thermal_slowdown", "hw_thermal_slowdown")
BAD_REASONS = (*THERMAL, "hw_slowdown", "hw_power_brake_slowdown")
_HEX = re.compile(r"0[xX]([0-9a-fA-F]{1,16})")


def parse_reason_mask(cell: str) -> int | None:
    """`0x0000000000000041` -> 0x41; `[N/A]`, `Not Supported`, anything else -> None."""
    m = _HEX.fullmatch(cell.strip())
    return int(m.group(1), 16) if m else None


def reasons_of(mask: int | None) -> tuple[str, ...] | None:
    """The reason names set in `mask` (in REASONS order; an unknown bit as `bit_0x…`); None: unknown."""
    if mask is None:
        return None
    names = [name for name, (bit, _) in REASONS.items() if mask & bit]
    rest = mask & ~KNOWN_MASK
    names += [f"bit_{1 << i:#x}" for i in range(64) if rest & (1 << i)]
    return tuple(names)


def reason_label(name: str) -> str:
    return REASONS[name][1] if name in REASONS else name


def reasons_text(mask: int | None) -> str:
    """`idle, SW power cap`; `none` (no reason active); `n/a` (not reported: not known)."""
    names = reasons_of(mask)
    if names is None:
        return "n/a"
    return ", ".join(reason_label(n) for n in names) if names else "none"


REASON_REMEDY = {
    "thermal": "the GPU is slowed by its temperature: check the host's airflow and ambient temperature, that "
               "nothing blocks the vents, and the fan/temperature history (`nvidia-smi -q -d TEMPERATURE,"
               "PERFORMANCE`); a rank that runs hot while its peers do not slows every rank",
    "hw_power_brake_slowdown": "the power brake is engaged (an external signal: the power supply or the "
                               "platform asked the GPU to slow down): check the host's power supply and "
                               "cabling; `nvidia-smi -q -d PERFORMANCE` on the host",
    "hw_slowdown": "HW slowdown is engaged (thermal or power protection in hardware): check temperature and "
                   "power (`nvidia-smi -q -d PERFORMANCE,TEMPERATURE,POWER`), airflow and the power supply",
}


# ---- Xid -----------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class XidInfo:
    name: str
    remedy: str
    critical: bool          # the GPU or the engine on it cannot be trusted until acted on


_RESET = "stop the engine, reset the GPU (reboot the host) and relaunch"
_APP = ("usually the application (the engine) hit a bug or an illegal access; read the engine's log around "
        "that time; if it repeats across restarts, suspect the driver or the hardware")
XIDS: dict[int, XidInfo] = {
    13: XidInfo("Graphics Engine Exception", _APP, False),
    31: XidInfo("GPU memory page fault (MMU fault)", _APP, False),
    32: XidInfo("invalid or corrupted push buffer stream", "driver or PCIe problem: check `nvidia-smi -q` "
                "and the kernel log for PCIe errors; update the driver if it repeats", False),
    38: XidInfo("driver firmware error", "update the driver; if it repeats, " + _RESET, False),
    43: XidInfo("GPU stopped processing (a channel was reset)", _APP, False),
    45: XidInfo("preemptive cleanup after earlier errors (a process was ended)",
                "follows another Xid or a killed process: read the Xid before it", False),
    48: XidInfo("double-bit ECC error", _RESET + "; check retired pages / row remapping "
                "(`nvidia-smi -q -d ECC,ROW_REMAPPER`); replace the GPU if it repeats", True),
    61: XidInfo("internal micro-controller breakpoint/warning",
                "watch for more; if the GPU stops responding, " + _RESET, False),
    62: XidInfo("internal micro-controller halt", _RESET + "; update the driver if it repeats", True),
    63: XidInfo("ECC page retirement or row remapping recorded",
                "a memory cell was retired: reset the GPU when convenient for the remap to take effect",
                False),
    64: XidInfo("ECC page retirement or row remapping failure", _RESET + "; the GPU may need replacing",
                True),
    69: XidInfo("graphics engine class error", _APP, False),
    74: XidInfo("NVLink error", _RESET + "; check the NVLink/C2C link (`nvidia-smi nvlink -s`); if it "
                "repeats, contact NVIDIA support", True),
    79: XidInfo("GPU has fallen off the bus", "the GPU no longer answers on its bus: power-cycle the host "
                "(a reboot may not be enough); check power delivery and temperatures; if it repeats, the "
                "hardware needs service", True),
    92: XidInfo("high single-bit ECC error rate", "watch ECC counters (`nvidia-smi -q -d ECC`); reset the "
                "GPU when convenient", False),
    94: XidInfo("contained ECC error", "the application using the affected memory was stopped: relaunch "
                "the engine; reset the GPU when convenient", True),
    95: XidInfo("uncontained ECC error", "every application on the GPU is affected: " + _RESET, True),
    109: XidInfo("context switch timeout", _APP, False),
    119: XidInfo("GSP RPC timeout", _RESET + "; update the driver/firmware if it repeats", True),
    120: XidInfo("GSP error", _RESET + "; update the driver/firmware if it repeats", True),
    121: XidInfo("C2C link corrected error", "corrected: watch for more; an uncorrected C2C error follows "
                 "as another Xid", False),
    140: XidInfo("unrecovered ECC error", _RESET, True),
    143: XidInfo("GPU initialization failure", _RESET + "; check the driver install (`nvidia-smi`)", True),
    154: XidInfo("GPU recovery action changed", "the driver asks for a recovery action (the line says which: "
                 "GPU reset, reboot, …): do it before relaunching", True),
}
UNKNOWN_XID_REMEDY = ("look the Xid up in NVIDIA's Xid Errors document (docs.nvidia.com/deploy/xid-errors/) "
                      "and read the kernel log around it (`journalctl -k`)")
XID_SEVERITY_CRITICAL = "fail"

MAX_XID_KEYS = 4096                    # distinct Xid lines remembered per rank, so that none counts twice
MAX_KLINE = 2000                       # a kernel log line longer than this is cut before it is read
_XID = re.compile(r"NVRM: Xid \((PCI:[0-9A-Fa-f:.]{1,32})\): ([0-9]{1,5})(?:,\s?(.*))?$")
_STAMP = re.compile(r"([0-9]{4})-([0-9]{2})-([0-9]{2})T([0-9]{2}):([0-9]{2}):([0-9]{2})(?:[,.]([0-9]{1,9}))?"
                    r"(Z|[+-][0-9]{2}:?[0-9]{2})?")


@dataclass(frozen=True)
class XidEvent:
    """One Xid line: the Xid, the device, the host's time of the line (epoch s; None: no stamp read), the
    rest of the line (bounded, escapes neutralised)."""

    xid: int
    pci: str
    at: float | None
    detail: str

    @property
    def info(self) -> XidInfo | None:
        return XIDS.get(self.xid)

    @property
    def name(self) -> str:
        info = self.info
        return info.name if info else "unlisted Xid"

    @property
    def critical(self) -> bool:
        info = self.info
        return info.critical if info else False

    @property
    def remedy(self) -> str:
        info = self.info
        return info.remedy if info else UNKNOWN_XID_REMEDY

    @property
    def key(self) -> tuple[int, str, float | None, str]:
        return (self.xid, self.pci, self.at, self.detail)


def _epoch(m: re.Match[str]) -> float | None:
    try:
        y, mo, d, h, mi, s = (int(m.group(i)) for i in range(1, 7))
        frac = float(f"0.{m.group(7)}") if m.group(7) else 0.0
        secs = calendar.timegm((y, mo, d, h, mi, s, 0, 0, 0))
    except (ValueError, OverflowError):
        return None
    tz = m.group(8)
    if tz and tz != "Z":
        sign = -1 if tz[0] == "-" else 1
        digits = tz[1:].replace(":", "")
        secs -= sign * (int(digits[:2]) * 3600 + int(digits[2:]) * 60)
    elif not tz:
        return None                     # a stamp without its zone cannot be placed in time
    return secs + frac


def parse_xid_line(line: str) -> XidEvent | None:
    """A kernel log line (journalctl short-iso, dmesg iso, or bare) as an XidEvent; None: no Xid line."""
    line = line[:MAX_KLINE]
    m = _XID.search(line)
    if m is None:
        return None
    stamp = _STAMP.match(line.strip())
    at = _epoch(stamp) if stamp else None
    return XidEvent(int(m.group(2)), m.group(1), at, neutralise((m.group(3) or "")[:300]))


# ---- can the kernel log be read? -----------------------------------------------------------------------

KlogSource = Literal["journalctl", "dmesg", "none"]
# what journalctl / dmesg print when the login may not read the kernel's messages
_DENIED = (
    ("not seeing messages from other users and the system", "journalctl: this login may not read the "
     "system journal"),
    ("No journal files were opened due to insufficient permissions", "journalctl: no journal file readable"),
    ("read kernel buffer failed: Operation not permitted", "dmesg restricted (kernel.dmesg_restrict=1)"),
    ("Operation not permitted", "not permitted"),
    ("Permission denied", "permission denied"),
)
KLOG_REMEDY = ("add the login to the systemd-journal (or adm) group on the host (`sudo usermod -aG "
               "systemd-journal USER`, then log in again) so that `journalctl -k` can read the kernel's "
               "messages; until then Xid errors on this rank are unknown")


def denied_reason(line: str) -> str | None:
    """Why the kernel log is unreadable, if `line` is journalctl's or dmesg's refusal; else None."""
    for needle, reason in _DENIED:
        if needle in line:
            return reason
    return None


@dataclass(frozen=True)
class KlogStatus:
    """Can this rank's kernel log be read? `readable` None: not known yet (never "no Xid")."""

    source: KlogSource | None = None
    readable: bool | None = None
    reason: str = ""                    # why not readable (or why not known)

    def text(self) -> str:
        """`journalctl`, `not readable: …`, `not known yet`."""
        if self.readable:
            return self.source or "readable"
        if self.readable is False:
            return f"not readable: {self.reason}"
        return f"not known yet{': ' + self.reason if self.reason else ''}"
