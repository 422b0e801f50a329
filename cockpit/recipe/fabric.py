"""The fabric test: perftest's `ib_write_bw` and `ib_write_lat` between pairs of ranks over the configured
HCA, GID index and fabric IP, judged against the ports' active rate and against the other pairs.

For each pair (server rank, client rank) and each tool, in turn (pairs share ports: never two at once):
the server starts on its host under `timeout` and prints its pid, the client starts once the server
listens, and at the end the server is ended by its pid if it still runs. Every run is bounded by
`[fabric] timeout_s`. The reports are parsed by their real column layout; an error is classified (dead
port, wrong GID, peer unreachable, perftest missing, timeout) with its remedy. A pair is slow below
`min_rate_ratio` of the slower port's active rate or of the best pair's bandwidth; when every slow or
failed pair shares one rank, that rank's link is named.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import re
import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Literal

from cockpit.config import ClusterConfig
from cockpit.hosts import (
    CommandTimeout,
    Fleet,
    Host,
    HostUnavailable,
    Result,
    ShellCommand,
    command,
)
from cockpit.hosts.shell import PID_TAG, end_perftest, perftest, streamed
from cockpit.recipe.containers import ps_argv, ps_named

Verdict = Literal["pass", "slow", "fail"]
LAT_SIZE = 2                # ib_write_lat's own default message size
BW_ITERS = 5000
LAT_ITERS = 1000
SERVER_START_S = 15.0       # the server must be listening within this long
SERVER_LINES = 2000         # lines of a server's output kept
RESULT_FILE = "fabric-last.json"
MARKER = "R37FABRIC"

BW_COLUMNS = ("#bytes", "#iterations", "BW peak[Gb/sec]", "BW average[Gb/sec]", "MsgRate[Mpps]")
LAT_COLUMNS = ("#bytes", "#iterations", "t_min[usec]", "t_max[usec]", "t_typical[usec]", "t_avg[usec]",
               "t_stdev[usec]", "99% percentile[usec]", "99.9% percentile[usec]")
_LAT_HEAD = re.compile("|".join(re.escape(c) for c in LAT_COLUMNS))
_NUM = re.compile(r"[-+]?\d+(?:\.\d+)?\Z")

REMEDY_PORT = ("the port is down: check the cable and the switch port of {hca} on rank {rank} "
               "(`ibv_devinfo -d {hca}`, `rdma link show`); the cockpit never changes networking")
REMEDY_GID = ("the GID index {gid} is not the RoCE v2 GID of the fabric IP on rank {server} or {client}: "
              "list the GIDs "
              "(`show_gids`, or /sys/class/infiniband/{hca}/ports/1/gid_attrs/types/*) and set gid_index "
              "in cluster.toml to the RoCE v2 entry of the fabric IP")
REMEDY_CONNECT = ("rank {client} cannot reach {ip}:{port} on rank {server}: check the fabric IP and netmask "
                  "on both hosts (`ip -br addr`), a firewall on the fabric, and that the port is free")
REMEDY_MISSING = "perftest is not installed on rank {rank}: `sudo apt install perftest` on that host"
REMEDY_DEVICE = "rank {rank} has no RDMA device {hca}: check ib_hca in cluster.toml against `ibv_devinfo -l`"
REMEDY_TIMEOUT = ("no answer within {timeout:g} s between ranks {server} and {client}: check the link "
                  "(cable, switch port), the fabric IP, and that nothing else holds the port")
REMEDY_SLOW = ("{what} is slow: reseat or swap the cable and check the switch port; check the MTU "
               "(`ibv_devinfo` active_mtu 4096, netdev MTU 9000), the GID (RoCE v2 of the fabric IP) and "
               "PFC/ECN on the switch (`rdma statistic show` for retransmits)")


@dataclass(frozen=True)
class BwRow:
    size: int
    iterations: int
    peak_gbps: float
    avg_gbps: float
    msg_rate_mpps: float


@dataclass(frozen=True)
class LatRow:
    size: int
    iterations: int
    values: dict[str, float]

    @property
    def avg_us(self) -> float | None:
        return self.values.get("t_avg[usec]")

    @property
    def typical_us(self) -> float | None:
        return self.values.get("t_typical[usec]")


def _numbers(line: str) -> list[float] | None:
    words = line.split()
    if not words or not all(_NUM.match(w) for w in words):
        return None
    return [float(w) for w in words]


def parse_bw(text: str) -> BwRow | None:
    """The first result row under ib_write_bw's table header (`--report_gbits`, or MB/sec converted)."""
    lines = text.splitlines()
    for i, line in enumerate(lines):
        if "#bytes" in line and "BW average[" in line:
            factor = 1.0 if "[Gb/sec]" in line else 8 * 1048576 / 1e9     # MB/sec (MiB) → Gb/s
            for row in lines[i + 1:]:
                nums = _numbers(row)
                if nums is not None and len(nums) >= 4:
                    rate = nums[4] if len(nums) > 4 else 0.0
                    return BwRow(int(nums[0]), int(nums[1]), nums[2] * factor, nums[3] * factor, rate)
                if row.startswith("-" * 10):
                    return None
    return None


def parse_lat(text: str) -> LatRow | None:
    """The first result row under ib_write_lat's table header, by the header's own columns (older
    perftest prints fewer columns; "Conflicting CPU frequency" lines between header and row are skipped)."""
    lines = text.splitlines()
    for i, line in enumerate(lines):
        if "#bytes" in line and "t_min[usec]" in line:
            columns = _LAT_HEAD.findall(line)
            for row in lines[i + 1:]:
                nums = _numbers(row)
                if nums is not None and len(nums) >= 3:
                    values = {c: v for c, v in zip(columns, nums, strict=False)}
                    return LatRow(int(nums[0]), int(nums[1]), values)
                if row.startswith("-" * 10):
                    return None
    return None


def parse_rate(text: str) -> float | None:
    """`200 Gb/sec (2X NDR)` (sysfs `ports/N/rate`) → 200.0."""
    m = re.match(r"\s*(\d+(?:\.\d+)?)\s*Gb/sec", text)
    return float(m.group(1)) if m else None


@dataclass(frozen=True)
class Failure:
    what: str
    rank: int
    remedy: str


def classify(text: str, status: int | None, *, server: int, client: int, side: int, cfg: ClusterConfig,
             timeout_s: float) -> Failure:
    """Why a perftest side failed, from its output and exit status."""
    host = cfg.host(side)
    hca, gid = host.ib_hca[0], host.gid_index
    fmt = {"rank": side, "hca": hca, "gid": gid, "server": server, "client": client,
           "ip": cfg.host(server).fabric_ip, "port": cfg.fabric.port, "timeout": timeout_s}
    if "state is Down" in text:
        return Failure(f"port {hca}/1 is down on rank {side}", side, REMEDY_PORT.format(**fmt))
    if "Failed status 12" in text or "to RTR" in text or "Connect the HCA's" in text:
        return Failure(f"the RDMA connection failed (GID index {gid}: not RoCE v2 of the fabric IP?)",
                       side, REMEDY_GID.format(**fmt))
    if "Couldn't connect to" in text:
        return Failure(f"rank {client} could not connect to rank {server} at "
                       f"{cfg.host(server).fabric_ip}:{cfg.fabric.port}", side, REMEDY_CONNECT.format(**fmt))
    if "Unable to find the Infiniband/RoCE device" in text or "IB device" in text:
        return Failure(f"no RDMA device {hca} on rank {side}", side, REMEDY_DEVICE.format(**fmt))
    if status == 127 or "command not found" in text or "No such file" in text:
        return Failure(f"perftest is not installed on rank {side}", side, REMEDY_MISSING.format(**fmt))
    if status in (124, 137, None):
        return Failure(f"no result within {timeout_s:g} s", side, REMEDY_TIMEOUT.format(**fmt))
    if "Couldn't listen" in text:
        return Failure(f"port {cfg.fabric.port} is in use on rank {side}", side,
                       f"another program listens on port {cfg.fabric.port} on rank {side}: set "
                       "[fabric] port to a free one")
    last = next((ln.strip() for ln in reversed(text.splitlines()) if ln.strip()), "no output")
    return Failure(f"exit {status}: {last[:200]}", side, REMEDY_TIMEOUT.format(**fmt))


@dataclass(frozen=True)
class PairResult:
    server: int
    client: int
    bw: BwRow | None = None
    lat: LatRow | None = None
    expected_gbps: float | None = None
    verdict: Verdict = "fail"
    problem: str = ""
    remedy: str = ""
    commands: tuple[str, ...] = ()

    @property
    def pair(self) -> str:
        return f"{self.server}↔{self.client}"

    def as_dict(self) -> dict[str, object]:
        return {"server": self.server, "client": self.client,
                "bw_gbps": self.bw.avg_gbps if self.bw else None,
                "bw_peak_gbps": self.bw.peak_gbps if self.bw else None,
                "msg_rate_mpps": self.bw.msg_rate_mpps if self.bw else None,
                "size": self.bw.size if self.bw else None,
                "lat_us": self.lat.avg_us if self.lat else None,
                "lat_typical_us": self.lat.typical_us if self.lat else None,
                "lat": dict(self.lat.values) if self.lat else None,
                "expected_gbps": self.expected_gbps, "verdict": self.verdict, "problem": self.problem,
                "remedy": self.remedy, "commands": list(self.commands)}


@dataclass(frozen=True)
class FabricReport:
    pairs: tuple[PairResult, ...]
    rates: dict[int, float | None]
    size: int
    started: float
    elapsed: float
    slow_rank: int | None = None
    summary: str = ""
    remedy: str = ""
    refused: str = ""                       # not run: why (the engine serves)
    cluster: str = ""
    hosts: dict[int, str] = field(default_factory=dict)

    @property
    def passed(self) -> bool:
        return not self.refused and bool(self.pairs) and all(p.verdict == "pass" for p in self.pairs)

    def as_dict(self) -> dict[str, object]:
        return {"ok": self.passed, "cluster": self.cluster, "size": self.size, "started": self.started,
                "elapsed": round(self.elapsed, 3), "rates_gbps": {str(k): v for k, v in self.rates.items()},
                "slow_rank": self.slow_rank, "summary": self.summary, "remedy": self.remedy,
                "refused": self.refused, "pairs": [p.as_dict() for p in self.pairs]}


def choose_pairs(ranks: Sequence[int], mode: str) -> list[tuple[int, int]]:
    """(server, client) pairs: `all` every pair once, `ring` each rank with the next (the last with 0)."""
    rs = sorted(ranks)
    if mode == "ring":
        if len(rs) < 2:
            return []
        ring = [(rs[i], rs[(i + 1) % len(rs)]) for i in range(len(rs))]
        return ring[:1] if len(rs) == 2 else ring
    if mode != "all":
        raise ValueError(f"--pairs {mode!r}: give all or ring")
    return [(a, b) for i, a in enumerate(rs) for b in rs[i + 1:]]


def planned_commands(cfg: ClusterConfig, pairs: Sequence[tuple[int, int]], size: int) -> list[str]:
    """What the test runs, shown before it runs: `rank N: LINE` for both sides of every run."""
    out = []
    for s, c in pairs:
        for tool, sz, iters in (("ib_write_bw", size, BW_ITERS), ("ib_write_lat", LAT_SIZE, LAT_ITERS)):
            out.append(f"rank {s}: {_server_cmd(cfg, s, tool, sz, iters).line}")
            out.append(f"rank {c}: {_client_cmd(cfg, s, c, tool, sz, iters).line}")
    return out


def _server_cmd(cfg: ClusterConfig, s: int, tool: str, size: int, iters: int) -> ShellCommand:
    h = cfg.host(s)
    return perftest(tool, h.ib_hca[0], h.gid_index, cfg.fabric.port, size, iters, cfg.fabric.timeout_s)


def _client_cmd(cfg: ClusterConfig, s: int, c: int, tool: str, size: int, iters: int) -> ShellCommand:
    h = cfg.host(c)
    return perftest(tool, h.ib_hca[0], h.gid_index, cfg.fabric.port, size, iters, cfg.fabric.timeout_s,
                    server_ip=cfg.host(s).fabric_ip)


async def engine_serving(fleet: Fleet, cfg: ClusterConfig) -> list[int]:
    """Ranks whose engine container runs now (a fabric test would compete with its traffic)."""
    results = await fleet.run_all(command(ps_argv(cfg.cluster.container_name)), timeout=30)
    running = []
    for rank, res in sorted(results.items()):
        if isinstance(res, Result) and res.ok:
            entry = ps_named(res.stdout, cfg.cluster.container_name)
            if entry is not None and entry.state == "running":
                running.append(rank)
    return running


async def port_rates(fleet: Fleet, cfg: ClusterConfig) -> dict[int, float | None]:
    """The active rate of every rank's first ib_hca port (sysfs `ports/1/rate`), None when unreadable."""
    def cmd(host: Host) -> ShellCommand:
        return command(["cat", "--", f"/sys/class/infiniband/{cfg.host(host.rank).ib_hca[0]}/ports/1/rate"])
    results = await fleet.run_all(cmd, timeout=30)
    return {rank: parse_rate(res.stdout) if isinstance(res, Result) and res.ok else None
            for rank, res in sorted(results.items())}


@dataclass
class _Run:
    ok: bool
    text: str
    failure: Failure | None
    commands: list[str]


async def _run_tool(fleet: Fleet, cfg: ClusterConfig, s: int, c: int, tool: str, size: int,
                    iters: int) -> _Run:
    timeout = cfg.fabric.timeout_s
    server_cmd = _server_cmd(cfg, s, tool, size, iters)
    client_cmd = _client_cmd(cfg, s, c, tool, size, iters)
    lines: list[str] = []
    pid: int | None = None
    ready = asyncio.Event()

    lost: list[str] = []

    async def serve() -> None:
        nonlocal pid
        try:
            async for line in fleet[s].stream(streamed(server_cmd, MARKER)):
                if len(lines) < SERVER_LINES:           # a server that floods its output is cut here
                    lines.append(line)
                if line.startswith(PID_TAG + " "):
                    with contextlib.suppress(ValueError):
                        pid = int(line.split()[1])
                if "Waiting for client to connect" in line:
                    ready.set()
        except HostUnavailable as exc:
            lost.append(str(exc))
        finally:
            ready.set()

    commands = [f"rank {s}: {server_cmd.line}", f"rank {c}: {client_cmd.line}"]
    task = asyncio.create_task(serve(), name=f"perftest-server-{s}")
    try:
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(ready.wait(), SERVER_START_S)
        if lost:
            return _Run(False, lost[0], Failure(f"rank {s} was lost: {lost[0][:200]}", s,
                                                f"rank {s}'s host does not answer: see pane 1 (Hosts), then "
                                                "run the test again"), commands)
        if task.done() or not any("Waiting for client" in ln for ln in lines):
            text = "\n".join(ln for ln in lines if not ln.startswith((PID_TAG, MARKER)))
            with contextlib.suppress(Exception):
                task.result() if task.done() else None
            status = _exit_status(lines)
            return _Run(False, text, classify(text, status, server=s, client=c, side=s, cfg=cfg,
                                              timeout_s=timeout), commands)
        try:
            res = await fleet[c].run(client_cmd, timeout=timeout + 10)
        except (CommandTimeout, HostUnavailable) as exc:
            return _Run(False, str(exc), classify(str(exc), None, server=s, client=c, side=c, cfg=cfg,
                                                  timeout_s=timeout), commands)
        text = res.stdout + ("\n" + res.stderr if res.stderr else "")
        if not res.ok:
            return _Run(False, text, classify(text, res.exit_status, server=s, client=c, side=c, cfg=cfg,
                                              timeout_s=timeout), commands)
        return _Run(True, text, None, commands)
    finally:
        with contextlib.suppress(TimeoutError, asyncio.CancelledError, Exception):
            await asyncio.wait_for(asyncio.shield(task), 5)
        if not task.done():
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        if pid is not None:
            with contextlib.suppress(CommandTimeout, HostUnavailable):
                await fleet[s].run(end_perftest(pid), timeout=15)


def _exit_status(lines: list[str]) -> int | None:
    """The exit status the server stream's last line carries (`MARKER exit N`), None when it never ended."""
    for line in reversed(lines):
        m = re.fullmatch(rf"{MARKER} exit (\d+)\s*", line)
        if m:
            return int(m.group(1))
    return None


async def run_pair(fleet: Fleet, cfg: ClusterConfig, s: int, c: int, size: int,
                   rates: dict[int, float | None]) -> PairResult:
    known = [r for r in (rates.get(s), rates.get(c)) if r is not None]
    expected = min(known) if known else None
    bw_run = await _run_tool(fleet, cfg, s, c, "ib_write_bw", size, BW_ITERS)
    commands = list(bw_run.commands)
    if not bw_run.ok:
        assert bw_run.failure is not None
        return PairResult(s, c, expected_gbps=expected, verdict="fail", problem=bw_run.failure.what,
                          remedy=bw_run.failure.remedy, commands=tuple(commands))
    bw = parse_bw(bw_run.text)
    lat_run = await _run_tool(fleet, cfg, s, c, "ib_write_lat", LAT_SIZE, LAT_ITERS)
    commands += lat_run.commands
    lat = parse_lat(lat_run.text) if lat_run.ok else None
    if bw is None:
        return PairResult(s, c, None, lat, expected, "fail", "ib_write_bw printed no result row",
                          REMEDY_TIMEOUT.format(timeout=cfg.fabric.timeout_s, server=s, client=c),
                          tuple(commands))
    if not lat_run.ok:
        assert lat_run.failure is not None
        return PairResult(s, c, bw, None, expected, "fail", lat_run.failure.what, lat_run.failure.remedy,
                          tuple(commands))
    return PairResult(s, c, bw, lat, expected, "pass", "", "", tuple(commands))


def judge(pairs: list[PairResult], ratio: float) -> tuple[list[PairResult], int | None, str, str]:
    """Mark the slow pairs (below `ratio` of the expected rate or of the best pair), name the rank that
    every slow or failed pair shares, and say it in one sentence with a remedy."""
    measured = [p.bw.avg_gbps for p in pairs if p.bw is not None and p.verdict == "pass"]
    best = max(measured) if measured else None
    median = statistics.median(measured) if measured else None
    out = []
    for p in pairs:
        if p.verdict == "pass" and p.bw is not None:
            why = ""
            if p.expected_gbps and p.bw.avg_gbps < ratio * p.expected_gbps:
                why = (f"{p.bw.avg_gbps:.1f} Gb/s is below {ratio:.0%} of the ports' active rate "
                       f"{p.expected_gbps:g} Gb/s")
            elif best and p.bw.avg_gbps < ratio * best:
                why = f"{p.bw.avg_gbps:.1f} Gb/s against {best:.1f} Gb/s on the best pair"
            if why:
                p = PairResult(p.server, p.client, p.bw, p.lat, p.expected_gbps, "slow", why,
                               REMEDY_SLOW.format(what=f"the {p.pair} link"), p.commands)
        out.append(p)
    bad = [p for p in out if p.verdict != "pass"]
    if not bad:
        if not out:
            return out, None, "no pair was tested", ""
        return out, None, (f"{len(out)} pair(s) passed: {min(measured):.1f}–{max(measured):.1f} Gb/s "
                           f"(median {median:.1f})"), ""
    shared = set.intersection(*({p.server, p.client} for p in bad))
    good = {r for p in out if p.verdict == "pass" for r in (p.server, p.client)}
    slow_rank = None
    if len(shared) == 1 and (len(bad) > 1 or not good or len(out) == 1):
        slow_rank = next(iter(shared))
    elif len(shared) == 1:
        slow_rank = next(iter(shared)) if next(iter(shared)) not in good else None
    first = bad[0]
    remedy = first.remedy
    if slow_rank is not None and first.verdict == "slow":
        remedy = REMEDY_SLOW.format(what=f"rank {slow_rank}'s link")
    if slow_rank is not None:
        summary = (f"rank {slow_rank}'s link: {len(bad)} of {len(out)} pair(s) with rank {slow_rank} "
                   f"{'failed' if all(p.verdict == 'fail' for p in bad) else 'are slow or failed'} "
                   f"({first.problem})")
    else:
        summary = f"{len(bad)} of {len(out)} pair(s) slow or failed; first {first.pair}: {first.problem}"
    return out, slow_rank, summary, remedy


async def run_fabric(fleet: Fleet, cfg: ClusterConfig, pairs: Sequence[tuple[int, int]], size: int,
                     on_pair: Callable[[PairResult], None] | None = None) -> FabricReport:
    """Run every pair in turn and judge them (see the module doc)."""
    started, t0 = time.time(), time.monotonic()
    rates = await port_rates(fleet, cfg)
    results = []
    for s, c in pairs:
        result = await run_pair(fleet, cfg, s, c, size, rates)
        results.append(result)
        if on_pair is not None:
            on_pair(result)
    judged, slow_rank, summary, remedy = judge(results, cfg.fabric.min_rate_ratio)
    return FabricReport(tuple(judged), rates, size, started, time.monotonic() - t0, slow_rank, summary,
                        remedy, cluster=cfg.cluster.name, hosts={h.rank: h.target for h in cfg.hosts})


# ---- the last result, for the launch gate `[fabric] require_passed` ------------------------------------

def result_path(state_dir: Path, cluster: str) -> Path:
    safe_name = re.sub(r"[^A-Za-z0-9_.-]", "_", cluster) or "cluster"
    return state_dir / f"{safe_name}-{RESULT_FILE}"


def save_result(state_dir: Path, report: FabricReport) -> Path:
    """The last fabric test of this cluster (replaced by the next one: it is the cockpit's own state)."""
    from cockpit.files import write_atomic
    state_dir.mkdir(parents=True, exist_ok=True)
    data = {"cluster": report.cluster, "ok": report.passed, "started": report.started,
            "summary": report.summary, "pairs": [asdict(p) | {"bw": None, "lat": None} for p in report.pairs]}
    return write_atomic(result_path(state_dir, report.cluster), json.dumps(data, default=str) + "\n",
                        overwrite=True)


def gate_failure(cfg: ClusterConfig, state_dir: Path) -> str | None:
    """With `[fabric] require_passed`, why the launch gate refuses (no passed fabric test of this cluster
    on record, or the last one did not pass); None when it may go on. Counted with the preflight's
    failures, so `--override-preflight` overrides it like them."""
    if not cfg.fabric.require_passed:
        return None
    last = last_result(state_dir, cfg.cluster.name)
    if last is None:
        return ("fabric test: [fabric] require_passed is set and no fabric test of this cluster is on record "
                "— run `r37-cockpit fabric`")
    if last.get("ok") is not True:
        return (f"fabric test: the last one did not pass ({str(last.get('summary', ''))[:200]}) — fix it and "
                "run `r37-cockpit fabric` again")
    return None


def last_result(state_dir: Path, cluster: str) -> dict[str, object] | None:
    try:
        data = json.loads(result_path(state_dir, cluster).read_text())
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


# ---- text (the CLI and the TUI show the same) ----------------------------------------------------------

def _table(rows: list[list[str]], header: list[str]) -> str:
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]
    return "\n".join("  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip()
                     for r in [header, *rows])


def matrix(pairs: Sequence[dict[str, object]], ranks: Sequence[int], key: str, fmt: str) -> str:
    """A rank × rank table of one figure of every pair (mirrored; SLOW/FAIL where judged so)."""
    cells: dict[tuple[int, int], str] = {}
    for p in pairs:
        s, c = int(str(p["server"])), int(str(p["client"]))
        value = p.get(key)
        text = fmt.format(value) if isinstance(value, int | float) else str(p["verdict"]).upper()
        if p["verdict"] == "slow":
            text += " SLOW"
        cells[(s, c)] = cells[(c, s)] = text
    rows = [[f"rank {a}", *[("—" if a == b else cells.get((a, b), "")) for b in ranks]] for a in ranks]
    return _table(rows, ["", *[f"rank {b}" for b in ranks]])


def fabric_text(data: dict[str, object], ranks: Sequence[int]) -> str:
    """The matrices of Gb/s and µs, the ports' rates, every pair that is not a pass, the verdict and
    the remedy (host text neutralised)."""
    from cockpit.safetext import safe
    pairs = data["pairs"]
    assert isinstance(pairs, list)
    lines = ["bandwidth (Gb/s, ib_write_bw average):", matrix(pairs, ranks, "bw_gbps", "{:.1f}"), "",
             "latency (µs, ib_write_lat average):", matrix(pairs, ranks, "lat_us", "{:.2f}"), ""]
    rates = data["rates_gbps"]
    assert isinstance(rates, dict)
    lines.append("port active rate: " + ", ".join(
        f"rank {r} {v:g} Gb/s" if isinstance(v, int | float) else f"rank {r} unknown"
        for r, v in rates.items()))
    for p in pairs:
        if p["verdict"] != "pass":
            verdict = str(p["verdict"]).upper()
            lines.append(f"{verdict} {p['server']}↔{p['client']}: {safe(p['problem'], 300)}")
    lines.append("")
    lines.append(("PASSED: " if data["ok"] else "NOT PASSED: ") + safe(data["summary"], 400))
    if data["remedy"]:
        lines.append(f"what to do: {safe(data['remedy'], 600)}")
    return "\n".join(lines)
