"""Contract tests: the cockpit's CLI (`--api-url`) and readers against llama.cpp's real `llama-server` (the
llama.cpp vendored by llama-cpp-python 0.3.36) serving a tiny random-weight GGUF, on 127.0.0.1.

Two servers (conftest.py): `llama_plain` without `--metrics` (its /metrics answers HTTP 501), and
`llama_metrics` with it (llama.cpp's `llamacpp:*` families, no vLLM ones).
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from pathlib import Path

import httpx
import pytest
from llamaserver import CTX, SERVED, LlamaServer
from vllmread import stream_turn

from cockpit.api.chat import ChatRequest
from cockpit.api.client import ApiClient
from cockpit.api.errors import REMEDY_SERVER_FAILED, from_status
from cockpit.api.stream import StreamDeadlines
from cockpit.bench.gate import idle_check

pytestmark = pytest.mark.xdist_group("real_llama")

REPO = Path(__file__).resolve().parents[2]
DEADLINES = StreamDeadlines(120.0, 60.0)   # generous: the machine is shared
KEY_NAME = "OPENAI_API_KEY"


def cockpit(tmp: Path, *args: str, key: str | None = None,
            timeout: float = 600) -> subprocess.CompletedProcess[str]:
    """The cockpit's CLI in a subprocess, with a home of its own (no user config; `key` as OPENAI_API_KEY)."""
    tmp.mkdir(parents=True, exist_ok=True)
    env = {k: v for k, v in os.environ.items() if k != KEY_NAME}
    env.update(HOME=str(tmp), XDG_CONFIG_HOME=str(tmp / ".config"), XDG_STATE_HOME=str(tmp / ".state"),
               XDG_CACHE_HOME=str(tmp / ".cache"),
               PYTHONPATH=str(REPO) + os.pathsep + env.get("PYTHONPATH", ""))
    if key:
        env[KEY_NAME] = key
    return subprocess.run([sys.executable, "-m", "cockpit", *args], cwd=tmp, env=env, capture_output=True,
                          text=True, timeout=timeout)


def bench(tmp: Path, url: str, *extra: str, key: str | None = None) -> subprocess.CompletedProcess[str]:
    return cockpit(tmp, "bench", "--suite", "quick", "--api-url", url, "--idle", "1", "--concurrency", "1",
                   *extra, key=key)


def ask(text: str, max_tokens: int) -> ChatRequest:
    """A request that runs to max_tokens (llama.cpp's `ignore_eos`, as vLLM's)."""
    return ChatRequest(messages=[{"role": "user", "content": text}], model=SERVED,  # type: ignore[arg-type]
                       thinking=False, max_tokens=max_tokens, extra={"ignore_eos": True})


# --- /metrics and the bench's idle gate ------------------------------------------------------------


def test_metrics_without_the_flag_is_llamacpp_501(llama_plain: LlamaServer) -> None:
    r = httpx.get(llama_plain.url + "/metrics", timeout=30)
    assert r.status_code == 501, r.text
    err = from_status(r.status_code, r.content, llama_plain.url + "/metrics")
    assert "Start it with `--metrics`" in err.message
    assert err.remedy != REMEDY_SERVER_FAILED and "501 Not Implemented" in err.remedy


def test_bench_without_metrics_is_refused_with_the_501_remedy(llama_plain: LlamaServer,
                                                              tmp_path: Path) -> None:
    refused = bench(tmp_path, llama_plain.url)
    assert refused.returncode == 3, refused.stderr
    reason, remedy = refused.stderr.splitlines()[:2]
    assert "benchmark refused: whether the API is idle cannot be checked" in reason
    assert f"HTTP 501 from {llama_plain.url}/metrics" in reason and "Start it with `--metrics`" in reason
    assert remedy.startswith("  remedy: ") and "`--force`" in remedy and "--metrics" in remedy
    assert "500" not in remedy and "model" not in remedy
    assert not (tmp_path / "results").exists() or not any((tmp_path / "results").rglob("requests.jsonl"))


@pytest.fixture(scope="module")
def forced(llama_plain: LlamaServer, tmp_path_factory: pytest.TempPathFactory) -> tuple[str, Path]:
    """One `bench --suite quick --force` against the server without /metrics: (stderr, its run folder)."""
    tmp = tmp_path_factory.mktemp("bench-forced")
    run = bench(tmp, llama_plain.url, "--force", "-o", str(tmp / "run"))
    assert run.returncode in (0, 1), run.stderr[-3000:]
    return run.stderr, tmp / "run"


def test_bench_forced_runs_and_marks_the_records(llama_plain: LlamaServer, forced: tuple[str, Path]) -> None:
    stderr, out = forced
    assert "warning: idleness not checked" in stderr
    config = json.loads((out / "config.json").read_text())
    assert config["idle_checked"] is False
    assert config["idle_check"].startswith(
        f"idleness not checked: {llama_plain.url}/metrics answered HTTP 501")
    summary = json.loads((out / "summary.json").read_text())
    assert any(n.startswith("idleness not checked") for n in summary["notes"])
    assert "idleness not checked" in (out / "summary.md").read_text()
    records = [json.loads(line) for line in (out / "requests.jsonl").read_text().splitlines()]
    decode = [r for r in records if r.get("kind") == "decode"]
    assert decode and all(r["ok"] for r in decode), [r for r in decode if not r["ok"]][:2]
    assert all(r["completion_tokens"] for r in decode)      # llama.cpp sends usage in its last chunk


def test_bench_reads_the_context_length_and_leaves_out_what_does_not_fit(forced: tuple[str, Path]) -> None:
    """llama-server's /v1/models has no `max_model_len`: its context per slot is `meta.n_ctx`. The quick
    suite's 32k prefill and 8k needle do not fit in 4k: left out, and the run says so (not sent, to fail)."""
    _, out = forced
    config = json.loads((out / "config.json").read_text())
    assert config["context_length"] == CTX
    skipped = config["plan"]["skipped"]
    assert any(f"larger than the context length {CTX}" in s for s in skipped), config["plan"]
    records = [json.loads(line) for line in (out / "requests.jsonl").read_text().splitlines()]
    assert not [r for r in records if r.get("kind") in ("prefill", "needle")], records[:3]


async def test_llamacpp_gauges_are_the_idle_check(llama_metrics: LlamaServer, tmp_path: Path) -> None:
    """With `--metrics`, idle is read from `llamacpp:requests_processing`/`_deferred`: a request running
    makes the gate refuse (busy), none lets the run start with idleness checked."""
    async with ApiClient(llama_metrics.url, deadlines=DEADLINES) as client:
        assert (await idle_check(client)).refusal is None
        answer = asyncio.create_task(stream_turn(client, ask("a long story", CTX - 64)))
        busy = None
        for _ in range(600):        # until the server counts it (at most ~60 s); then the gate must see it
            text = (await client.metrics_text())
            if "llamacpp:requests_processing 1" in text:
                busy = await idle_check(client)
                break
            assert not answer.done(), "the answer ended before the server counted it"
            await asyncio.sleep(0.1)
        turn = await asyncio.wait_for(answer, 600)
    assert busy is not None and busy.refusal is not None, busy
    assert busy.refusal.code == "bench-busy" and "1 running" in busy.refusal.reason
    assert turn.error_kind is None and turn.finish_reason == "length", turn

    out = tmp_path / "run"
    run = bench(tmp_path, llama_metrics.url, "-o", str(out))
    assert run.returncode in (0, 1), run.stderr[-3000:]
    assert "idleness not checked" not in run.stderr and "benchmark refused" not in run.stderr
    assert json.loads((out / "config.json").read_text())["idle_checked"] is True


# --- chat (SSE) and smoke --------------------------------------------------------------------------


async def test_sse_stream_is_content_with_usage(llama_plain: LlamaServer) -> None:
    async with ApiClient(llama_plain.url, deadlines=DEADLINES) as client:
        turn = await stream_turn(client, ask("say something", 16))
    assert turn.error_kind is None, turn
    assert turn.kinds[0] == "RoleStarted" and "ContentDelta" in turn.kinds and turn.kinds[-1] == "Finished"
    assert turn.content and not turn.reasoning and not turn.tools
    assert turn.finish_reason == "length" and turn.completion_tokens == 16


def test_cli_chat_streams_an_answer(llama_plain: LlamaServer, tmp_path: Path) -> None:
    run = cockpit(tmp_path, "chat", "tell me about the sea", "--api-url", llama_plain.url,
                  "--max-tokens", "12", "--no-thinking")
    assert run.returncode == 0, run.stderr
    assert run.stdout.strip()
    # (no tok/s when the whole answer came in one read: the tiny model writes 12 tokens in a millisecond)
    stats = run.stderr.strip().splitlines()[-1]
    assert stats.startswith("TTFT ") and "12 tokens" in stats and "finish length" in stats, run.stderr
    js = cockpit(tmp_path, "chat", "and the sky", "--api-url", llama_plain.url, "--max-tokens", "12",
                 "--no-thinking", "--json")
    assert js.returncode == 0, js.stderr
    answer = json.loads(js.stdout)
    assert answer["text"] and answer["model"] and answer["usage"]["completion_tokens"] <= 12
    assert answer["tokens_estimated"] is False and answer["finish_reason"] in ("length", "stop")


def test_smoke_reports_honestly(llama_plain: LlamaServer, tmp_path: Path) -> None:
    run = cockpit(tmp_path, "smoke", "--api-url", llama_plain.url, "--json")
    steps = {s["name"]: s for s in json.loads(run.stdout)["steps"]}
    assert steps["health"]["ok"] and steps["models"]["ok"], steps
    assert steps["card request"]["ok"], steps["card request"]
    # a random model can neither count nor call a tool: failed, each with a remedy, and the run fails
    failed = [s for s in steps.values() if not s["ok"]]
    assert failed and all(s["remedy"] for s in failed), failed
    assert run.returncode == 1


# --- error bodies ----------------------------------------------------------------------------------


def _chat(**body: object) -> bytes:
    return json.dumps({"model": SERVED, "max_tokens": 4, **body}).encode()


PNG_1PX = ("data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAIAAACQd1PeAAAADElEQVR4nGP4z8AAAAMB"
           "AQDJ/pLvAAAAAElFTkSuQmCC")


@pytest.mark.parametrize(("method", "path", "body", "status", "remedy_says"), [
    ("post", "/v1/nowhere", b'{"model": "x"}', 404, "no such route"),
    ("get", "/nowhere", b"", 404, "no such route"),
    ("post", "/v1/chat/completions", b"{not json", 500, "could not read the request body"),
    ("post", "/v1/chat/completions", _chat(), 400, "could not read the request body"),
    ("post", "/v1/chat/completions", _chat(messages=[{"role": "user", "content": "word " * (2 * CTX)}]), 400,
     "exceed the served context"),
    ("post", "/v1/chat/completions", _chat(messages=[{"role": "user", "content": [
        {"type": "text", "text": "what is this"}, {"type": "image_url", "image_url": {"url": PNG_1PX}}]}]),
     500, "takes no images"),
], ids=["unknown-v1-path", "unknown-path", "not-json", "no-messages", "past-the-context", "image"])
def test_error_bodies_get_the_remedy_of_their_status(llama_plain: LlamaServer, method: str, path: str,
                                                     body: bytes, status: int, remedy_says: str) -> None:
    r = httpx.request(method.upper(), llama_plain.url + path, content=body or None,
                      headers={"content-type": "application/json"}, timeout=60)
    assert r.status_code == status, r.text
    err = from_status(r.status_code, r.content, llama_plain.url + path)
    assert err.message.startswith(f"HTTP {status} from ") and "\n" not in err.message
    assert remedy_says in err.remedy, (r.text, err.remedy)
