"""Run the preflight: every host in parallel, all of a host's reads framed in one command on its one SSH
connection (probes that may time out on channels of their own), results streamed as they arrive, then the
comparisons across hosts. Observes only: every command here reads. The launch ledger (on this machine)
tells the checks which containers this cockpit started, so its own running engine is not a finding."""

from __future__ import annotations

import asyncio
import secrets
import time
from collections.abc import AsyncIterator, Iterable, Mapping, Sequence

from cockpit.config import ClusterConfig
from cockpit.hosts import CommandTimeout, Fleet, Host, HostUnavailable
from cockpit.hosts.shell import Cmd, as_command, sections
from cockpit.recipe import checks_fabric, checks_host, checks_storage
from cockpit.recipe.checks import (
    Check,
    CheckInfo,
    CheckResult,
    Outcome,
    PreflightEvent,
    PreflightFinished,
    PreflightStarted,
    Probe,
    Verdict,
)
from cockpit.recipe.ledger import Ledger
from cockpit.recipe.parsers import Section, split_sections
from cockpit.safetext import clip

BATCH_TIMEOUT = 90.0
BATCH_CHANNELS = 2       # channels per host for the batched reads (OpenSSH allows 10 sessions)
PROBE_TIMEOUT = 10.0
RAW_SECTION_LIMIT = 8000  # characters of one command's output kept in a result's raw text (headers are long)


def _no_commands(cfg: ClusterConfig, rank: int) -> dict[str, Cmd]:
    return {}


def _ssh_never_evaluated(p: Probe) -> Outcome:  # the runner judges the connection itself
    return Outcome(Verdict.UNKNOWN, "")


SSH = Check("ssh", 1, "host reachable over SSH", _no_commands, _ssh_never_evaluated)

CHECKS: tuple[Check, ...] = (
    SSH, checks_host.ARCH, checks_host.GPU, checks_host.DRIVER, checks_host.CLOCKS, checks_host.MEMORY,
    checks_storage.DISK, checks_host.DOCKER, checks_host.RUNTIME,
    checks_fabric.FABRIC_IP, checks_fabric.RDMA_LINK, checks_fabric.IBV_PORT, checks_fabric.GID,
    checks_fabric.REACH,
    checks_storage.RECIPE, checks_storage.CHECKPOINT, checks_host.IMAGE, checks_storage.ENGRAM,
    checks_host.CONTAINER, checks_host.PORTS,
)
BY_ID = {c.id: c for c in CHECKS}


def select(only: Iterable[str] | None) -> list[Check]:
    """The checks named in `only` (all when None), in table order; unknown ids raise KeyError."""
    if only is None:
        return list(CHECKS)
    wanted = set(only)
    unknown = sorted(wanted - set(BY_ID))
    if unknown:
        raise KeyError(f"unknown check id{'s' if len(unknown) > 1 else ''}: {', '.join(unknown)} "
                       f"(known: {', '.join(BY_ID)})")
    return [c for c in CHECKS if c.id in wanted]


def launched_ids(cfg: ClusterConfig) -> dict[int, str]:
    """Rank -> full ID of the container this cockpit last launched there (the launch ledger)."""
    return {rank: rec.container_id for rank, rec in Ledger(cfg).records().items() if rec.container_id}


def plan(cfg: ClusterConfig, checks: Sequence[Check], ranks: Sequence[int]) -> dict[int, list[Check]]:
    return {r: [c for c in checks if c.applies(cfg, r)] for r in ranks}


def _raw(check: Check, lines: dict[str, str], secs: dict[str, Section]) -> str:
    parts = []
    for label, line in lines.items():
        s = secs.get(label)
        body = clip(s.output, RAW_SECTION_LIMIT) if s else "(no output: not run)"
        status = "" if s is None or s.status is None else f"[exit {s.status}]"
        parts.append(f"$ {line}\n{body.rstrip()}\n{status}".rstrip())
    return "\n\n".join(parts)


def _result(check: Check, rank: int, out: Outcome, lines: dict[str, str], secs: dict[str, Section],
            final: bool) -> CheckResult:
    return CheckResult(check.id, rank, check.step, check.title, out.verdict, out.value,
                       out.remedy if out.verdict is not Verdict.PASS else "", out.detail,
                       tuple(lines.values()), _raw(check, lines, secs), final, dict(out.facts))


def _evaluate(check: Check, probe: Probe) -> Outcome:
    try:
        return check.evaluate(probe)
    except Exception as exc:  # a parser surprised by real output must not end the preflight
        return Outcome(Verdict.UNKNOWN, f"could not judge the output ({type(exc).__name__}: {exc})",
                       "see the raw output in the detail view")


class _Run:
    """State of one preflight run: what each rank ran and how every check judged it."""

    def __init__(self, fleet: Fleet, cfg: ClusterConfig, todo: dict[int, list[Check]],
                 connect_timeout: float, launched: Mapping[int, str]):
        self.fleet, self.cfg, self.todo = fleet, cfg, todo
        self.connect_timeout = connect_timeout
        self.launched = launched
        self.marker = f"@@r37-preflight-{secrets.token_hex(4)}"
        self.queue: asyncio.Queue[CheckResult | None] = asyncio.Queue()
        self.outcomes: dict[tuple[str, int], Outcome] = {}
        self.sections: dict[int, dict[str, Section]] = {}

    def emit(self, check: Check, rank: int, out: Outcome, secs: dict[str, Section]) -> None:
        self.outcomes[(check.id, rank)] = out
        if check.after_compare_only:
            return
        lines = check.command_lines(self.cfg, rank)
        self.queue.put_nowait(_result(check, rank, out, lines, secs, final=check.compare is None))

    def unknown_all(self, rank: int, checks: Iterable[Check], why: str, remedy: str) -> None:
        for c in checks:
            self.emit(c, rank, Outcome(Verdict.UNKNOWN, why, remedy), {})

    async def host(self, rank: int) -> None:
        try:
            await self._host(rank)
        finally:
            self.queue.put_nowait(None)

    async def _host(self, rank: int) -> None:
        host, checks = self.fleet[rank], self.todo[rank]
        rest = [c for c in checks if c is not SSH]
        if not await host.wait_connected(self.connect_timeout):
            st = host.status
            why = st.error or f"not connected ({st.state.value})"
            if SSH in checks:
                remedy = st.remedy or f"check that the host is up and that `ssh {st.target} true` works"
                self.emit(SSH, rank, Outcome(Verdict.FAIL, f"{st.target}: {why}", remedy), {})
            self.unknown_all(rank, rest, "host not reachable over SSH", "fix the ssh check first")
            return
        if SSH in checks:
            st = host.status
            lat = f", {st.latency_ms:.1f} ms" if st.latency_ms is not None else ""
            self.emit(SSH, rank, Outcome(Verdict.PASS, f"{st.hostname or st.target}{lat}"), {})
        batched = [c for c in rest if not c.own_channels]
        own = [c for c in rest if c.own_channels]
        await asyncio.gather(self._batch(host, batched), *(self._own(host, c) for c in own))

    async def _batch(self, host: Host, checks: list[Check]) -> None:
        parts: dict[str, Cmd] = {}
        for c in checks:
            parts.update(c.commands(self.cfg, host.rank))
        secs: dict[str, Section] = {}
        if parts:
            # A few channels side by side (each a framed batch) instead of one long sequence: the
            # reads are independent, and hosts answer them in parallel.
            items = list(parts.items())
            groups = [items[i::BATCH_CHANNELS] for i in range(min(BATCH_CHANNELS, len(items)))]
            try:
                results = await asyncio.gather(*(
                    host.run(sections(group, self.marker), timeout=BATCH_TIMEOUT) for group in groups))
            except (HostUnavailable, CommandTimeout) as exc:
                self.unknown_all(host.rank, checks, f"no answer: {exc}", "re-run once the host answers")
                return
            for res in results:
                secs.update(split_sections(res.stdout + res.stderr, self.marker))
        self.sections.setdefault(host.rank, {}).update(secs)
        probe = Probe(self.cfg, host.rank, secs, self.launched)
        for c in checks:
            self.emit(c, host.rank, _evaluate(c, probe), secs)

    async def _own(self, host: Host, check: Check) -> None:
        cmds = check.commands(self.cfg, host.rank)

        async def one(label: str, cmd: Cmd) -> Section:
            try:
                res = await host.run(as_command(cmd), timeout=PROBE_TIMEOUT)
            except CommandTimeout:
                return Section(label, "timed out", 124)
            return Section(label, (res.stdout + res.stderr).rstrip("\n"), res.exit_status)

        try:
            got = await asyncio.gather(*(one(label, cmd) for label, cmd in cmds.items()))
        except HostUnavailable as exc:
            self.unknown_all(host.rank, [check], f"no answer: {exc}", "re-run once the host answers")
            return
        secs = {s.label: s for s in got}
        self.sections.setdefault(host.rank, {}).update(secs)
        self.emit(check, host.rank, _evaluate(check, Probe(self.cfg, host.rank, secs, self.launched)), secs)

    def compare(self, checks: list[Check], previous: dict[tuple[str, int], CheckResult]) -> list[CheckResult]:
        out = []
        for c in checks:
            if c.compare is None:
                continue
            mine = {r: o for (cid, r), o in self.outcomes.items() if cid == c.id}
            if not mine:
                continue
            pool = {r: Outcome(p.verdict, p.value, p.remedy, p.detail, p.facts)
                    for (cid, r), p in previous.items() if cid == c.id and r not in mine}
            pool.update(mine)
            try:
                changed = c.compare(self.cfg, pool)
            except Exception as exc:
                changed = {r: Outcome(Verdict.UNKNOWN, f"comparison failed ({type(exc).__name__}: {exc})")
                           for r in mine}
            for rank in sorted(set(mine) | set(changed)):
                o = changed.get(rank, pool[rank])
                if rank not in mine and (rank, o.verdict) == (rank, pool[rank].verdict):
                    continue
                secs = self.sections.get(rank, {}) if rank in mine else {}
                lines = c.command_lines(self.cfg, rank)
                if rank not in mine:
                    prev = previous[(c.id, rank)]
                    out.append(CheckResult(c.id, rank, c.step, c.title, o.verdict, o.value,
                                           o.remedy if o.verdict is not Verdict.PASS else "", o.detail,
                                           prev.commands, prev.raw, True, dict(o.facts)))
                else:
                    out.append(_result(c, rank, o, lines, secs, final=True))
        return out


async def run_preflight(fleet: Fleet, cfg: ClusterConfig, *, only: Iterable[str] | None = None,
                        ranks: Iterable[int] | None = None, previous: Iterable[CheckResult] = (),
                        connect_timeout: float | None = None,
                        launched: Mapping[int, str] | None = None) -> AsyncIterator[PreflightEvent]:
    """Yield PreflightStarted, then CheckResult events as hosts answer (a later result for the same check
    and rank replaces an earlier one: `final=False` ones may be refined by the comparison across hosts),
    then PreflightFinished. `previous` results of ranks not run now take part in those comparisons.
    `launched` (rank -> full container ID this cockpit started) defaults to the launch ledger's records."""
    started = time.monotonic()
    checks = select(only)
    chosen = sorted(set(ranks) if ranks is not None else set(cfg.ranks))
    todo = plan(cfg, checks, chosen)
    yield PreflightStarted(tuple(CheckInfo(c.id, c.step, c.title, tuple(r for r in chosen if c in todo[r]))
                                 for c in checks), tuple(chosen))
    wait = connect_timeout if connect_timeout is not None else cfg.ssh.connect_timeout + 2
    if launched is None:
        launched = launched_ids(cfg)
    run = _Run(fleet, cfg, todo, wait, launched)
    latest: dict[tuple[str, int], CheckResult] = {}
    tasks = [asyncio.create_task(run.host(r), name=f"preflight-{r}") for r in chosen]
    try:
        pending = len(tasks)
        while pending:
            item = await run.queue.get()
            if item is None:
                pending -= 1
                continue
            latest[(item.check, item.rank)] = item
            yield item
        for t in tasks:
            t.result()  # surface a bug in the runner itself
        prev = {(p.check, p.rank): p for p in previous}
        for item in run.compare(checks, prev):
            latest[(item.check, item.rank)] = item
            yield item
    finally:
        for t in tasks:
            t.cancel()
    order = {c.id: i for i, c in enumerate(CHECKS)}
    results = sorted(latest.values(), key=lambda r: (order[r.check], r.rank))
    yield PreflightFinished(tuple(results), time.monotonic() - started)


async def preflight_results(fleet: Fleet, cfg: ClusterConfig, **kwargs: object) -> PreflightFinished:
    """Run the whole preflight and return only the final summary."""
    final: PreflightFinished | None = None
    async for ev in run_preflight(fleet, cfg, **kwargs):  # type: ignore[arg-type]
        if isinstance(ev, PreflightFinished):
            final = ev
    assert final is not None
    return final
