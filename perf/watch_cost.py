"""What it costs to watch a cluster: the TUI at rest on each pane, and a one-off `status`, each next to a
floor measured in the same run.

A demo cluster of `--hosts` hosts is started in a temp dir, set up and launched (READY), then:

(a) TUI at rest: `r37-cockpit tui` runs in tmux at 160x48 (a real terminal, real frames), one run per
    pane in `--panes`; after the fleet is connected and `--warm` seconds on the pane, the CPU time of the
    TUI process (utime + stime from /proc) over `--seconds` gives its share of one core. Target: <= 2 %
    on any pane with 4 hosts, <= 4 % with more (16). The floor: the same remote streams the core keeps
    open at rest (each rank's watcher loop: `docker inspect` every second, a round equal to the last as
    one line; the stats sampler's loop) read through the cockpit's SSH layer (asyncssh) in a process of
    its own, every line discarded: what any client of those streams pays.
(b) `status --json`: CPU (user + system of the process) and wall time, median of `--runs`, next to the
    floor `ssh -F DIR/ssh_config HOST docker inspect CONTAINER` run on every host in parallel (OpenSSH,
    CPU of the ssh processes). Targets (4 hosts): <= 0.5 s CPU and <= 1.0 s wall on a quiet machine.
    Beside it, what importing costs: status's modules, and Python with the libraries alone (IMPORT_FLOORS).

    python perf/watch_cost.py [--hosts 4] [--panes hosts,launch,logs,stats] [--seconds 60] [--warm 10]
                              [--runs 5] [--json]

Everything it starts is its own: the demo cluster (stopped with `r37-cockpit stop`, which stops only the
containers this cockpit started, then `sim down`) and the tmux sessions (named r37-watch-cost-*).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from cockpit.config import load_config
from cockpit.hosts import Fleet, every_changed, stats_sampler
from cockpit.recipe.containers import inspect_argv
from cockpit.recipe.watch import FRAME_MARK
from cockpit.sim import cluster as sim
from cockpit.telemetry.host_sample import APP_FIELDS, GPU_FIELDS

PANE_KEYS = {"hosts": "1", "preflight": "2", "setup": "3", "launch": "4", "logs": "5", "stats": "6",
             "chat": "f7", "bench": "8", "commands": "9"}
TICKS = os.sysconf("SC_CLK_TCK")
TUI_TARGET, TUI_TARGET_LARGE = 0.02, 0.04   # share of a core at rest: with 4 hosts, with more (16)


def cli(toml: Path, *args: str, timeout: float = 600) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "cockpit", "--config", str(toml), *args],
                          capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL)


def proc_cpu_s(pid: int) -> float:
    """utime + stime of one process, in seconds (fields 14 and 15 of /proc/PID/stat)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICKS


def tmux(*args: str) -> str:
    return subprocess.run(["tmux", *args], capture_output=True, text=True, timeout=30, check=True).stdout


def tui_at_rest(toml: Path, pane: str, seconds: float, warm: float) -> dict[str, Any]:
    """One TUI in tmux on `pane`: its CPU share over `seconds` once connected and warm."""
    session = f"r37-watch-cost-{os.getpid()}-{pane}"
    cmd = f"{sys.executable} -m cockpit --config {toml} tui"
    tmux("new-session", "-d", "-s", session, "-x", "160", "-y", "48", cmd)
    try:
        pid = int(tmux("display-message", "-p", "-t", session, "#{pane_pid}").strip())
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:          # the header says every host is connected
            screen = tmux("capture-pane", "-p", "-t", session)
            if "READY" in screen or "ready" in screen:
                break
            time.sleep(0.5)
        tmux("send-keys", "-t", session, PANE_KEYS[pane])
        time.sleep(warm)
        t0, c0 = time.monotonic(), proc_cpu_s(pid)
        time.sleep(seconds)
        share = (proc_cpu_s(pid) - c0) / (time.monotonic() - t0)
        screen = tmux("capture-pane", "-p", "-t", session)
        return {"pane": pane, "cpu_share": round(share, 4), "first_line": screen.splitlines()[0][:120]
                if screen else ""}
    finally:
        subprocess.run(["tmux", "kill-session", "-t", session], capture_output=True, timeout=30)


async def _floor_streams(toml: Path, seconds: float, warm: float) -> float:
    """The remote streams the core keeps open at rest, read and discarded: CPU share of this process."""
    cfg = load_config(toml)
    lines = 0
    async with Fleet(cfg) as fleet:
        if not await fleet.wait_connected(60):
            raise SystemExit("the floor's fleet did not connect")

        async def read(rank: int, cmd: Any) -> None:
            nonlocal lines
            async for _ in fleet[rank].stream(cmd, merge_stderr=True):
                lines += 1

        tasks = []
        for rank in cfg.ranks:
            inspect = every_changed(1.0, inspect_argv(cfg.cluster.container_name), marker=FRAME_MARK)
            sampler = stats_sampler(cfg.stats.interval_s, GPU_FIELDS, APP_FIELDS, cfg.host(rank).ib_hca)
            tasks += [asyncio.create_task(read(rank, inspect)), asyncio.create_task(read(rank, sampler))]
        await asyncio.sleep(warm)
        t0, c0 = time.monotonic(), time.process_time()
        await asyncio.sleep(seconds)
        share = (time.process_time() - c0) / (time.monotonic() - t0)
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
    if lines == 0:
        raise SystemExit("the floor read no line: nothing was measured")
    return share


IMPORT_FLOORS = {
    # the libraries `status` stands on (SSH, HTTP, the config's models, the /metrics parser)
    "libraries": "import asyncssh, httpx, pydantic, prometheus_client.parser",
    # everything `status` imports (its command module and what it pulls in), and nothing run
    "imports": "import cockpit.cli, cockpit.cli.launch_cmd",
}


def _children_cpu() -> float:
    ru = resource.getrusage(resource.RUSAGE_CHILDREN)
    return ru.ru_utime + ru.ru_stime


def status_runs(toml: Path, cluster_dir: Path, runs: int) -> dict[str, Any]:
    """`status --json` and the floor (OpenSSH `docker inspect` on every host in parallel), interleaved."""
    cfg = load_config(toml)
    ssh_config = cluster_dir / "ssh_config"
    aliases = [ln.split()[1] for ln in ssh_config.read_text().splitlines() if ln.startswith("Host ")]
    rows: dict[str, list[tuple[float, float]]] = {"status": [], "floor": []}
    codes = []
    for _ in range(runs):
        c0, t0 = _children_cpu(), time.perf_counter()
        res = cli(toml, "status", "--json", timeout=120)
        rows["status"].append((_children_cpu() - c0, time.perf_counter() - t0))
        codes.append(res.returncode)
        c0, t0 = _children_cpu(), time.perf_counter()
        procs = [subprocess.Popen(["ssh", "-F", str(ssh_config), alias, "docker", "inspect",
                                   cfg.cluster.container_name], stdout=subprocess.DEVNULL,
                                  stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL) for alias in aliases]
        floor_codes = [p.wait(timeout=60) for p in procs]
        rows["floor"].append((_children_cpu() - c0, time.perf_counter() - t0))
        if any(floor_codes):
            raise SystemExit(f"the floor's ssh failed (exit {floor_codes}): check {ssh_config}")

    for kind, code in IMPORT_FLOORS.items():   # what starting Python and importing costs, no work done
        rows[kind] = []
        for _ in range(runs):
            c0, t0 = _children_cpu(), time.perf_counter()
            subprocess.run([sys.executable, "-c", code], check=True, timeout=60, stdin=subprocess.DEVNULL)
            rows[kind].append((_children_cpu() - c0, time.perf_counter() - t0))

    def med(kind: str, i: int) -> float:
        return round(statistics.median(r[i] for r in rows[kind]), 3)

    return {"runs": runs, "status_exit_codes": codes, "status_cpu_s": med("status", 0),
            "status_wall_s": med("status", 1), "floor_cpu_s": med("floor", 0),
            "floor_wall_s": med("floor", 1), "libraries_import_cpu_s": med("libraries", 0),
            "status_import_cpu_s": med("imports", 0)}


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--hosts", type=int, default=4)
    p.add_argument("--panes", default="hosts,launch,logs,stats")
    p.add_argument("--seconds", type=float, default=60.0)
    p.add_argument("--warm", type=float, default=10.0)
    p.add_argument("--runs", type=int, default=5)
    p.add_argument("--json", action="store_true")
    a = p.parse_args()
    if shutil.which("tmux") is None:
        raise SystemExit("tmux is needed (apt-get install tmux)")
    panes = [x for x in a.panes.split(",") if x]
    unknown = [x for x in panes if x not in PANE_KEYS]
    if unknown:
        raise SystemExit(f"unknown pane(s) {unknown}: choose from {sorted(PANE_KEYS)}")
    out = sys.stderr if a.json else sys.stdout
    work = Path(tempfile.mkdtemp(prefix="r37-watch-cost-"))
    toml = sim.demo_up(work, n=a.hosts)
    result: dict[str, Any] = {"hosts": a.hosts, "seconds": a.seconds, "cores": os.cpu_count()}
    launched = False
    try:
        for args in (("setup", "all", "--yes", "--json"), ("launch", "--yes", "--json")):
            res = cli(toml, *args)
            if res.returncode != 0:
                raise SystemExit(f"{args[0]} failed: {res.stdout[-500:]}{res.stderr[-500:]}")
            launched = launched or args[0] == "launch"
        print(f"demo cluster of {a.hosts} hosts launched in {work}; load {os.getloadavg()[0]:.1f}", file=out,
              flush=True)
        floor = asyncio.run(_floor_streams(toml, a.seconds, a.warm))
        print(f"floor (the core's remote streams read through asyncssh, discarded): {floor * 100:.2f} % of a "
              "core", file=out, flush=True)
        tui_target = TUI_TARGET if a.hosts <= 4 else TUI_TARGET_LARGE
        tuis = []
        for pane in panes:
            r = tui_at_rest(toml, pane, a.seconds, a.warm)
            tuis.append(r)
            print(f"TUI at rest on {pane:<9} {r['cpu_share'] * 100:6.2f} % of a core (target <= "
                  f"{tui_target * 100:.0f} %; floor "
                  f"{floor * 100:.2f} %)", file=out, flush=True)
        st = status_runs(toml, work, a.runs)
        print(f"status --json: {st['status_cpu_s']:.2f} s CPU, {st['status_wall_s']:.2f} s wall (median of "
              f"{a.runs}; targets with 4 hosts <= 0.5 s, <= 1.0 s); floor ssh docker inspect x{a.hosts}: "
              f"{st['floor_cpu_s']:.2f} s CPU, {st['floor_wall_s']:.2f} s wall", file=out, flush=True)
        print(f"  of which importing: {st['status_import_cpu_s']:.2f} s CPU for status's modules, "
              f"{st['libraries_import_cpu_s']:.2f} s of it for Python and the libraries alone "
              f"({IMPORT_FLOORS['libraries']})", file=out, flush=True)
        result |= {"floor_share": round(floor, 4), "tui": tuis, "status": st,
                   "load_avg_1m": round(os.getloadavg()[0], 1)}
        worst = max(t["cpu_share"] for t in tuis) if tuis else 0.0
        status_ok = a.hosts > 4 or (st["status_cpu_s"] <= 0.5 and st["status_wall_s"] <= 1.0)
        result["passed"] = worst <= tui_target and status_ok
    finally:
        if launched:
            cli(toml, "stop", "--yes", "--json")
        sim.down(work)
    if a.json:
        print(json.dumps(result, indent=2))
    print("PASS" if result.get("passed") else "FAIL (see the figures above)", file=out)
    return 0 if result.get("passed") else 1


if __name__ == "__main__":
    sys.exit(main())
