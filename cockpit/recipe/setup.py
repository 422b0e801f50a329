"""Setup jobs (recipe steps 2-5): plan from what the hosts hold, show the exact commands, then run them on
every host in parallel with per-host progress, a job log, cancel and resume.

    plan = await plan_setup(fleet, cfg, ["runtime"], ranks=[1, 2])   # reads only
    plan.commands()                                                    # what the operator confirms
    async for event in SetupRun(fleet, plan).events(): ...             # SetupStarted … SetupFinished

A job that fails on one host leaves the others running; with several jobs (`all`), a rank whose job failed
skips its later jobs. Re-running plans again from the hosts' state, so completed work is skipped.
"""

from __future__ import annotations

import asyncio
import re
import secrets
import time
from collections.abc import AsyncIterator, Iterable, Sequence
from typing import Any

from cockpit.config import ClusterConfig
from cockpit.hosts import CommandTimeout, Fleet, Host, HostUnavailable
from cockpit.hosts.shell import Cmd, sections, streamed
from cockpit.recipe.checks import Probe
from cockpit.recipe.parsers import split_sections
from cockpit.recipe.progress import ProgressTracker
from cockpit.recipe.setup_jobs import SPECS, PlanContext, exit_check
from cockpit.recipe.setup_model import (
    JOBS,
    JobLog,
    JobPlan,
    RankDone,
    RankPlan,
    RankState,
    SetupError,
    SetupEvent,
    SetupFinished,
    SetupPlan,
    SetupStarted,
    Step,
    StepOutput,
    StepProgress,
    StepStarted,
)

INSPECT_TIMEOUT = 60.0
INPUT_TIMEOUT = 60.0
KEEP_LINES = 400
_HEX40 = re.compile(r"[0-9a-f]{40}")

__all__ = ["JOBS", "SetupError", "SetupRun", "expand_jobs", "plan_setup", "resolve_revision"]


def expand_jobs(name: str) -> list[str]:
    """`all` is every job in recipe order; otherwise the one named job."""
    if name == "all":
        return list(JOBS)
    if name not in JOBS:
        raise SetupError(f"unknown setup job {name!r} (jobs: {', '.join(JOBS)}, all)", config_error=True)
    return [name]


# ---- revision ----------------------------------------------------------------------------------------


def resolve_revision(cfg: ClusterConfig, *, online: bool = True, timeout: float = 15.0) -> str:
    """The 40-hex commit every host downloads. A configured commit is used as is (no network); a branch or
    tag (or none: `main`) is resolved with huggingface_hub on this machine when it is online."""
    rev = cfg.model.revision
    if rev and _HEX40.fullmatch(rev.lower()):
        return rev.lower()
    wanted = rev or "main"
    pin = (f'pin the commit in cluster.toml: [model] revision = "<40-hex commit of {cfg.model.repo}>" '
           "(every host must download the same one)")
    if not online:
        raise SetupError(f"offline: cannot resolve revision {wanted!r} of {cfg.model.repo} to a commit; "
                         f"{pin}", config_error=True)
    try:
        from huggingface_hub import HfApi
    except ImportError:
        raise SetupError(f"huggingface_hub is not installed here, so revision {wanted!r} cannot be resolved; "
                         f"{pin}") from None
    try:
        sha = HfApi().model_info(cfg.model.repo, revision=wanted, timeout=timeout).sha
    except Exception as exc:  # network down, repo gated, revision unknown: all end the same way
        raise SetupError(f"cannot resolve revision {wanted!r} of {cfg.model.repo} to a commit "
                         f"({type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else 'no detail'}); "
                         f"{pin}") from None
    if not sha or not _HEX40.fullmatch(sha):
        raise SetupError(f"the hub returned no commit for {cfg.model.repo}@{wanted}; {pin}")
    return sha


# ---- planning ----------------------------------------------------------------------------------------


async def _inspect(host: Host, cmds: dict[str, Cmd], marker: str, wait: float) -> dict[str, Any] | str:
    """Sections of the inspection commands on one host, or why the host could not be read."""
    if not await host.wait_connected(wait):
        st = host.status
        return f"host not reachable over SSH ({st.error or st.state.value})"
    if not cmds:
        return {}
    try:
        res = await host.run(sections(list(cmds.items()), marker), timeout=INSPECT_TIMEOUT)
    except (HostUnavailable, CommandTimeout) as exc:
        return f"no answer: {exc}"
    return split_sections(res.stdout + res.stderr, marker)


async def plan_setup(fleet: Fleet, cfg: ClusterConfig, jobs: Sequence[str], *,
                     ranks: Iterable[int] | None = None, overwrite_env: bool = False,
                     revision: str | None = None, online: bool = True) -> SetupPlan:
    """Read what each host holds (never changes anything) and plan every job on every chosen rank.

    `revision` is the checkpoint commit if the caller resolved it already; otherwise it is resolved here
    when a checkpoint download is planned (SetupError if that is impossible).
    """
    chosen = sorted(set(ranks) if ranks is not None else set(cfg.ranks))
    unknown = sorted(set(chosen) - set(cfg.ranks))
    if unknown:
        raise SetupError(f"no host has rank {', '.join(map(str, unknown))}", config_error=True)
    if "checkpoint" in jobs and revision is None:
        pinned = cfg.model.revision
        if not cfg.model.shared_readonly:
            revision = await asyncio.to_thread(resolve_revision, cfg, online=online)
        elif pinned and _HEX40.fullmatch(pinned):
            revision = pinned
    marker = f"@@r37-setup-inspect-{secrets.token_hex(4)}"
    wait = cfg.ssh.connect_timeout + 2

    async def one(rank: int) -> dict[str, Any] | str:
        cmds: dict[str, Cmd] = {}
        for job in jobs:
            cmds.update(SPECS[job].inspect(cfg, rank))
        return await _inspect(fleet[rank], cmds, marker, wait)

    seen = dict(zip(chosen, await asyncio.gather(*(one(r) for r in chosen)), strict=True))
    plans = []
    for job in jobs:
        spec = SPECS[job]
        per: dict[int, RankPlan] = {}
        for rank in chosen:
            got = seen[rank]
            if isinstance(got, str):
                per[rank] = RankPlan(job, rank, refused=got, unreachable=True)
                continue
            ctx = PlanContext(cfg, rank, revision, overwrite_env)
            per[rank] = spec.plan(ctx, Probe(cfg, rank, got))
        plans.append(JobPlan(job, per, spec.finalize))
    return SetupPlan(tuple(plans), {r: fleet[r].target for r in chosen})


# ---- running -----------------------------------------------------------------------------------------


class _StepFailed(Exception):
    pass


class SetupRun:
    """One run of a confirmed plan. `events()` yields everything as it happens; `cancel()` stops one rank
    or all of them (closing a stream stops the remote process)."""

    def __init__(self, fleet: Fleet, plan: SetupPlan):
        self.fleet = fleet
        self.plan = plan
        self.queue: asyncio.Queue[SetupEvent | None] = asyncio.Queue()
        self.tasks: dict[int, asyncio.Task[RankDone]] = {}
        self.cancelled: set[int] = set()
        self.all_cancelled = False
        self.marker = f"@@r37-setup-{secrets.token_hex(4)}"

    def cancel(self, rank: int | None = None) -> None:
        """Cancel one rank's running job (and its later jobs), or everything when rank is None."""
        if rank is None:
            self.all_cancelled = True
            self.cancelled.update(self.plan.targets)
        else:
            self.cancelled.add(rank)
        for r, task in self.tasks.items():
            if rank is None or r == rank:
                task.cancel()

    def _emit(self, event: SetupEvent) -> None:
        self.queue.put_nowait(event)

    async def events(self) -> AsyncIterator[SetupEvent]:
        started = time.monotonic()
        ranks = tuple(sorted(self.plan.targets))
        yield SetupStarted(tuple(jp.job for jp in self.plan.jobs), ranks)
        driver = asyncio.create_task(self._drive())
        driver.add_done_callback(lambda _t: self.queue.put_nowait(None))
        latest: dict[tuple[str, int], RankDone] = {}
        try:
            while True:
                item = await self.queue.get()
                if item is None:
                    break
                if isinstance(item, RankDone):
                    latest[(item.job, item.rank)] = item
                yield item
            driver.result()
        finally:
            if not driver.done():
                self.cancel()
                driver.cancel()
        order = {j: i for i, j in enumerate(JOBS)}
        outcomes = tuple(sorted(latest.values(), key=lambda o: (order.get(o.job, 99), o.rank)))
        yield SetupFinished(outcomes, time.monotonic() - started)

    async def _drive(self) -> None:
        failed: dict[int, str] = {}
        for jp in self.plan.jobs:
            facts: dict[int, dict[str, Any]] = {}
            self.tasks = {}
            for rank in sorted(jp.ranks):
                rp = jp.ranks[rank]
                if rank in self.cancelled:
                    self._emit(RankDone(jp.job, rank, RankState.CANCELLED, "cancelled before it started"))
                elif rank in failed:
                    why = f"skipped: {failed[rank]} on this rank"
                    self._emit(RankDone(jp.job, rank, RankState.SKIPPED, why))
                else:
                    self.tasks[rank] = asyncio.create_task(self._rank(jp.job, rp, facts.setdefault(rank, {})))
            if self.tasks:
                await asyncio.wait(self.tasks.values())
            done: dict[int, RankDone] = {}
            for rank, task in self.tasks.items():
                out = (RankDone(jp.job, rank, RankState.CANCELLED, "cancelled by the operator")
                       if task.cancelled() else task.result())
                if task.cancelled():
                    self._emit(out)
                done[rank] = out
            if jp.finalize is not None:
                good = {r: f for r, f in facts.items() if r in done and done[r].state is RankState.DONE and f}
                for rank, why in jp.finalize(good).items():
                    done[rank] = RankDone(jp.job, rank, RankState.FAILED, why)
                    self._emit(done[rank])
            for rank, out in done.items():
                if not out.ok:
                    failed.setdefault(rank, f"{jp.job} {out.state.value}")
            self.tasks = {}

    async def _rank(self, job: str, rp: RankPlan, facts: dict[str, Any]) -> RankDone:
        out = await self._rank_steps(job, rp, facts)
        self._emit(out)
        return out

    async def _rank_steps(self, job: str, rp: RankPlan, facts: dict[str, Any]) -> RankDone:
        rank = rp.rank
        if rp.refused:
            return RankDone(job, rank, RankState.FAILED if rp.unreachable else RankState.REFUSED, rp.refused)
        if not rp.steps:
            return RankDone(job, rank, RankState.SKIPPED, rp.done)
        host = self.fleet[rank]
        for i, step in enumerate(rp.steps):
            self._emit(StepStarted(job, rank, i, len(rp.steps), step.label, step.lines))
            for line in step.lines:
                self._emit(JobLog(job, rank, f"$ {line}"))
            try:
                out = await self._step(host, job, step)
            except HostUnavailable as exc:
                return RankDone(job, rank, RankState.FAILED, f"{step.label}: host lost ({exc})")
            except CommandTimeout as exc:
                return RankDone(job, rank, RankState.FAILED, f"{step.label}: {exc}")
            checked = (step.check or exit_check)(out)
            if checked.reason:
                self._emit(JobLog(job, rank, f"FAILED {step.label}: {checked.reason}"))
                return RankDone(job, rank, RankState.FAILED, f"{step.label}: {checked.reason}")
            facts.update(checked.facts)
        last = rp.steps[-1].label
        n = len(rp.steps)
        return RankDone(job, rank, RankState.DONE, f"{n} step{'' if n == 1 else 's'}, last: {last}")

    async def _step(self, host: Host, job: str, step: Step) -> StepOutput:
        if step.input is not None:
            res = await host.run(step.cmd, timeout=INPUT_TIMEOUT, input=step.input)
            text = res.stdout + res.stderr
            if step.log:
                for line in text.splitlines():
                    if line.strip():
                        self._emit(JobLog(job, host.rank, line))
            return StepOutput(res.exit_status, text)
        tracker = ProgressTracker()
        kept: list[str] = []
        status: int | None = None
        end = f"{self.marker} exit "
        if not await host.wait_connected(self.fleet.config.ssh.connect_timeout + 2):
            raise HostUnavailable(host.rank, host.status.state, host.status.error or "not connected")
        async for line in host.stream(streamed(step.cmd, self.marker)):
            if line.startswith(end):
                tail = line[len(end):].strip()
                status = int(tail) if tail.lstrip("-").isdigit() else None
                continue
            progress = tracker.feed(line)
            if progress is not None:
                self._emit(StepProgress(job, host.rank, step.label, progress))
                continue
            kept.append(line)
            if step.log and len(kept) > KEEP_LINES * 2:   # judged by exit status: the tail is enough
                del kept[:-KEEP_LINES]
            if step.log and line.strip():
                self._emit(JobLog(job, host.rank, line))
        if kept and kept[-1] == "":   # the newline the framing prints before its exit line
            kept.pop()
        return StepOutput(status, "".join(f"{line}\n" for line in kept))
