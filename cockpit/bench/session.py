"""Starting a benchmark run, one way for ``r37-cockpit bench`` and the Bench pane.

:func:`load_inputs` reads the prompt set and any earlier run to compare with; :func:`cluster_endpoint`
opens the SSH tunnel to rank 0 after the live model's look at every rank (a caller that has a fleet
running already asks :func:`~cockpit.bench.gate.cluster_refusal` itself); :func:`prepare` checks the
API (ready, idle), picks the model, makes the records directory and builds the :class:`Runner`, or
returns the :class:`Refusal` that stops it. The runner writes the records and the summary when it ends
(also when cancelled or failed).
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cockpit.api.apikey import ApiKey
from cockpit.api.choose import ModelChoiceError, resolve_model
from cockpit.api.client import ApiClient
from cockpit.api.endpoint import ApiEndpoint, EndpointDown, rank0_fleet_connected
from cockpit.api.errors import ApiError
from cockpit.api.status import ApiStatus
from cockpit.api.stream import StreamDeadlines
from cockpit.api.urls import redact
from cockpit.bench import prompts as P
from cockpit.bench.gate import Refusal, cluster_refusal, idle_check
from cockpit.bench.runner import BenchEvent, Note, Runner
from cockpit.bench.store import RunStore, StoreError, default_dir, find_run
from cockpit.bench.suite import SuiteName, plan_for
from cockpit.bench.summary import CompareError, load_earlier
from cockpit.bench.telemetry import TelemetrySource
from cockpit.config import ClusterConfig
from cockpit.constants import SERVED_MODEL
from cockpit.hosts import Fleet
from cockpit.telemetry.cluster_stats import ClusterStats
from cockpit.telemetry.sampler import StatsSampler

ModelPicker = Callable[[ApiClient, ApiStatus], Awaitable[str]]
"""Chooses the model to ask (the CLI's raises its own errors; see :func:`pick_model`)."""


class SetupError(Exception):
    """A run cannot be set up from what was given (a prompt file, a compare dir, the records dir, the
    model): ``code`` names which, for the CLI's exit codes."""

    def __init__(self, message: str, code: str = "usage", remedy: str = "") -> None:
        super().__init__(message)
        self.message = message
        self.code = code
        self.remedy = remedy


@dataclass(frozen=True, slots=True)
class Options:
    """What a run measures and where it keeps its records (the CLI's flags, the pane's choices)."""

    suite: SuiteName = "quick"
    concurrency: tuple[int, ...] | None = None
    prompts_file: str | None = None
    out: Path | None = None
    compare: str | tuple[str, ...] | None = None     # one earlier run's directory or several
    idle_s: float = 45.0
    wait_s: float = 0.0
    timeout_s: float | None = None     # --timeout (both deadlines), for the run's config record
    force: bool = False                # --force: run when idleness cannot be checked (no /metrics)
    repeat: int = 1                    # --repeat N: every decode and depth cell N times
    depths: tuple[int, ...] = ()       # --depth 0,8k,32k: single-stream decode with that much context

    @property
    def compares(self) -> tuple[str, ...]:
        return (self.compare,) if isinstance(self.compare, str) else tuple(self.compare or ())


@dataclass(frozen=True, slots=True)
class Inputs:
    prompts: P.PromptSet
    earlier: list[dict[str, Any]]


@dataclass(frozen=True, slots=True)
class Prepared:
    """A run ready to start: ``await runner.run()``."""

    runner: Runner
    model: str
    out: Path
    url: str        # redacted


def load_inputs(options: Options) -> Inputs:
    """The prompt set and the earlier summary; raises :class:`SetupError`."""
    try:
        prompts = P.load(options.prompts_file)
    except P.PromptFileError as exc:
        raise SetupError(f"prompt set: {exc}") from None
    earlier = []
    for directory in options.compares:
        try:
            earlier.append(load_earlier(find_run(directory)))
        except CompareError as exc:
            raise SetupError(f"--compare: {exc}") from None
    if options.out is not None and options.out.exists():
        raise SetupError(f"{options.out} exists: a run never overwrites earlier records (give another "
                         "--out DIR)", "file-exists")
    return Inputs(prompts, earlier)


@contextlib.asynccontextmanager
async def cluster_endpoint(config: ClusterConfig, *, read_timeout: float, deadlines: StreamDeadlines,
                           api_key: ApiKey | None = None
                           ) -> AsyncIterator[tuple[ApiEndpoint, Refusal | None, ClusterStats]]:
    """A fleet of its own: the live model's verdict (a refusal unless ready), then the tunnel to rank 0,
    and the stats sampler on every rank (read-only: the per-cell telemetry of the run)."""
    fleet = Fleet(config)
    stats = ClusterStats(config.ranks, config.stats.interval_s, config.cluster.name)
    sampler = StatsSampler(fleet, config, stats)
    try:
        fleet.start()
        await fleet.wait_connected(config.ssh.connect_timeout + 2)
        refusal = await cluster_refusal(fleet, config)
        await rank0_fleet_connected(fleet, config.ssh.connect_timeout + 2)
        if refusal is None:
            sampler.start()
            await first_round(stats, config.stats.interval_s * 2 + config.ssh.connect_timeout)
        async with ApiEndpoint(fleet, config.cluster.api_port, read_timeout=read_timeout,
                               deadlines=deadlines, api_key=api_key) as endpoint:
            yield endpoint, refusal, stats
    finally:
        await sampler.close()
        await fleet.close()


async def first_round(stats: ClusterStats, timeout: float) -> bool:
    """Wait (at most ``timeout`` s) until every rank's sampler sent a round, so that the first cell has
    readings; False when one did not (its cells say unknown)."""
    deadline = time.monotonic() + timeout
    while any(s.round_at is None for s in stats.ranks.values()):
        if time.monotonic() >= deadline:
            return False
        await asyncio.sleep(0.1)
    return True


async def pick_model(client: ApiClient, status: ApiStatus, *, wanted: str | None = None,
                     gateway: bool = False) -> str:
    """The model to ask, by :func:`cockpit.api.choose.resolve_model`; raises :class:`SetupError`."""
    try:
        return await resolve_model(client, status.models, wanted, default=SERVED_MODEL, gateway=gateway)
    except ApiError as exc:
        raise SetupError(f"the models cannot be listed: {exc.message}", "api", exc.remedy) from None
    except ModelChoiceError as exc:
        raise SetupError(exc.message, "usage" if exc.usage else "api") from None


async def prepare(endpoint: ApiEndpoint, options: Options, inputs: Inputs, *,
                  emit: Callable[[BenchEvent], None] | None = None, choose: ModelPicker | None = None,
                  engine_deadlines: dict[str, Any] | None = None,
                  stats: ClusterStats | None = None) -> Prepared | Refusal:
    """Check the API (ready, then idle by ``/metrics``), pick the model, make the records directory and
    build the runner; or the refusal, with nothing sent but the checks and nothing written. Raises
    :class:`SetupError` (the records directory, the model)."""
    status = await (endpoint.wait_ready(options.wait_s) if options.wait_s > 0 else endpoint.check())
    if not status.ok:
        return Refusal(f"API not ready ({status.state}): {status.message}", status.remedy, "bench-not-ready")
    try:
        client = await endpoint.client()
    except EndpointDown as exc:
        return Refusal(exc.status.message, exc.status.remedy, "bench-not-ready")
    idle = await idle_check(client, force=options.force)
    if idle.refusal is not None:
        return idle.refusal
    gateway = endpoint.via == "gateway"
    model = await (choose(client, status) if choose is not None else pick_model(client, status,
                                                                                 gateway=gateway))
    out = options.out or default_dir()
    try:
        store = RunStore(out)
    except StoreError as exc:
        raise SetupError(str(exc), "file-exists") from None
    plan = plan_for(options.suite, inputs.prompts, options.concurrency)
    if gateway and emit is not None:
        emit(Note("--api-url: the cluster's ranks are not looked at, only the API", warning=False))
    config = {"suite": options.suite, "api_url": redact(client.base_url), "via": endpoint.via,
              "concurrency": list(plan.concurrency), "prompts_file": options.prompts_file,
              "compare": options.compare, "idle_s": options.idle_s,
              "deadlines": ({"both_s": options.timeout_s} if options.timeout_s is not None
                            else engine_deadlines or {})}
    if options.repeat > 1:
        config["repeat"] = options.repeat
    if options.depths:
        config["depth"] = list(options.depths)
    config["idle_checked"] = not idle.unchecked
    if idle.unchecked:
        config["idle_check"] = idle.unchecked
    runner = Runner(client, model, plan, inputs.prompts, store=store, emit=emit, config=config,
                    deadlines=endpoint.deadlines, idle_s=options.idle_s, earlier=inputs.earlier,
                    repeat=options.repeat, depths=options.depths,
                    telemetry=TelemetrySource(stats, client, stats.interval_s if stats else 1.0))
    if idle.unchecked:
        runner.note(idle.unchecked)        # in the run's notes and summary: the figures may be shared
    return Prepared(runner, model, out, redact(client.base_url))
