"""Differential test: the stand-in for llama.cpp that tests/bench/test_bench_no_metrics.py uses (the second
OpenAI-compatible test server, `metrics="501"`) against the real llama-server started without `--metrics`.
The /metrics answer is the same, and so is the cockpit's verdict on it: the same refusal and remedy from
`bench`, the same note when forced (URLs aside)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import httpx
import pytest
from llamaserver import LlamaServer
from test_llama_contract import bench

from cockpit.api.client import ApiClient
from cockpit.api.errors import from_status
from cockpit.bench.gate import idle_check

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "fixtures"))
from openai_server import OpenAIServer

pytestmark = pytest.mark.xdist_group("real_llama")

KEY = "sk-differential-PLANTED-5566"


def _metrics_answer(url: str) -> tuple[int, object, str, str, str]:
    r = httpx.get(url + "/metrics", headers={"Authorization": f"Bearer {KEY}"}, timeout=30)
    err = from_status(r.status_code, r.content, url + "/metrics")
    return r.status_code, r.json(), err.kind, err.message.replace(url, "URL"), err.remedy


async def _forced_note(url: str) -> str:
    async with ApiClient(url, api_key=KEY) as client:
        check = await idle_check(client, force=True)
    assert check.refusal is None
    return check.unchecked.replace(url, "URL")


def _refusal(tmp: Path, url: str) -> tuple[int, list[str]]:
    run = bench(tmp, url, key=KEY)
    return run.returncode, [line.replace(url, "URL") for line in run.stderr.splitlines()]


async def test_the_501_stand_in_reads_as_the_real_llama_server(llama_plain: LlamaServer,
                                                               tmp_path: Path) -> None:
    with OpenAIServer(KEY, metrics="501") as stand_in:
        real, fake = _metrics_answer(llama_plain.url), _metrics_answer(stand_in.url)
        assert real == fake, (real, fake)
        assert await _forced_note(llama_plain.url) == await _forced_note(stand_in.url)
        real_refusal = _refusal(tmp_path / "real", llama_plain.url)
        fake_refusal = _refusal(tmp_path / "fake", stand_in.url)
    assert real_refusal == fake_refusal, (real_refusal, fake_refusal)
    assert real_refusal[0] == 3 and "HTTP 501 from URL/metrics" in real_refusal[1][0]
    assert json.dumps(real[1]).count("--metrics") == 1
