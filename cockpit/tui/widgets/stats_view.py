"""What the Stats pane draws, as Rich renderables of the stats model (no judgement of its own).

`rank_table` is the cluster view (one row per rank, comparable side by side), `engine_block` rank 0's
/metrics figures, `alerts_block` the active alerts and `rank_detail` one rank in full. A cell tied to an
active alert of its rank takes the alert's role (`ALERT_CELL`); a stale rank is dimmed with its age;
an unknown figure is "–", never 0. Every text that came from a host is neutralised.
"""

from __future__ import annotations

import time
from collections.abc import Collection, Iterable, Sequence

from rich.console import Group, RenderableType
from rich.text import Text

from cockpit.safetext import safe
from cockpit.telemetry.cluster_stats import (
    Alert,
    ClusterStats,
    History,
    MemoryStats,
    RankStats,
    stale_after,
)
from cockpit.telemetry.gpu_events import BAD_REASONS, reason_label, reasons_of
from cockpit.telemetry.rdma import ALERTING, PortStats
from cockpit.tui.widgets.age import span
from cockpit.tui.widgets.grid import Column, grid
from cockpit.tui.widgets.sparkline import sparkline

UNKNOWN = "–"
GIB = 1 << 30
WIDE = 120          # from this many columns the cluster view shows counters and sparklines
SPARK = 16          # cluster view sparkline cells
DETAIL_SPARK = 60   # detail view sparkline cells (fewer when narrow)
# alert kind -> the cell of its rank's row it marks ("rank": the rank itself)
ALERT_CELL = {"clock-latched": "sm", "memory-low": "mem", "rdma-port-down": "rdma", "rdma-errors": "rdma",
              "container-down": "rank", "no-readings": "rank", "gpu-unreadable": "util",
              "gpu-thermal": "temp", "gpu-power-brake": "power", "gpu-hw-slowdown": "sm", "gpu-xid": "rank"}
# alert kind -> the engine figure it marks
ENGINE_CELL = {"kv-cache-full": "kv", "preemptions": "preemptions", "engine-hung": "engine"}
SERIES_LABEL = {"util": ("util", "%"), "sm_mhz": ("SM clock", "MHz"), "power_w": ("power", "W"),
                "temp_c": ("temp", "°C"), "mem_available_gib": ("MemAvailable", "GiB"),
                "tx_gbps": ("RDMA tx", "Gbit/s"), "rx_gbps": ("RDMA rx", "Gbit/s")}


def alert_role(alerts: Iterable[Alert]) -> str:
    """ "fail" when any alert fails, "warn" when all only warn ("": none)."""
    found = list(alerts)
    if not found:
        return ""
    return "fail" if any(a.severity == "fail" for a in found) else "warn"


def cell_roles(alerts: Sequence[Alert], rank: int) -> dict[str, str]:
    """The cells of `rank`'s row its active alerts mark, with the alert's role (fail over warn); an alert
    of a kind with no cell of its own marks the rank."""
    marked: dict[str, list[Alert]] = {}
    for a in alerts:
        if a.rank != rank or a.kind in ENGINE_CELL:
            continue
        marked.setdefault(ALERT_CELL.get(a.kind, "rank"), []).append(a)
    return {cell: alert_role(found) for cell, found in marked.items()}


def engine_roles(alerts: Sequence[Alert]) -> dict[str, str]:
    marked: dict[str, list[Alert]] = {}
    for a in alerts:
        if a.kind in ENGINE_CELL:
            marked.setdefault(ENGINE_CELL[a.kind], []).append(a)
    return {cell: alert_role(found) for cell, found in marked.items()}


# ---- figures ------------------------------------------------------------------------------------------

def num(value: float | None, fmt: str = "{:.0f}") -> str:
    return UNKNOWN if value is None else fmt.format(value)


def pct(ratio: float | None) -> str:
    return UNKNOWN if ratio is None else f"{ratio * 100:.0f} %"


def ms(seconds: float | None) -> str:
    return UNKNOWN if seconds is None else f"{seconds * 1000:.0f}"


def age_text(s: RankStats, interval_s: float, now: float, compact: bool = False) -> tuple[str, bool]:
    """The state/age cell of a rank and whether it is stale (`compact`: fewer words)."""
    stale = s.stale(interval_s, now)
    age = s.age(now)
    if s.sampler == "host down":
        return f"host down: {safe(s.error or 'not connected', 200)}", True
    if s.sampler == "failed":
        return f"sampler failed: {safe(s.error or 'no reason given', 200)}", True
    if age is None:
        return ("starting" if s.sampler == "starting" else "no readings yet"), True
    if stale:
        return (f"stale {span(age)}" if compact else f"no readings for {span(age)}"), True
    return (s.sampler if age < 2 else f"{s.sampler} · {span(age)}"), False


def memory_text(m: MemoryStats | None, compact: bool = False) -> str:
    """Unified: MemAvailable / MemTotal GiB and the engine's GiB; discrete: the GPU's MiB (as the model
    says, never assumed)."""
    if m is None or m.kind is None:
        return UNKNOWN
    if m.kind == "discrete":
        used, total = num(m.gpu_used_mib), num(m.gpu_total_mib)
        return f"{used}/{total}M gpu" if compact else f"GPU {used}/{total} MiB discrete"
    avail = num(None if m.available_bytes is None else m.available_bytes / GIB, "{:.1f}")
    total = num(None if m.total_bytes is None else m.total_bytes / GIB, "{:.0f}")
    engine = num(None if m.engine_bytes is None else m.engine_bytes / GIB, "{:.1f}")
    if compact:
        return f"{avail}/{total}G uni"
    return f"{avail}/{total} GiB eng {engine} unified"


def memory_detail(m: MemoryStats | None) -> str:
    if m is None or m.kind is None:
        return UNKNOWN
    if m.kind == "discrete":
        return f"discrete GPU memory: {num(m.gpu_used_mib)} MiB used of {num(m.gpu_total_mib)} MiB"
    gib = [num(None if b is None else b / GIB, "{:.1f}") for b in (m.available_bytes, m.total_bytes,
                                                                    m.engine_bytes)]
    return (f"unified (CPU and GPU share it): MemAvailable {gib[0]} GiB of MemTotal {gib[1]} GiB · "
            f"engine processes {gib[2]} GiB")


def port_sum(ports: Sequence[PortStats], attr: str) -> float | None:
    values = [v for p in ports if (v := getattr(p, attr)) is not None]
    return sum(values) if values else None


def rdma_text(ports: Sequence[PortStats], compact: bool = False) -> str:
    """tx/rx Gbit/s over every port, and how many ports are ACTIVE (the others by name)."""
    if not ports:
        return UNKNOWN
    tx, rx = num(port_sum(ports, "tx_gbps"), "{:.1f}"), num(port_sum(ports, "rx_gbps"), "{:.1f}")
    down = [p for p in ports if p.active is not True]
    if compact:
        state = f"{len(ports) - len(down)}/{len(ports)}"
        return f"{tx}↑{rx}↓ {state}"
    state = f"{len(ports) - len(down)}/{len(ports)} ACTIVE"
    for p in down:
        state += f" {safe(p.hca, 40)}/{p.port} {safe(p.state_word, 40)}"
    return f"↑{tx} ↓{rx} Gb/s {state}"


def changed_counters(ports: Sequence[PortStats]) -> dict[str, int]:
    out: dict[str, int] = {}
    for p in ports:
        for name, grew in p.changes.items():
            if grew:
                out[name] = out.get(name, 0) + grew
    return out


def counters_text(changes: dict[str, int], error_role: str) -> Text:
    text = Text()
    for i, (name, grew) in enumerate(sorted(changes.items())):
        if i:
            text.append(", ", style="muted")
        role = (error_role or "warn") if name in ALERTING else "muted"
        text.append(f"{safe(name, 60)} +{grew}", style=role)
    return text


# ---- the cluster view ---------------------------------------------------------------------------------

def rank_rows(stats: ClusterStats, now: float, width: int, selected: int | None = None,
              odd: Collection[int] = ()) -> tuple[list[Column], list[list[Text]]]:
    """The cluster view's columns and one row of cells per rank; narrow (below WIDE columns): compact
    memory and RDMA, no counters, no sparkline. `odd`: the ranks a hung engine's stuck report names
    (marked ▶ in the failure style)."""
    wide = width >= WIDE
    columns = [Column("rank", min_width=3), Column("sampler", max_width=24 if wide else 14, cut=True),
               Column("util", right=True, min_width=5), Column("SM MHz", right=True, min_width=9),
               Column("W", right=True, min_width=5 if wide else 4), Column("°C", right=True, min_width=3),
               Column("P", min_width=3), Column("memory", cut=True), Column("RDMA", cut=True)]
    if wide:
        columns += [Column("counters changed", max_width=22, cut=True),
                    Column("util history", min_width=SPARK)]
    rows = []
    for rank, s in sorted(stats.ranks.items()):
        roles = cell_roles(stats.alerts, rank)
        state, stale = age_text(s, stats.interval_s, now, compact=not wide)
        base = "stale" if stale else ""

        def cell(name: str, text: str, _roles: dict[str, str] = roles, _base: str = base) -> Text:
            return Text(text, style=_roles.get(name) or _base)

        g = s.gpu
        marker = "▸" if rank == selected else " "
        rank_style = "fail" if rank in odd else roles.get("rank") or ("stale" if stale else "bold")
        row: list[Text] = [
            Text.assemble((marker, "accent"), (f"{rank}", rank_style), ("▶" if rank in odd else "", "fail")),
            Text(state, style=roles.get("rank") or ("stale" if stale else "ok.soft")),
            cell("util", UNKNOWN if g is None or g.util is None else f"{g.util} %"),
            cell("sm", UNKNOWN if g is None else f"{num(g.sm)}/{num(g.max_sm)}"),
            cell("power", UNKNOWN if g is None else num(g.power_w, "{:.1f}" if wide else "{:.0f}")),
            cell("temp", UNKNOWN if g is None else num(g.temp_c)),
            cell("pstate", UNKNOWN if g is None or g.pstate is None else safe(g.pstate, 8)),
            cell("mem", memory_text(s.memory, compact=not wide)),
            cell("rdma", rdma_text(s.ports, compact=not wide)),
        ]
        if wide:
            changes = changed_counters(s.ports)
            counters = counters_text(changes, roles.get("rdma", ""))
            if stale:
                counters.stylize("stale")
            row.append(counters)
            row.append(sparkline(stats.history[rank].values("util")[-SPARK:], SPARK,
                                 "stale" if stale else "accent", lo=0, hi=100))
        rows.append(row)
    return columns, rows


def rank_table(stats: ClusterStats, now: float, width: int, selected: int | None = None,
               odd: Collection[int] = ()) -> Text:
    """The cluster view (`rank_rows`) laid out in aligned columns (`grid`: drawn every second)."""
    return grid(*rank_rows(stats, now, width, selected, odd), width)


# ---- the engine ---------------------------------------------------------------------------------------

def engine_block(stats: ClusterStats, now: float, width: int) -> Text:
    """Rank 0's /metrics figures; sparklines of gen tok/s and KV % when wide."""
    e = stats.engine
    text = Text()
    text.append("engine", style="bold")
    text.append(" (rank 0 /metrics)", style="muted")
    if e is None:
        text.append("  no /metrics read yet: the engine is not serving, or not reached", style="muted")
        return text
    roles = engine_roles(stats.alerts)
    age = max(0.0, now - e.at)
    stale = age > stale_after(stats.interval_s)
    if roles.get("engine"):
        text.append("  engine alert", style=roles["engine"])
    if stale:
        text.append(f"  figures from {span(age)} ago (no newer reading)", style="stale")
    if e.error is not None:
        text.append(f"\n/metrics unreadable: {safe(e.error, 300)}", style="fail.soft")
        return text
    if e.restarted:
        text.append("\nthe engine restarted: a new counter series began (rates resume next sample)",
                    style="warn")
    base = "stale" if stale else ""
    sep = " · "

    def part(label: str, value: str, role: str = "") -> Text:
        return Text.assemble((label + " ", base or "muted"), (value, role or base or "bold"))

    kv = e.kv_cache_usage
    finished = UNKNOWN if e.request_success is None else (", ".join(
        f"{safe(reason or '?', 30)} {count:.0f}" for reason, count in sorted(e.request_success.items()))
        or "none")
    lines = [
        [part("running", num(e.running)), part("waiting", num(e.waiting)),
         part("KV cache", pct(kv) if kv is None else f"{kv * 100:.1f} %", roles.get("kv", "")),
         part("gen", num(e.generation_tokens_per_s, "{:.1f}") + " tok/s"),
         part("prompt", num(e.prompt_tokens_per_s, "{:.1f}") + " tok/s")],
        [part("prefix hit", pct(e.prefix_cache_hit_rate)), part("spec accept", pct(e.spec_acceptance_rate)),
         part("mean accept len", num(e.spec_mean_acceptance_length, "{:.2f}")),
         part("preemptions", num(e.preemptions), roles.get("preemptions", ""))],
        [part("TTFT p50/p90/p99", f"{ms(e.ttft_p50_s)}/{ms(e.ttft_p90_s)}/{ms(e.ttft_p99_s)} ms"),
         part("ITL p50/p90/p99", f"{ms(e.itl_p50_s)}/{ms(e.itl_p90_s)}/{ms(e.itl_p99_s)} ms")],
        [part(f"finished (last {num(e.interval_s, '{:.0f}')} s)", finished)],
    ]
    for parts in lines:
        text.append("\n")
        line = Text()
        for p in parts:
            if line.plain and line.cell_len + len(sep) + p.cell_len > width:
                text.append_text(line)
                text.append("\n")
                line = Text()
            elif line.plain:
                line.append(sep, style="muted")
            line.append_text(p)
        text.append_text(line)
    if width >= WIDE:
        h = stats.engine_history
        text.append("\n")
        text.append("gen tok/s ", style="muted")
        text.append_text(sparkline(h.values("gen_tps"), 30, base or "accent", lo=0))
        text.append("   KV % ", style="muted")
        text.append_text(sparkline(h.values("kv_pct"), 30, base or "accent", lo=0, hi=100))
    return text


# ---- alerts -------------------------------------------------------------------------------------------

# ---- GPU events ---------------------------------------------------------------------------------------

def _window(seconds: float) -> str:
    return f"{seconds / 3600:g} h" if seconds >= 3600 else f"{seconds / 60:g} min"


def gpu_events_block(stats: ClusterStats, now: float, width: int, xid_window_s: float) -> Text | None:
    """Two lines, every rank side by side: its clock event reasons (the throttling ones marked), and the Xid
    lines of its kernel log within the alert window ("not readable" / "not known yet", never "none", where
    the log could not be read); a third naming why a log is not readable. None while no rank reported
    either (nothing sampled yet)."""
    ranks = sorted(stats.ranks.items())
    masks = {r: (s.gpu.event_reasons if s.gpu is not None and not s.stale(stats.interval_s, now) else None)
             for r, s in ranks}
    if all(m is None for m in masks.values()) and all(s.klog.source is None for _, s in ranks):
        return None
    text = Text(no_wrap=True, overflow="ellipsis")     # one line per row, cut with … where too wide
    text.append("clock events ", style="bold")
    for i, (r, _s) in enumerate(ranks):
        names = reasons_of(masks[r])
        text.append(" · " if i else " ", style="muted")
        text.append(f"{r} ", style="bold")
        if names is None:
            text.append("n/a", style="muted")
        elif not names:
            text.append("none", style="ok.soft")
        else:
            bad = [n for n in names if n in BAD_REASONS]
            text.append(", ".join(reason_label(n) for n in names),
                        style="fail" if bad else "ok.soft")
    text.append("\n")
    text.append(f"Xid ({_window(xid_window_s)})".ljust(13), style="bold")
    unreadable = []
    for i, (r, s) in enumerate(ranks):
        text.append(" · " if i else " ", style="muted")
        text.append(f"{r} ", style="bold")
        recent = [x for x in s.xids if (age := s.xid_age(x, now)) is not None and age <= xid_window_s]
        if recent:
            newest = recent[-1]
            more = f" +{len(recent) - 1}" if len(recent) > 1 else ""
            name = f" {safe(newest.name, 40)}" if width >= WIDE else ""
            text.append(f"{newest.xid}{name}{more}",
                        style="fail" if any(x.critical for x in recent) else "warn")
        elif s.klog.readable:
            text.append("none", style="ok.soft")
        elif s.klog.readable is False:
            text.append("not readable", style="warn")
            unreadable.append((r, s.klog.reason))
        else:
            text.append("not known yet", style="muted")
    for r, reason in unreadable:
        text.append("\n")
        text.append(f"rank {r} kernel log not readable: ", style="warn")
        text.append(safe(reason, 400), style="muted")
    return text


def alerts_block(alerts: Sequence[Alert], width: int) -> Text:
    """One line per alert (began HH:MM:SS, rank, message) and its remedy below; "no active alerts"."""
    text = Text()
    if not alerts:
        text.append("no active alerts", style="ok.soft")
        return text
    text.append(f"alerts ({len(alerts)})", style="bold")
    for a in alerts:
        role = "fail" if a.severity == "fail" else "warn"
        began = time.strftime("%H:%M:%S", time.localtime(a.since))
        where = "cluster" if a.rank is None else f"rank {a.rank}"
        text.append("\n")
        text.append(f"{began} ", style="muted")
        text.append(f"{where} ", style="bold")
        text.append(f"{safe(a.kind, 40)}: ", style=role)
        text.append(safe(a.message, 400))
        text.append("\n  remedy: ", style="muted")
        text.append(safe(a.remedy, 600), style="muted")
    return text


# ---- one rank -----------------------------------------------------------------------------------------

def _history_lines(history: History, width: int) -> Text:
    text = Text()
    spark_w = max(10, min(DETAIL_SPARK, width - 40))
    for name, (label, unit) in SERIES_LABEL.items():
        values = history.values(name)
        known = [v for v in values[-spark_w:] if v is not None]
        span = f"{min(known):.1f}–{max(known):.1f} {unit}" if known else UNKNOWN
        text.append(f"\n  {label:<13}", style="muted")
        lo, hi = (0.0, 100.0) if name == "util" else (None, None)
        text.append_text(sparkline(values, spark_w, "accent", lo=lo, hi=hi))
        text.append(f"  {span}", style="muted")
    return text


def _events_detail(s: RankStats, now: float, base: str) -> Text:
    """The rank's clock event reasons (each active one with how long) and its newest Xid lines (or why its
    kernel log is not read); empty while neither was ever reported."""
    text = Text()
    mask = s.gpu.event_reasons if s.gpu is not None else None
    if mask is None and s.klog.source is None and not s.xids:
        return text
    text.append("\nclock events", style="bold")
    names = reasons_of(mask)
    if names is None:
        text.append("  n/a (not reported)", style="muted")
    elif not names:
        text.append("  none active", style="ok.soft")
    for name in names or ():
        since = s.reasons_since.get(name)
        held = f" for {span(max(0.0, now - since))}" if since is not None else ""
        text.append(f"  {reason_label(name)}{held}", style="fail" if name in BAD_REASONS else base)
    text.append("\nXid", style="bold")
    if s.klog.readable is False:
        text.append(f"  kernel log {safe(s.klog.text(), 600)}", style="warn")
    elif not s.xids:
        text.append(f"  none read ({safe(s.klog.source or '', 20)})" if s.klog.readable else
                    f"  {safe(s.klog.text(), 300)}", style="ok.soft" if s.klog.readable else "muted")
    for x in s.xids[-5:]:
        age = s.xid_age(x, now)
        when = f"{span(age)} ago" if age is not None else "time unknown"
        text.append(f"\n  Xid {x.xid} {safe(x.name, 60)} on {safe(x.pci, 40)}, {when}",
                    style="fail" if x.critical else "warn")
        text.append(f"  {safe(x.detail, 160)}", style="muted")
    return text


def rank_detail(stats: ClusterStats, rank: int, now: float, width: int, command: str,
                starts: int, history: History | None = None,
                history_note: str | None = None) -> RenderableType:
    """Every figure of one rank: GPU, memory, compute processes, each port with every changed counter,
    its alerts, wide sparklines of each series (the live history, or `history` with its `history_note`:
    a recorded window), and the sampler's exact remote command."""
    s = stats.ranks[rank]
    roles = cell_roles(stats.alerts, rank)
    state, stale = age_text(s, stats.interval_s, now)
    base = "stale" if stale else ""
    text = Text()
    text.append(f"rank {rank}", style=roles.get("rank") or "bold")
    text.append("  ")
    text.append(state, style=roles.get("rank") or ("stale" if stale else "ok.soft"))
    g = s.gpu
    text.append("\nGPU", style="bold")
    if g is None:
        text.append(f"  {UNKNOWN} (no reading)", style="muted")
    else:
        text.append(f"  {safe(g.name or 'unnamed', 80)}", style=base)
        text.append(f"  util {UNKNOWN if g.util is None else f'{g.util} %'}", style=roles.get("util") or base)
        text.append(f"  SM {num(g.sm)} / {num(g.max_sm)} MHz", style=roles.get("sm") or base)
        text.append(f"  {num(g.power_w, '{:.1f}')} W  {num(g.temp_c)} °C  "
                    f"{safe(g.pstate, 8) if g.pstate else UNKNOWN}", style=base)
    text.append_text(_events_detail(s, now, base))
    text.append("\nmemory", style="bold")
    text.append(f"  {memory_detail(s.memory)}", style=roles.get("mem") or base)
    text.append("\ncompute processes", style="bold")
    if not s.apps:
        text.append("  none reported", style="muted")
    for app in s.apps:
        text.append(f"\n  pid {app.pid:<8} {safe(app.name, 80):<24} "
                    f"{UNKNOWN if app.used_mib is None else f'{app.used_mib} MiB'}", style=base)
    text.append("\nRDMA ports", style="bold")
    if not s.ports:
        text.append(f"  {UNKNOWN} (none read)", style="muted")
    for p in s.ports:
        prole = roles.get("rdma") if (p.active is not True or p.errors) else ""
        text.append(f"\n  {safe(p.hca, 40)}/{p.port} {safe(p.state or 'unknown', 40)}",
                    style=prole or base or ("ok.soft" if p.active else "warn"))
        text.append(f"  tx {num(p.tx_gbps, '{:.2f}')} Gbit/s  rx {num(p.rx_gbps, '{:.2f}')} Gbit/s",
                    style=base)
        if p.changes:
            text.append("\n    changed: ", style="muted")
            text.append_text(counters_text(dict(p.changes), roles.get("rdma", "")))
    mine = [a for a in stats.alerts if a.rank == rank]
    text.append("\nalerts", style="bold")
    if not mine:
        text.append("  none", style="ok.soft")
    for a in mine:
        text.append(f"\n  {safe(a.kind, 40)}: ", style="fail" if a.severity == "fail" else "warn")
        text.append(safe(a.message, 400))
        text.append(f"\n    remedy: {safe(a.remedy, 600)}", style="muted")
    text.append("\nhistory", style="bold")
    text.append(f" ({history_note or f'one point per {stats.interval_s:g} s, newest right'})", style="muted")
    text.append_text(_history_lines(history if history is not None else stats.history[rank], width))
    text.append("\nsampler", style="bold")
    text.append(f"  channels started: {starts} · the one command it runs on the host:", style="muted")
    text.append("\n")
    return Group(text, Text(command, style="command"))
