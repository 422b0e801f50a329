"""May a run start? Every rank up (the live cluster model) and the API idle (``/metrics``), else a reason.

Also the warnings: where the server's settings differ from the method (a context shorter than a prefill
size, a prompt set whose budgets are not the method's).
"""

from __future__ import annotations

from dataclasses import dataclass

from cockpit.api.client import ApiClient, ModelInfo
from cockpit.api.errors import ApiError
from cockpit.api.liveness import read_sample
from cockpit.config import ClusterConfig
from cockpit.hosts import Fleet
from cockpit.recipe.launch import cluster_status

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


async def idle_refusal(client: ApiClient) -> Refusal | None:
    """None when ``/metrics`` shows no request running or waiting."""
    try:
        sample = await read_sample(client)
    except ApiError as exc:
        return Refusal(f"/metrics could not be read: {exc.message}", exc.remedy, "bench-not-ready")
    if not sample.complete:
        return Refusal("/metrics has no vLLM request counters: the API cannot be shown idle",
                       "check the --api-url: the benchmark needs vLLM's /metrics", "bench-not-ready")
    if sample.busy:
        return Refusal(f"the API is busy: {sample.running} running, {sample.waiting} waiting "
                       "(the figures would not be comparable)", REMEDY_BUSY, "bench-busy")
    return None


def context_length(models: list[ModelInfo], model: str) -> int | None:
    """The served model's ``max_model_len`` from ``/v1/models`` (None: not said)."""
    return next((m.max_model_len for m in models if m.id == model), None)
