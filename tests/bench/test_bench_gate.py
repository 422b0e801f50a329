"""The refusal: the live model's verdict must be ready; /metrics must show the API idle."""

from __future__ import annotations

from typing import Any

import pytest

from cockpit.api.liveness import EngineSample
from cockpit.bench import gate
from cockpit.recipe.timeline_events import ClusterVerdict


class _Report:
    def __init__(self, verdict: ClusterVerdict) -> None:
        self.verdict = verdict


@pytest.mark.parametrize(("state", "refused"), [("ready", False), ("launching", True), ("down", True),
                                                ("hung", True), ("host-lost", True)])
async def test_cluster_must_be_ready(monkeypatch: pytest.MonkeyPatch, state: str, refused: bool) -> None:
    async def status(*_a: Any, **_k: Any) -> _Report:
        return _Report(ClusterVerdict(state, f"cluster {state}", None, "do this"))  # type: ignore[arg-type]

    monkeypatch.setattr(gate, "cluster_status", status)
    refusal = await gate.cluster_refusal(None, None)  # type: ignore[arg-type]
    assert (refusal is not None) is refused
    if refusal is not None:
        assert refusal.reason == f"the cluster is not ready: cluster {state}" and refusal.remedy == "do this"


@pytest.mark.parametrize(("running", "waiting", "found", "reason"), [
    (0, 0, {"vllm:num_requests_running", "vllm:generation_tokens_total"}, None),
    (2, 0, {"vllm:num_requests_running", "vllm:generation_tokens_total"}, "busy: 2 running, 0 waiting"),
    (0, 3, {"vllm:num_requests_running", "vllm:generation_tokens_total"}, "busy: 0 running, 3 waiting"),
    (0, 0, set(), "no vLLM request counters"),
])
async def test_api_must_be_idle(monkeypatch: pytest.MonkeyPatch, running: int, waiting: int, found: set[str],
                                reason: str | None) -> None:
    async def sample(_client: Any) -> EngineSample:
        return EngineSample(running, waiting, 0.0, 0.0, None, 0.0, frozenset(found))

    monkeypatch.setattr(gate, "read_sample", sample)
    refusal = await gate.idle_refusal(None)  # type: ignore[arg-type]
    if reason is None:
        assert refusal is None
    else:
        assert refusal is not None and reason in refusal.reason
