"""Staged launch (recipe steps 6–7): dry run per rank, the launch gate, launch N-1 … 1 then 0.

`dry_run` and `launch_blockers` read the hosts; `Launcher` runs `launch/node.sh` in order and follows
the boot through a `ClusterWatcher` (`watch.py`); `status.py`'s `cluster_status` is a one-off look of
the same watcher (read-only, also for a cluster launched by hand). The model they fill is
`timeline.py`'s.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from cockpit.config import ClusterConfig
from cockpit.hosts import CommandTimeout, Fleet, HostUnavailable, Result, ShellCommand, command
from cockpit.recipe import containers as dk
from cockpit.recipe.checks import CheckResult, Verdict
from cockpit.recipe.containers import ContainerState
from cockpit.recipe.ledger import Ledger
from cockpit.recipe.phases import Phase
from cockpit.recipe.recording import note_action
from cockpit.recipe.replace import ReplaceItem, plan_replace, refused
from cockpit.recipe.timeline import (
    ClusterTimeline,
    LaunchEvent,
    RankLaunched,
    RankTimeline,
)
from cockpit.recipe.watch import ClusterWatcher
from cockpit.safetext import neutralise, safe

LAUNCH_TIMEOUT = 180.0       # seconds for launch/node.sh to return (docker run -d)


_START_HINTS = (
    ("[[gpu]]", "the host has no NVIDIA container runtime for --gpus: `sudo nvidia-ctk runtime configure "
                "--runtime=docker && sudo systemctl restart docker`"),
    ("unknown runtime", "the runtime the launcher names is not registered with Docker (`docker info`)"),
    ("custom device", "a --device the launcher passes is missing on the host (/dev/infiniband: the RDMA "
                      "drivers are not loaded)"),
    ("exec:", "the container's command cannot be run in the image (is it the verified image?)"),
)


def start_failure_hint(message: str) -> str:
    """What a failed container start usually means, from docker's message (real daemon wording)."""
    low = message.lower()
    return next((hint for key, hint in _START_HINTS if key in low), "read the message")


def launch_order(ranks: Iterable[int]) -> list[int]:
    """The recipe's order: highest rank first, rank 0 (the head) last."""
    return sorted(ranks, reverse=True)


def launcher_argv(rank: int) -> list[str]:
    return ["bash", "launch/node.sh", str(rank), "cluster.env"]


def launch_command(cfg: ClusterConfig, rank: int) -> ShellCommand:
    """The exact line run on rank's host to launch it (in the rank's recipe directory)."""
    return command(launcher_argv(rank), cwd=cfg.recipe_dir(rank))


def dry_run_command(cfg: ClusterConfig, rank: int) -> ShellCommand:
    return command(launcher_argv(rank), cwd=cfg.recipe_dir(rank), env={"DRY_RUN": "1"})


# ---- I/O: dry run, gate, launch, follow -------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class DryRun:
    """What `DRY_RUN=1 bash launch/node.sh RANK cluster.env` printed on one host."""

    rank: int
    dry_command: str
    launch_command: str
    ok: bool
    output: str
    error: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {"rank": self.rank, "dry_command": self.dry_command, "launch_command": self.launch_command,
                "ok": self.ok, "output": self.output, "error": self.error}


async def dry_run(fleet: Fleet, cfg: ClusterConfig) -> dict[int, DryRun]:
    """Dry-run every rank in parallel; a host that is down gives a failed DryRun, not a delay."""
    results = await fleet.run_all(lambda h: dry_run_command(cfg, h.rank), timeout=30)
    out = {}
    for rank in launch_order(results):
        res = results[rank]
        dry, real = dry_run_command(cfg, rank).line, launch_command(cfg, rank).line
        if isinstance(res, Result):
            err = "" if res.ok else (neutralise(res.stderr.strip()) or f"exit status {res.exit_status}")
            out[rank] = DryRun(rank, dry, real, res.ok, neutralise(res.stdout.strip()), err)
        else:
            out[rank] = DryRun(rank, dry, real, False, "", str(res))
    return out


@dataclass(frozen=True, slots=True)
class Blocker:
    """A reason the launch must not start, with what to do."""

    rank: int | None
    reason: str
    remedy: str
    overridable: bool = False
    """The preflight blocker: the operator's override skips it, and nothing else."""

    def to_dict(self) -> dict[str, Any]:
        return {"rank": self.rank, "reason": self.reason, "remedy": self.remedy}


def existing_container_blocker(rank: int, name: str, entry: dk.PsEntry) -> Blocker:
    if entry.state in ("running", "restarting", "paused"):
        remedy = (f"stop it first (`r37-cockpit stop`, or `docker stop {name}` on that host if it was "
                  "launched by hand); then relaunch with `r37-cockpit launch --replace-stopped`")
    else:
        remedy = ("relaunch with `r37-cockpit launch --replace-stopped`: it archives the log of each stopped "
                  "container this cockpit started, removes it (docker rm of that ID only) and launches; "
                  "a container started by hand is never removed: inspect it (`docker logs --tail 100 "
                  f"{name}`) and remove it yourself on that host")
    return Blocker(rank, f"rank {rank} still has a container named {name} ({entry.status or entry.state})",
                   remedy)


async def launch_blockers(fleet: Fleet, cfg: ClusterConfig, *, replace_stopped: bool = False,
                          ledger: Ledger | None = None) -> tuple[list[Blocker], list[ReplaceItem]]:
    """Hosts not connected, and any rank that still has a container of the launch's name — except, with
    `replace_stopped`, the stopped ones this cockpit started: those come back as the replace plan."""
    name = cfg.cluster.container_name
    results = await fleet.run_all(dk.ps_argv(name), timeout=20)
    out = []
    have = []
    for rank, res in sorted(results.items()):
        if not isinstance(res, Result):
            out.append(Blocker(rank, f"rank {rank}: {res}", "every host must be connected to launch"))
        elif not res.ok:
            out.append(Blocker(rank, f"rank {rank}: docker ps failed: {neutralise(res.stderr.strip())}",
                               "check that docker runs on that host (`docker info`)"))
        else:
            entry = dk.ps_named(res.stdout, name)
            if entry is not None:
                have.append((rank, entry))
    if not have:
        return out, []
    if not replace_stopped:
        return out + [existing_container_blocker(rank, name, e) for rank, e in have], []
    plan = [i for i in await plan_replace(fleet, cfg, ledger or Ledger(cfg)) if i.action != "none"]
    out += [Blocker(i.rank, f"rank {i.rank}: {i.reason}", "--replace-stopped removes only stopped containers "
                                                          "this cockpit started") for i in refused(plan)]
    return out, [i for i in plan if i.action == "replace"]


GATE_OWN_CHECKS = frozenset({"container"})  # leftover containers: the gate judges them (--replace-stopped)
UNKNOWN_MARK = "UNKNOWN (not a pass)"


def preflight_failures(results: Iterable[CheckResult]) -> list[str]:
    """The preflight results that block a launch, one line each (the CLI and the TUI alike): every failed
    check and every unknown one (a check that could not be decided is never a pass)."""
    out = []
    for r in results:
        if r.verdict not in (Verdict.FAIL, Verdict.UNKNOWN) or r.check in GATE_OWN_CHECKS:
            continue
        what = f"{UNKNOWN_MARK}: " if r.verdict is Verdict.UNKNOWN else ""
        out.append(f"rank {r.rank}: {r.title}: {what}{safe(r.value, 300)}"
                   + (f" ({r.remedy})" if r.remedy else ""))
    return out


def _problems(lines: list[str]) -> str:
    unknown = sum(1 for line in lines if UNKNOWN_MARK in line)
    failed = len(lines) - unknown
    parts = [f"{failed} failed"] * bool(failed) + [f"{unknown} unknown"] * bool(unknown)
    return f"{len(lines)} preflight problem(s) ({', '.join(parts)})"


async def launch_gate(fleet: Fleet, cfg: ClusterConfig, *, preflight_failures: list[str],
                      override_preflight: bool = False, replace_stopped: bool = False,
                      ledger: Ledger | None = None) -> Gate:
    """What must hold before a launch, for the CLI and the TUI alike: every host connected, no container
    of the launch's name in the way (or only replaceable ones, with `replace_stopped`), and preflight
    clean — no failed and no unknown check — or overridden by the operator (one override for both)."""
    blockers, replace = await launch_blockers(fleet, cfg, replace_stopped=replace_stopped, ledger=ledger)
    if preflight_failures and not override_preflight:
        blockers.append(Blocker(None, f"{_problems(preflight_failures)}: "
                                      + "; ".join(preflight_failures[:3])
                                      + (" …" if len(preflight_failures) > 3 else ""),
                                "fix them (pane 2 / `r37-cockpit preflight`; an unknown check needs its "
                                "host to answer), or override preflight to launch anyway "
                                "(`--override-preflight`)", overridable=True))
    return Gate(blockers, replace, list(preflight_failures))


@dataclass(frozen=True, slots=True)
class Gate:
    """The launch gate's answer: `blockers` empty means go; `replace` is what must be cleared first."""

    blockers: list[Blocker]
    replace: list[ReplaceItem]
    preflight_failures: list[str]

    @property
    def open(self) -> bool:
        return not self.blockers

    @property
    def hard(self) -> list[Blocker]:
        """The blockers no override skips (everything but preflight's)."""
        return [b for b in self.blockers if not b.overridable]

    def same_replace(self, confirmed: list[ReplaceItem]) -> bool:
        """Whether this gate would clear exactly the containers the operator confirmed."""
        def ids(items: list[ReplaceItem]) -> list[tuple[int, str]]:
            return [(i.rank, i.container_id) for i in items]
        return ids(self.replace) == ids(confirmed)


async def inspect_container(fleet: Fleet, rank: int, ref: str) -> ContainerState | None:
    """`docker inspect REF` on one host; None when there is no such container."""
    res = await fleet[rank].run(dk.inspect_argv(ref), timeout=20)
    states = dk.parse_inspect(res.stdout) if res.ok else []
    return states[0] if states else None


Emit = Callable[[LaunchEvent], None]


class Launcher:
    """Launch a cluster in the recipe's order and follow every rank until ready, failed or stopped.

    The following is a `ClusterWatcher`'s: the one given (the TUI's, which keeps watching after the
    launch), or one of its own."""

    def __init__(self, fleet: Fleet, cfg: ClusterConfig, *, emit: Emit | None = None,
                 ledger: Ledger | None = None, stuck_limits: dict[Phase, float] | None = None,
                 poll_interval: float = 1.0, api_url: str | None = None,
                 watcher: ClusterWatcher | None = None):
        self.fleet = fleet
        self.cfg = cfg
        self.ledger = ledger or Ledger(cfg)
        self._own_watcher = watcher is None
        self.watcher = watcher or ClusterWatcher(fleet, cfg, ledger=self.ledger, interval=poll_interval,
                                                 api_url=api_url, stuck_limits=stuck_limits)
        if stuck_limits is not None:
            self.watcher.limits = stuck_limits
        if emit is not None:
            self.watcher.subscribe(emit)
        self.booting: dict[int, str] = {}      # rank -> container ID launched by this launcher
        self.in_flight: set[int] = set()       # ranks whose `docker run` has begun and not answered yet

    @property
    def timeline(self) -> ClusterTimeline:
        return self.watcher.timeline

    def _apply(self, events: list[LaunchEvent]) -> None:
        self.watcher.apply(events)

    async def launch(self) -> bool:
        """Run launch/node.sh on ranks N-1 … 1, then 0; each is followed from its first log line. False
        when one failed or its host was lost during `docker run` (later ranks are then not launched)."""
        self.watcher.start()
        try:
            return await self._launch_all()
        finally:
            self.watcher.launch_over()

    async def _launch_all(self) -> bool:
        for rank in launch_order(self.cfg.ranks):
            tl = self.watcher.expect_launch(rank)
            cmd = launch_command(self.cfg, rank)
            self._apply(tl.launched(time.time()))
            prior = self.ledger.records().get(rank)
            try:
                self.ledger.begin_launch(rank, self.cfg.cluster.container_name, self.fleet[rank].target)
            except OSError as exc:   # a full disk: a container the ledger does not list, `stop` never stops
                self._apply(tl.launch_failed(
                    f"the launch ledger {self.ledger.path} cannot be written ({exc.strerror or exc}): rank "
                    f"{rank} was not launched (`r37-cockpit stop` stops only containers recorded there)",
                    "free space (or fix the permissions) where the ledger lives, then launch again; stop "
                    "the ranks already started first (head first)", time.time()))
                return False
            self.in_flight.add(rank)   # until it answers: interrupted now, its container may run
            try:
                res = await self.fleet[rank].run(cmd, timeout=LAUNCH_TIMEOUT)
            except (HostUnavailable, CommandTimeout) as exc:
                # whether docker started the container is not known: when the host answers again, the
                # watcher looks it up by name and records it if this launch created it
                self._apply(tl.launch_unknown(f"host lost during docker run: {exc}", time.time()))
                return False
            if not res.ok:
                self.in_flight.discard(rank)
                await self._launch_failed(rank, tl, cmd.line, res, prior.container_id if prior else None)
                return False
            cid = dk.container_id_from_output(res.stdout)
            if cid is None:
                state = await inspect_container(self.fleet, rank, self.cfg.cluster.container_name)
                cid = state.id if state else None
            if cid is None:
                self.in_flight.discard(rank)
                self.ledger.clear_pending(rank)
                self._apply(tl.launch_failed(f"{cmd.line} printed no container ID: "
                                             f"{neutralise(res.stdout.strip()[:300])!r}",
                                             "check docker on that host", time.time()))
                return False
            try:
                self.ledger.record(rank, cid, self.cfg.cluster.container_name, self.fleet[rank].target)
            except OSError as exc:   # its pending record (written above) still lets the watcher adopt it
                self.ledger.write_failed(f"rank {rank}'s container {cid[:12]}", exc)
            note_action(self.cfg, "launch", f"rank {rank}: launched container {cid[:12]}", rank=rank,
                        data={"container_id": cid, "target": self.fleet[rank].target})
            tl.container_id, tl.owner = cid, "cockpit"
            self.booting[rank] = cid
            self.in_flight.discard(rank)
            self._apply([RankLaunched(rank, cmd.line, cid, time.time())])
        return True

    async def _launch_failed(self, rank: int, tl: RankTimeline, line: str, res: Result,
                             prior: str | None) -> None:
        """`docker run` failed. When it printed a container ID, docker created the container before its
        start failed: it is `created`, holds the name, and this cockpit made it — recorded in the ledger, so
        that `launch --replace-stopped` may clear it (never "not started by this cockpit")."""
        name = self.cfg.cluster.container_name
        msg = neutralise(res.stderr.strip() or res.stdout.strip()) or f"exit status {res.exit_status}"
        cid = dk.container_id_from_output(res.stdout)
        state: ContainerState | None = None
        conflict = "is already in use by container" in res.stderr     # docker created nothing then
        if cid is None and "Error response from daemon" in res.stderr and not conflict:
            # the CLI prints the ID from a goroutine: a start that fails at once may exit before it did.
            # A container of the name created during this launch is still this launch's (the ledger's
            # pending launch decides, as for a host lost during docker run, or the watcher already did);
            # an older one — the one the ledger recorded before this launch, or one not ours — is not.
            with contextlib.suppress(HostUnavailable, CommandTimeout):
                state = await inspect_container(self.fleet, rank, name)
            new = state is not None and state.id != prior
            if state is not None and new and self.ledger.claim(rank, state.id, state.created_at):
                cid = state.id
        if cid is None:
            self.ledger.clear_pending(rank)
            self._apply(tl.launch_failed(f"{line}: {msg}",
                                         "read the message; ranks after this one were not launched; "
                                         "stop the ones that were (head first) before relaunching",
                                         time.time()))
            return
        self.ledger.record(rank, cid, name, self.fleet[rank].target)
        tl.container_id, tl.owner = cid, "cockpit"
        with contextlib.suppress(HostUnavailable, CommandTimeout):
            state = await inspect_container(self.fleet, rank, cid)
        status = state.status if state is not None else "created"
        self._apply(tl.launch_failed(
            f"{line}: docker created {name} ({cid[:12]}) but could not start it (exit status "
            f"{res.exit_status}; the container is {neutralise(status)}): {msg}",
            f"fix the cause ({start_failure_hint(msg)}); the {status} container holds the name {name}: "
            "`r37-cockpit launch --replace-stopped` archives its log, removes it (this cockpit created it) "
            "and launches again; ranks after this one were not launched: stop the ones that were (head "
            "first) first",
            time.time()))
        if state is not None:
            self._apply(tl.feed_container(state, time.time()))

    async def run_until(self, done: Callable[[ClusterTimeline], bool], timeout: float | None = None) -> bool:
        """Wait until `done(timeline)` holds; False on timeout."""
        self.watcher.start()
        deadline = None if timeout is None else time.monotonic() + timeout
        while not done(self.timeline):
            if deadline is not None and time.monotonic() > deadline:
                return False
            self.watcher.changed.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.watcher.changed.wait(), self.watcher.interval)
        return True

    async def close(self) -> None:
        if self._own_watcher:
            await self.watcher.close()


# ---- read-only status ---------------------------------------------------------------------------------
