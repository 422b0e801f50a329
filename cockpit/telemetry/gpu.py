"""GPU readings from `nvidia-smi --query-gpu=… --format=csv,noheader,nounits` and the one clock rule.

`parse_gpu_line` turns one output line (a query line, or one line of the `-lms` loop, whose first field
may be a `timestamp`) into a typed `GpuReading`; a field the GPU cannot report (`[N/A]`,
`[Not Supported]`, empty) is None, never 0. A line that does not fit (a driver message, a header, an
unknown-field error, a cell that is not the number its field needs) is a `GpuParseError`, never an
exception. Formats: docs/host-tools.md (nvidia-smi, GB10); real H200 samples: tests/fixtures/samples/h200.

`clock_verdicts` is the SM clock rule (shared by preflight's `clocks` check and the Stats pane): a rank is
*loaded* by utilisation, not by performance state (an idle H200 reads P0 at 0 %); a loaded rank is
latched when its clock is below half of its `clocks.max.sm` or below 70 % of the median of its loaded
peers (a power-capped GPU runs well below its maximum: the H200 at 700 W, 1440–1530 of 1980 MHz); an idle
rank is latched when its clock sits in the reported latched band (600–1000 MHz) while its idle peers
read more than 30 % apart from it, suspect when it sits there with no idle peer to compare with.
"""

from __future__ import annotations

import re
import statistics
from collections.abc import Collection, Mapping
from dataclasses import dataclass
from typing import Literal

from cockpit.telemetry.gpu_events import parse_reason_mask

MAX_LINE = 4096                 # longer is not a line nvidia-smi prints: refuse it unread
UNAVAILABLE = {"", "n/a", "[n/a]", "not supported", "[not supported]", "unknown error", "[unknown error]"}
_NUMBER = re.compile(r"([-+]?[0-9]{1,30}(?:\.[0-9]{1,30})?)(?:\s*[A-Za-z%]{1,8})?")
_TIMESTAMP = re.compile(r"[0-9]{4}/[0-9]{2}/[0-9]{2} [0-9]{2}:[0-9]{2}:[0-9]{2}(?:\.[0-9]{1,6})?")
_PSTATE = re.compile(r"P[0-9]{1,2}")

INT_FIELDS = {"index": "index", "utilization.gpu": "util", "clocks.sm": "sm", "clocks.current.sm": "sm",
              "clocks.max.sm": "max_sm", "temperature.gpu": "temp_c", "memory.total": "mem_total_mib",
              "memory.used": "mem_used_mib"}
FLOAT_FIELDS = {"power.draw": "power_w", "power.draw.instant": "power_w"}
TEXT_FIELDS = {"name": "name", "pstate": "pstate", "timestamp": "timestamp"}
# the active clock event reasons, a hex bit mask (`clocks_throttle_reasons.active` before driver 535)
MASK_FIELDS = {"clocks_event_reasons.active": "event_reasons",
               "clocks_throttle_reasons.active": "event_reasons"}


@dataclass(frozen=True)
class GpuReading:
    """One GPU as one `nvidia-smi --query-gpu` line read it; None: not asked for, or not reported."""

    index: int | None = None
    name: str | None = None
    timestamp: str | None = None    # `YYYY/MM/DD HH:MM:SS.mmm` of a `-lms` loop line, as printed
    util: int | None = None         # utilization.gpu, %
    sm: int | None = None           # clocks.sm, MHz
    max_sm: int | None = None       # clocks.max.sm, MHz
    power_w: float | None = None    # power.draw, W
    temp_c: int | None = None       # temperature.gpu, °C
    pstate: str | None = None       # P0 … P12
    mem_total_mib: int | None = None
    mem_used_mib: int | None = None
    memory_asked: bool = False      # was memory.total or memory.used among the fields
    event_reasons: int | None = None  # clocks_event_reasons.active bit mask (gpu_events.REASONS)

    @property
    def memory_kind(self) -> Literal["discrete", "unified"] | None:
        """"discrete" when the GPU reports its own memory as a number, "unified" when the memory fields
        were asked and read `[N/A]` (GB10: one pool shared with the CPU), None when none was asked."""
        if self.mem_total_mib is not None or self.mem_used_mib is not None:
            return "discrete"
        return "unified" if self.memory_asked else None


@dataclass(frozen=True)
class GpuParseError:
    """A line that is no reading of the asked fields: why, and the line's start (at most 160 chars)."""

    reason: str
    line: str


def _na(cell: str) -> bool:
    return cell.strip().lower() in UNAVAILABLE


def _number(cell: str) -> float | None:
    m = _NUMBER.fullmatch(cell.strip())
    return float(m.group(1)) if m else None


def parse_gpu_line(line: str, fields: list[str]) -> GpuReading | GpuParseError:
    """One line of `--query-gpu=<fields> --format=csv,noheader[,nounits]` as a reading (fields in the
    order asked; units after a number, as without `nounits`, are ignored; unknown fields are kept out)."""
    head = line.strip()[:160]
    if len(line) > MAX_LINE:
        return GpuParseError(f"line longer than {MAX_LINE} characters", head)
    if any((ord(ch) < 32 and ch != "\t") or ord(ch) == 127 for ch in line.strip()):
        return GpuParseError("control characters in the line", head.encode("unicode_escape").decode()[:160])
    cells = [c.strip() for c in line.strip().split(",")]
    if len(cells) != len(fields):
        return GpuParseError(f"{len(cells)} cells for {len(fields)} fields", head)
    values: dict[str, object] = {}
    for fld, cell in zip(fields, cells, strict=True):
        if _na(cell):
            continue
        if fld in INT_FIELDS or fld in FLOAT_FIELDS:
            n = _number(cell)
            if n is None:
                return GpuParseError(f"{fld}: {cell[:40]!r} is not a number", head)
            values[INT_FIELDS.get(fld) or FLOAT_FIELDS[fld]] = n if fld in FLOAT_FIELDS else int(n)
        elif fld == "timestamp" and not _TIMESTAMP.fullmatch(cell):
            return GpuParseError(f"timestamp: {cell[:40]!r} is not YYYY/MM/DD HH:MM:SS.mmm", head)
        elif fld == "pstate" and not _PSTATE.fullmatch(cell):
            return GpuParseError(f"pstate: {cell[:40]!r} is not P0…P15", head)
        elif fld in MASK_FIELDS:
            mask = parse_reason_mask(cell)
            if mask is None:
                return GpuParseError(f"{fld}: {cell[:40]!r} is not a hex bit mask", head)
            values[MASK_FIELDS[fld]] = mask
        elif fld in TEXT_FIELDS:
            values[TEXT_FIELDS[fld]] = cell
    asked = "memory.total" in fields or "memory.used" in fields
    return GpuReading(memory_asked=asked, **values)  # type: ignore[arg-type]


def parse_gpu_lines(text: str, fields: list[str]) -> list[GpuReading | GpuParseError]:
    """Every non-blank line of an `nvidia-smi --query-gpu` output (at most 1024), in order."""
    return [parse_gpu_line(ln, fields) for ln in text.splitlines()[:1024] if ln.strip()]


# ---- the SM clock rule -------------------------------------------------------------------------------

LATCH_BAND = (600, 1000)   # the reported GB10 slow state: 630-950 MHz where a healthy one runs 2.2-2.4 GHz
LOADED_UTIL = 5            # % utilisation from which a GPU counts as loaded
LOW_OF_MAX = 0.5           # loaded below this share of clocks.max.sm: latched, peers or not
LOW_OF_PEERS = 0.7         # loaded below this share of the loaded peers' median: latched
IDLE_APART = 0.3           # idle in the band while idle peers read more than this apart: latched

ClockState = Literal["ok", "latched", "suspect", "unknown", "in_use"]


@dataclass(frozen=True)
class ClockVerdict:
    """The clock rule's word on one rank: state, whether it counts as loaded (None: cannot tell), why."""

    state: ClockState
    loaded: bool | None
    why: str = ""


def is_loaded(r: GpuReading) -> bool | None:
    """Loaded by utilisation only (P0 alone is no load); None when utilisation is not reported."""
    return None if r.util is None else r.util >= LOADED_UTIL


def _judge(r: GpuReading, loaded_peers: list[int], idle_peers: list[int]) -> ClockVerdict:
    sm, loaded = r.sm, is_loaded(r)
    if sm is None:
        return ClockVerdict("unknown", loaded, "no SM clock reported")
    if loaded is None:
        return ClockVerdict("unknown", None, "no utilisation reported: cannot tell load from idle")
    if loaded:
        if r.max_sm and sm < LOW_OF_MAX * r.max_sm:
            return ClockVerdict("latched", True, f"under load at {sm} MHz, below half of its {r.max_sm} MHz "
                                                 "maximum")
        if loaded_peers and sm < LOW_OF_PEERS * statistics.median(loaded_peers):
            return ClockVerdict("latched", True, f"{sm} MHz, far below the loaded peers "
                                                 f"({statistics.median(loaded_peers):.0f} MHz)")
        return ClockVerdict("ok", True)
    if not LATCH_BAND[0] <= sm <= LATCH_BAND[1]:
        return ClockVerdict("ok", False)
    if idle_peers:
        med = statistics.median(idle_peers)
        if abs(sm - med) > IDLE_APART * max(sm, med):
            return ClockVerdict("latched", False, f"idle at {sm} MHz while idle peers read {med:.0f} MHz: "
                                                  "latched")
        return ClockVerdict("ok", False)
    return ClockVerdict("suspect", False, f"idle at {sm} MHz, inside the reported latched band, no idle "
                                          "peer to compare")


def clock_verdicts(readings: Mapping[int, GpuReading], held: Collection[int] = ()) -> dict[int, ClockVerdict]:
    """The clock verdict of every rank, each judged against the other ranks (its peers).

    `held`: ranks whose GPU this cockpit's running engine holds (between requests it sits in P0 at an idle
    clock): below the load threshold such a rank is "in_use" and no peer of the others; loaded, it is
    judged like any rank."""
    active = {k: r for k, r in readings.items() if not (k in held and is_loaded(r) is not True)}
    out = {k: ClockVerdict("in_use", is_loaded(r)) for k, r in readings.items() if k not in active}
    for k, r in active.items():
        peers = [(p.sm, is_loaded(p)) for j, p in active.items() if j != k and p.sm is not None]
        out[k] = _judge(r, [sm for sm, up in peers if up], [sm for sm, up in peers if up is False])
    return dict(sorted(out.items()))
