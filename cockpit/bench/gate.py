"""May a run start? Every rank up (the live cluster model) and the API idle (``/metrics``), else a reason.

Also the warnings: where the server's settings differ from the method (a context shorter than a prefill
size, a prompt set whose budgets are not the method's).
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from cockpit.api.client import ApiClient, ModelInfo
from cockpit.api.errors import ApiError
from cockpit.api.liveness import parse_sample, read_metrics_text
from cockpit.config import ClusterConfig
from cockpit.hosts import Fleet
from cockpit.recipe.status import cluster_status

REMEDY_BUSY = ("Wait until the other requests are done (the Stats pane or `r37-cockpit stats` shows "
               "the engine's running and waiting requests), then start the benchmark again.")


@dataclass(frozen=True, slots=True)
class Refusal:
    """Why a run does not start, and what to do."""

    reason: str
    remedy: str = ""
    code: str = "bench-refused"

    def to_dict(self) -> dict[str, str]:
        return {"reason": self.reason, "remedy": self.remedy, "code": self.code}


async def cluster_refusal(fleet: Fleet, cfg: ClusterConfig, *, timeout: float = 30.0) -> Refusal | None:
    """None when the live model says the cluster is ready (every rank up, the API serving the model)."""
    report = await cluster_status(fleet, cfg, timeout=timeout)
    verdict = report.verdict
    if verdict.state != "ready":
        return Refusal(f"the cluster is not ready: {verdict.summary}",
                       verdict.remedy or "launch the cluster (pane 4, or `r37-cockpit launch`) and wait for "
                                         "READY, then benchmark", "bench-not-ready")
    return None


NO_METRICS = (404, 405, 501)   # the server has no /metrics (llama.cpp's llama-server without --metrics: 501)
LLAMACPP_RUNNING = "llamacpp:requests_processing"
LLAMACPP_WAITING = "llamacpp:requests_deferred"
REMEDY_UNCHECKED = ("make sure nothing else is using this server, then run with `--force`: the run's records "
                    "say that idleness was not checked (llama.cpp's llama-server: start it with `--metrics`, "
                    "then the check runs)")


@dataclass(frozen=True, slots=True)
class IdleCheck:
    """The idle gate's answer: a refusal, or go — with `unchecked` saying why idleness was not checked."""

    refusal: Refusal | None = None
    unchecked: str = ""


def _gauge(text: str, name: str) -> float | None:
    """One unlabelled gauge of Prometheus text (`name value`), None when absent or unreadable."""
    for line in text.splitlines():
        if line.startswith(name + " ") or line.startswith(name + "{"):
            try:
                return float(line.rsplit(" ", 1)[1])
            except (ValueError, IndexError):
                return None
    return None


async def idle_check(client: ApiClient, *, force: bool = False) -> IdleCheck:
    """Is the API idle? By vLLM's request gauges on ``/metrics`` (or llama.cpp's). A server without
    ``/metrics`` (HTTP 404, 405 or 501) cannot be shown idle: refused, unless ``force`` (then the run goes
    on and says so)."""
    try:
        text = await read_metrics_text(client)
    except ApiError as exc:
        if exc.status in NO_METRICS:
            why = f"idleness not checked: {client.base_url}/metrics answered HTTP {exc.status} (no /metrics)"
            if force:
                return IdleCheck(unchecked=why + "; run anyway (--force)")
            return IdleCheck(Refusal(f"whether the API is idle cannot be checked: {exc.message}",
                                     REMEDY_UNCHECKED, "bench-not-ready"))
        return IdleCheck(Refusal(f"/metrics could not be read: {exc.message}", exc.remedy, "bench-not-ready"))
    sample = parse_sample(text, time.monotonic())
    running, waiting = sample.running, sample.waiting
    if not sample.complete:
        llama = _gauge(text, LLAMACPP_RUNNING), _gauge(text, LLAMACPP_WAITING)
        if llama[0] is None or llama[1] is None:
            why = "idleness not checked: /metrics has neither vLLM's nor llama.cpp's request gauges"
            if force:
                return IdleCheck(unchecked=why + "; run anyway (--force)")
            return IdleCheck(Refusal("/metrics has no request counters this cockpit knows (vLLM's, "
                                     "llama.cpp's): the API cannot be shown idle", REMEDY_UNCHECKED,
                                     "bench-not-ready"))
        running, waiting = max(0, round(llama[0])), max(0, round(llama[1]))
    if running or waiting:
        return IdleCheck(Refusal(f"the API is busy: {running} running, {waiting} waiting "
                                 "(the figures would not be comparable)", REMEDY_BUSY, "bench-busy"))
    return IdleCheck()


async def idle_refusal(client: ApiClient) -> Refusal | None:
    """None when ``/metrics`` shows no request running or waiting."""
    return (await idle_check(client)).refusal


def context_length(models: list[ModelInfo], model: str) -> int | None:
    """The served model's ``max_model_len`` from ``/v1/models`` (None: not said)."""
    return next((m.max_model_len for m in models if m.id == model), None)
