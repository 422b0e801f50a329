"""The refusal: the live model's verdict must be ready; /metrics must show the API idle."""

from __future__ import annotations

from typing import Any

import pytest

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


def _vllm(running: int, waiting: int) -> str:
    return (f"vllm:num_requests_running{{model_name=\"m\"}} {running}\n"
            f"vllm:num_requests_waiting{{model_name=\"m\"}} {waiting}\n"
            "vllm:generation_tokens_total{model_name=\"m\"} 0\n")


@pytest.mark.parametrize(("text", "reason"), [
    (_vllm(0, 0), None),
    (_vllm(2, 0), "busy: 2 running, 0 waiting"),
    (_vllm(0, 3), "busy: 0 running, 3 waiting"),
    ("", "no request counters this cockpit knows"),
])
async def test_api_must_be_idle(monkeypatch: pytest.MonkeyPatch, text: str, reason: str | None) -> None:
    async def metrics(_client: Any, timeout: float = 0) -> str:
        return text

    monkeypatch.setattr(gate, "read_metrics_text", metrics)
    refusal = await gate.idle_refusal(None)  # type: ignore[arg-type]
    if reason is None:
        assert refusal is None
    else:
        assert refusal is not None and reason in refusal.reason
