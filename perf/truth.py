"""Truth under load: the cluster's life cycle, run again and again on a demo cluster of its own while CPU hogs
load the machine, with a watcher sampling the live model every 100 ms; counts every wrong verdict, wrong rank
and transient false state.

Each cycle, on a fresh simulated cluster made by this script (`[engine] phase_limit_s` short, so a cluster a
few seconds old is past every stuck limit; while a launch boots, the watcher judges its phases with the limit
that launch has, `--phase-limit 300`: on a starved machine a boot phase really can outlast 3 s, and a limit
the operator set too short is not the cockpit's lie):

  launch        → READY; never DOWN, never a rank failed, never "incomplete"
  long-lived    → a cluster older than every stuck limit: three `status --json` READY, exit 0
  docker blip   → `docker-down` on one rank for a few seconds: unknown meanwhile, READY after; never DOWN
  stop          → the cockpit's own stop: STOPPED; never DOWN, never a rank failed or followed, never READY
                  once every rank stopped
  relaunch      → archive, remove, launch again: READY; never DOWN
  hang          → an answer streaming, then `hang` on rank 0's engine: HUNG within hang_after_s, `status`
                  HUNG; never DOWN, never a rank failed; READY again once the engine moves
  crash         → relaunch with `crash-after-ready` on rank r (r cycles 3, 2, 1, 0): DOWN naming rank r;
                  no verdict ever names another rank; `status --json` names r

The floor beside the figures: the same cycle's counts on the machine without hogs (`--hogs 0`).

    python perf/truth.py [--cycles 3] [--hogs N (default 4 x cores)] [--json]
    python perf/truth.py --soak 60 [--hogs N]     # long life: the TUI open, status every 30 s

Exit 1 when anything was wrong. Only simulated hosts are touched; the script removes only the stopped
containers its own launches started (through the cockpit's confirmed replace path: `launch
--replace-stopped --yes`), and its cluster ends with `sim down`.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import multiprocessing
import os
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cockpit.config import load_config
from cockpit.hosts import Fleet
from cockpit.recipe.watch import ClusterWatcher, phase_limits
from cockpit.sim import cluster as sim
from cockpit.sim.faults import set_fault

SPEED = 400.0  # boot time compression (the tests' speed)
LIMIT_S = 3.0
# archive and remove the stopped containers its own launches started (the cockpit's confirmed replace path)
RELAUNCH = ("launch", "--replace-stopped", "--yes", "--json", "--override-preflight", "--phase-limit", "300")
BOOT_LIMIT_S = 300.0  # while a launch boots, the watcher judges its phases as the launch does


def _spin(stop_at: float) -> None:
    while time.time() < stop_at:
        pass


@dataclass
class Tally:
    """What went wrong in one scenario over every cycle."""

    runs: int = 0
    wrong_final: list[str] = field(default_factory=list)
    wrong_rank: list[str] = field(default_factory=list)
    transient: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {
            "runs": self.runs,
            "wrong_final": len(self.wrong_final),
            "wrong_rank": len(self.wrong_rank),
            "transient": len(self.transient),
            "examples": (self.wrong_final + self.wrong_rank + self.transient)[:5],
        }


class Sampler:
    """The watcher's model every 100 ms: (verdict state, first failed, summary, rank conditions)."""

    def __init__(self, watcher: ClusterWatcher):
        self.watcher = watcher
        self.seen: list[tuple[str, int | None, str, tuple[str, ...]]] = []
        self._task = asyncio.create_task(self._loop())

    async def _loop(self) -> None:
        while True:
            t = self.watcher.timeline
            v = t.verdict
            self.seen.append(
                (v.state, v.first_failed, v.summary, tuple(x.condition for x in t.ranks.values()))
            )
            await asyncio.sleep(0.1)

    def mark(self) -> int:
        return len(self.seen)

    def since(self, mark: int) -> list[tuple[str, int | None, str, tuple[str, ...]]]:
        return self.seen[mark:]

    async def close(self) -> None:
        self._task.cancel()
        await asyncio.gather(self._task, return_exceptions=True)


def cli(toml: Path, *args: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "cockpit", "--config", str(toml), *args],
        capture_output=True,
        text=True,
        timeout=timeout,
    )


async def wait_for(watcher: ClusterWatcher, states: set[str], timeout: float) -> str:
    t0 = time.monotonic()
    while watcher.timeline.verdict.state not in states and time.monotonic() - t0 < timeout:
        await asyncio.sleep(0.1)
    return watcher.timeline.verdict.state


def bad_states(samples: list[Any], forbidden: set[str], conds: set[str]) -> list[str]:
    out = [f"verdict {s[0]}: {s[2]}" for s in samples if s[0] in forbidden]
    out += [f"rank condition {c} ({s[2]})" for s in samples for c in s[3] if c in conds]
    return out


async def hang(toml: Path, root: Path, cfg: Any, watcher: ClusterWatcher, sampler: Sampler, t: Tally) -> None:
    """An answer streaming when rank 0's engine hangs: HUNG within `hang_after_s` (and `status` says so),
    never DOWN, no rank failed; READY again once the engine moves and the answer's client is gone."""
    chat = subprocess.Popen([sys.executable, "-m", "cockpit", "--config", str(toml), "chat", "--timeout",
                             "120", "--max-tokens", "4000", "--no-thinking", "write a long story"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL)
    try:
        t0 = time.monotonic()
        while time.monotonic() - t0 < 60:
            sample = watcher._last_sample
            if sample is not None and sample.running > 0 and sample.generation_tokens_total > 0:
                break
            await asyncio.sleep(0.2)
        else:
            t.wrong_final.append("no answer was decoding before the hang (nothing measured)")
            return
        m = sampler.mark()
        set_fault(sim.host_root(root, 0), "hang", True)
        final = await wait_for(watcher, {"hung"}, cfg.engine.hang_after_s + 20)
        r = cli(toml, "status", "--json")
        v = json.loads(r.stdout)["verdict"] if r.stdout.startswith("{") else {"state": "?"}
        if final != "hung" or v["state"] != "hung":
            t.wrong_final.append(f"hang: watcher {final}, status {v['state']} (exit {r.returncode})")
        t.transient += bad_states(sampler.since(m), {"down", "incomplete", "stopped"}, {"failed", "followed"})
    finally:
        chat.kill()
        chat.wait(timeout=30)
        set_fault(sim.host_root(root, 0), "hang", False)
    if await wait_for(watcher, {"ready"}, 90) != "ready":
        t.wrong_final.append(f"after the hang ended: {watcher.timeline.verdict.summary}")


async def cycle(toml: Path, root: Path, n: int, tallies: dict[str, Tally]) -> None:
    cfg = load_config(toml)
    async with Fleet(cfg) as fleet:
        await fleet.wait_connected(30)
        watcher = ClusterWatcher(fleet, cfg)
        async with watcher:
            await watcher.first_look(30)
            sampler = Sampler(watcher)
            crash_rank = 3 - n % 4

            t = tallies["launch"]
            t.runs += 1
            m = sampler.mark()
            watcher.limits = phase_limits(BOOT_LIMIT_S)
            res = cli(toml, "launch", "--yes", "--json", "--phase-limit", "300")
            final = await wait_for(watcher, {"ready"}, 60)
            watcher.limits = phase_limits(LIMIT_S)
            if res.returncode != 0 or final != "ready":
                t.wrong_final.append(f"launch exit {res.returncode}, watcher {final}")
            t.transient += bad_states(
                sampler.since(m), {"down", "incomplete", "hung", "stopped"}, {"failed", "followed"}
            )

            t = tallies["long-lived"]
            t.runs += 1
            await asyncio.sleep(LIMIT_S + 1)
            m = sampler.mark()
            for _ in range(3):
                r = cli(toml, "status", "--json")
                v = json.loads(r.stdout)["verdict"] if r.stdout.startswith("{") else {"state": "?"}
                if r.returncode != 0 or v["state"] != "ready":
                    t.wrong_final.append(f"status exit {r.returncode}: {v.get('summary', v['state'])}")
            t.transient += bad_states(
                sampler.since(m), {"down", "incomplete", "hung", "unknown"}, {"failed", "followed", "unknown"}
            )

            t = tallies["docker blip"]
            t.runs += 1
            blip = 1 + n % 3
            m = sampler.mark()
            set_fault(sim.host_root(root, blip), "docker-down", True)
            seen_unknown = await wait_for(watcher, {"unknown"}, 15) == "unknown"
            await asyncio.sleep(LIMIT_S + 1)
            set_fault(sim.host_root(root, blip), "docker-down", False)
            final = await wait_for(watcher, {"ready"}, 30)
            await asyncio.sleep(LIMIT_S + 1)
            final = watcher.timeline.verdict.state
            if not seen_unknown or final != "ready":
                t.wrong_final.append(f"blip on rank {blip}: unknown seen {seen_unknown}, after {final}")
            t.transient += bad_states(
                sampler.since(m), {"down", "incomplete", "hung"}, {"failed", "followed", "none"}
            )

            t = tallies["stop"]
            t.runs += 1
            m = sampler.mark()
            res = cli(toml, "stop", "--yes", "--json")
            final = await wait_for(watcher, {"stopped"}, 30)
            if res.returncode != 0 or final != "stopped":
                t.wrong_final.append(f"stop exit {res.returncode}, watcher {final}")
            samples = sampler.since(m)
            t.transient += bad_states(samples, {"down", "incomplete", "hung"}, {"failed", "followed"})
            all_stopped = next((i for i, s in enumerate(samples) if set(s[3]) == {"stopped"}), None)
            if all_stopped is not None:
                t.transient += [
                    f"{s[0]} after every rank stopped" for s in samples[all_stopped:] if s[0] != "stopped"
                ]

            t = tallies["relaunch"]
            t.runs += 1
            m = sampler.mark()
            watcher.limits = phase_limits(BOOT_LIMIT_S)
            res = cli(toml, *RELAUNCH)
            final = await wait_for(watcher, {"ready"}, 60)
            watcher.limits = phase_limits(LIMIT_S)
            if res.returncode != 0 or final != "ready":
                t.wrong_final.append(f"relaunch exit {res.returncode}, watcher {final}")
            t.transient += bad_states(
                sampler.since(m), {"down", "incomplete", "hung"}, {"failed", "followed"}
            )

            t = tallies["hang"]
            t.runs += 1
            await hang(toml, root, cfg, watcher, sampler, t)

            t = tallies["crash after ready"]
            t.runs += 1
            cli(toml, "stop", "--yes", "--json")
            await wait_for(watcher, {"stopped"}, 30)
            set_fault(sim.host_root(root, crash_rank), "crash-after-ready", True)
            m = sampler.mark()
            watcher.limits = phase_limits(BOOT_LIMIT_S)
            res = cli(toml, *RELAUNCH)
            t0 = time.monotonic()
            while watcher.timeline.verdict.first_failed is None and time.monotonic() - t0 < 90:
                await asyncio.sleep(0.2)
            named = {s[1] for s in sampler.since(m) if s[0] == "down" and s[1] is not None}
            named |= {
                e.get("first_failed")
                for e in map(json.loads, filter(None, res.stdout.splitlines()))
                if e.get("event") == "VerdictChanged" and e.get("state") == "down"
            } - {None}
            r = cli(toml, "status", "--json")
            v = json.loads(r.stdout)["verdict"] if r.stdout.startswith("{") else {"first_failed": None}
            if v["first_failed"] != crash_rank:
                t.wrong_final.append(f"crash on rank {crash_rank}: status names {v['first_failed']}")
            if named - {crash_rank}:
                t.wrong_rank.append(f"crash on rank {crash_rank}: named {sorted(named)}")
            set_fault(sim.host_root(root, crash_rank), "crash-after-ready", False)
            cli(toml, "stop", "--yes", "--json")
            watcher.limits = phase_limits(LIMIT_S)
            await sampler.close()


async def run(cycles: int, hogs: int) -> dict[str, Any]:
    tallies = {
        k: Tally()
        for k in ("launch", "long-lived", "docker blip", "stop", "relaunch", "hang", "crash after ready")
    }
    work = Path(tempfile.mkdtemp(prefix="r37-truth-"))
    procs = [
        multiprocessing.Process(target=_spin, args=(time.time() + 24 * 3600,), daemon=True)
        for _ in range(hogs)
    ]
    for p in procs:
        p.start()
    loads: list[float] = []
    t0 = time.monotonic()
    try:
        for n in range(cycles):
            root = work / f"c{n}"
            toml = sim.demo_up(root, speed=SPEED)
            text = toml.read_text()
            toml.write_text(
                text.replace("hang_after_s = 15\n", f"hang_after_s = 15\nphase_limit_s = {LIMIT_S}\n")
            )
            try:
                setup = cli(toml, "setup", "all", "--yes", "--json")
                if setup.returncode != 0:
                    raise SystemExit(f"setup failed: {setup.stdout[-500:]}{setup.stderr[-500:]}")
                await cycle(toml, root, n, tallies)
                loads.append(os.getloadavg()[0])
            finally:
                sim.down(root)
            so_far = sum(len(t.wrong_final) + len(t.wrong_rank) + len(t.transient) for t in tallies.values())
            print(
                f"  cycle {n + 1}/{cycles} done, load {os.getloadavg()[0]:.1f}; wrong so far {so_far} in "
                f"{sum(t.runs for t in tallies.values())} runs", file=sys.stderr, flush=True
            )
            for t in tallies.values():
                for what in (*t.wrong_final, *t.wrong_rank, *t.transient):
                    print(f"    wrong: {what}", file=sys.stderr, flush=True)
    finally:
        for p in procs:
            p.terminate()
    wrong = sum(len(t.wrong_final) + len(t.wrong_rank) + len(t.transient) for t in tallies.values())
    return {
        "cycles": cycles,
        "hogs": hogs,
        "cores": os.cpu_count(),
        "minutes": round((time.monotonic() - t0) / 60, 1),
        "load_avg_1m": round(sum(loads) / len(loads), 1) if loads else None,
        "scenarios": {k: t.to_dict() for k, t in tallies.items()},
        "wrong": wrong,
        "passed": wrong == 0,
    }


async def soak(minutes: float, hogs: int) -> dict[str, Any]:
    """Long life: a launched demo cluster left serving for `minutes` (past every stuck limit many times
    over), the TUI open on it (headless, its watcher sampled every 100 ms) and `status --json` every 30 s:
    every verdict counted, the TUI process's CPU and RSS every minute."""
    from cockpit.tui.app import CockpitApp

    work = Path(tempfile.mkdtemp(prefix="r37-truth-soak-"))
    procs = [
        multiprocessing.Process(target=_spin, args=(time.time() + 24 * 3600,), daemon=True)
        for _ in range(hogs)
    ]
    for p in procs:
        p.start()
    toml = sim.demo_up(work, speed=SPEED)
    toml.write_text(
        toml.read_text().replace("hang_after_s = 15\n", f"hang_after_s = 15\nphase_limit_s = {LIMIT_S}\n")
    )
    statuses: list[str] = []
    wrong: list[str] = []
    points: list[dict[str, float]] = []
    try:
        for args in (
            ("setup", "all", "--yes", "--json"),
            ("launch", "--yes", "--json", "--phase-limit", "300"),
        ):
            res = cli(toml, *args)
            if res.returncode != 0:
                raise SystemExit(f"{args[0]} failed: {res.stdout[-500:]}{res.stderr[-500:]}")
        app = CockpitApp(load_config(toml), toml)
        async with app.run_test(size=(160, 48)) as pilot:
            app.action_show_pane("launch")
            t0 = time.monotonic()
            cpu0, next_status, next_point, seen_ready = time.process_time(), 0.0, 0.0, False
            while (elapsed := time.monotonic() - t0) < minutes * 60:
                v = app.ctx.watcher.timeline.verdict
                seen_ready = seen_ready or v.state == "ready"
                if v.state != "ready" and (seen_ready or elapsed > 60):
                    wrong.append(f"{elapsed:.0f} s: TUI {v.state}: {v.summary}")
                if elapsed >= next_status:
                    next_status += 30
                    proc = await asyncio.create_subprocess_exec(
                        sys.executable,
                        "-m",
                        "cockpit",
                        "--config",
                        str(toml),
                        "status",
                        "--json",
                        stdout=asyncio.subprocess.PIPE,
                        stderr=asyncio.subprocess.DEVNULL,
                    )
                    out, _ = await proc.communicate()
                    try:
                        state = json.loads(out)["verdict"]["state"]
                    except (ValueError, KeyError):
                        state = "unreadable"
                    statuses.append(state)
                    if proc.returncode != 0 or state != "ready":
                        wrong.append(f"{elapsed:.0f} s: status exit {proc.returncode}: {state}")
                if elapsed >= next_point:
                    next_point += 60
                    points.append(
                        {
                            "t_min": round(elapsed / 60, 1),
                            "rss_mb": round(_rss_mb(), 1),
                            "cpu_s": round(time.process_time() - cpu0, 1),
                        }
                    )
                await pilot.pause(0.1)
    finally:
        for p in procs:
            p.terminate()
        cli(toml, "stop", "--yes", "--json")
        sim.down(work)
    cpu_rate = [
        (b["cpu_s"] - a["cpu_s"]) / max(1e-9, (b["t_min"] - a["t_min"]) * 60)
        for a, b in itertools.pairwise(points)
    ]
    return {
        "minutes": minutes,
        "hogs": hogs,
        "status_runs": len(statuses),
        "status_ready": statuses.count("ready"),
        "wrong": len(wrong),
        "examples": wrong[:5],
        "rss_mb": [p["rss_mb"] for p in points],
        "cpu_share_per_minute": [round(c, 3) for c in cpu_rate],
        "passed": not wrong,
    }


def _rss_mb() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--cycles", type=int, default=3)
    p.add_argument("--hogs", type=int, default=4 * (os.cpu_count() or 1), help="CPU-spinning processes")
    p.add_argument(
        "--soak",
        type=float,
        default=0.0,
        metavar="MINUTES",
        help="instead: a launched cluster left serving this long, the TUI open, status every 30 s",
    )
    p.add_argument("--json", action="store_true")
    a = p.parse_args()
    if a.soak:
        r = asyncio.run(soak(a.soak, a.hogs))
        print(
            json.dumps(r, indent=2)
            if a.json
            else f"soak {r['minutes']:g} min, {r['hogs']} hogs: "
            f"status READY {r['status_ready']}/{r['status_runs']}, "
            f"false verdicts {r['wrong']} {r['examples']}\nRSS MB per minute {r['rss_mb']}\n"
            f"CPU share per minute {r['cpu_share_per_minute']}\n" + ("PASS" if r["passed"] else "FAIL")
        )
        return 0 if r["passed"] else 1
    r = asyncio.run(run(a.cycles, a.hogs))
    if a.json:
        print(json.dumps(r, indent=2))
        return 0 if r["passed"] else 1
    print(
        f"truth under load: {r['cycles']} cycles, {r['hogs']} CPU hogs on {r['cores']} cores "
        f"(load avg {r['load_avg_1m']}), {r['minutes']} min"
    )
    print(f"{'scenario':<20}{'runs':>5}{'wrong final':>13}{'wrong rank':>12}{'transient':>11}")
    for name, t in r["scenarios"].items():
        print(f"{name:<20}{t['runs']:>5}{t['wrong_final']:>13}{t['wrong_rank']:>12}{t['transient']:>11}")
        for ex in t["examples"]:
            print(f"    e.g. {ex}")
    print(f"wrong in all: {r['wrong']}")
    print("PASS" if r["passed"] else "FAIL")
    return 0 if r["passed"] else 1


if __name__ == "__main__":
    sys.exit(main())
