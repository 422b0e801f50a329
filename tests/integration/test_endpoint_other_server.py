"""`chat`/`smoke --api-url` against a second, independent OpenAI-compatible server (not vLLM, not the sim
engine): no /health, no usage chunk, a bearer key, tool-call names repeated per delta, no role-first
chunk, HTTP 500 tracebacks, `: ping` comments. Through the CLI (a subprocess) and the API layer."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from cockpit.api import readiness
from cockpit.api.apikey import ApiKey
from cockpit.api.chat import ChatRequest
from cockpit.api.client import ApiClient
from cockpit.api.endpoint import ApiEndpoint
from cockpit.api.stream import Finished, RoleStarted, StreamDeadlines, StreamError, ToolCallDelta
from cockpit.constants import SERVED_MODEL

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "fixtures"))
from openai_server import ALIAS, OpenAIServer

REPO = Path(__file__).resolve().parents[2]
KEY = "sk-other-PLANTED-5f1e2d3c4b5a69788796"
WRONG = "sk-wrong-PLANTED-0a1b2c3d4e5f"
TOOL = {"type": "function", "function": {"name": "get_weather", "description": "weather of a city",
                                         "parameters": {"type": "object",
                                                        "properties": {"city": {"type": "string"}},
                                                        "required": ["city"]}}}


@pytest.fixture(scope="module")
def server() -> Iterator[OpenAIServer]:
    with OpenAIServer(KEY) as s:
        yield s


@pytest.fixture(scope="module")
def several() -> Iterator[OpenAIServer]:
    with OpenAIServer(KEY, ["alpha-1b", "beta-70b"]) as s:
        yield s


@pytest.fixture(autouse=True)
def _no_env_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)


def ask(text: str, model: str = ALIAS, **extra: object) -> ChatRequest:
    return ChatRequest([{"role": "user", "content": text}], model=model, thinking=False, **extra)  # type: ignore[arg-type]


async def events_of(url: str, request: ChatRequest, **client: object) -> list[object]:
    """Every event of one streamed request."""
    async with ApiClient(url, **client) as api, api.chat_stream(request) as stream:  # type: ignore[arg-type]
        return [e async for e in stream]


def cli(tmp: Path, *argv: str, env_key: str | None = None) -> subprocess.CompletedProcess[str]:
    """`r37-cockpit ARGV` in a fresh HOME and working directory under `tmp` (so every file it writes
    lands there)."""
    env = {k: v for k, v in os.environ.items() if k != "OPENAI_API_KEY"}
    env.update(HOME=str(tmp), XDG_CONFIG_HOME=str(tmp / ".config"), XDG_STATE_HOME=str(tmp / ".state"),
               XDG_CACHE_HOME=str(tmp / ".cache"),
               PYTHONPATH=str(REPO) + os.pathsep + env.get("PYTHONPATH", ""))
    if env_key is not None:
        env["OPENAI_API_KEY"] = env_key
    return subprocess.run([sys.executable, "-m", "cockpit", *argv], cwd=tmp, env=env, capture_output=True,
                          text=True, timeout=60)


def no_secret_in(tmp: Path, *outputs: str, secrets: tuple[str, ...] = (KEY, WRONG)) -> None:
    """Neither key in any output, nor in any file written under `tmp`."""
    for text in outputs:
        assert not any(s in text for s in secrets)
    for path in tmp.rglob("*"):
        if path.is_file():
            data = path.read_bytes()
            assert not any(s.encode() in data for s in secrets), path


# --- the API layer -------------------------------------------------------------------------------


async def test_ready_without_health_and_unauthorized_without_the_key(server: OpenAIServer) -> None:
    async with ApiEndpoint(None, 0, api_url=server.url, api_key=None) as ep:
        status = await ep.check()
    assert status.state == "unauthorized" and "API key needed or refused" in status.message
    assert "--api-key" in status.remedy and "OPENAI_API_KEY" in status.remedy
    async with ApiEndpoint(None, 0, api_url=server.url, api_key=ApiKey(KEY)) as ep:
        status = await ep.check()
    assert status.ok and "no /health" in status.message and status.models == (ALIAS,)
    probed = await readiness.probe(server.url, ALIAS, api_key=None)
    assert probed.state == "unauthorized"


async def test_the_watchers_probe_through_a_gateway(server: OpenAIServer, several: OpenAIServer) -> None:
    key = ApiKey(KEY)
    assert (await readiness.probe(server.url, SERVED_MODEL, api_key=key)).state == "model_missing"
    through = await readiness.check(None, 0, SERVED_MODEL, api_url=server.url, api_key=key)  # type: ignore[arg-type]
    assert through.ok and ALIAS in through.message and "no /health" in through.message
    ambiguous = await readiness.check(None, 0, SERVED_MODEL, api_url=several.url, api_key=key)  # type: ignore[arg-type]
    assert ambiguous.state == "model_missing" and "--model" in ambiguous.remedy
    assert "alpha-1b, beta-70b" in ambiguous.message


async def test_a_wrong_key_echoed_by_the_server_is_never_shown(server: OpenAIServer) -> None:
    async with ApiClient(server.url, api_key=WRONG) as client:
        status = await readiness.look(client)
        assert status.state == "unauthorized" and status.http_status == 401
        assert WRONG not in json.dumps(status.to_dict()) and "***" in status.message
        async with client.chat_stream(ask("hi")) as stream:
            events = [e async for e in stream]
        err = events[-1]
        assert isinstance(err, StreamError) and err.kind == "unauthorized" and WRONG not in err.message
        assert WRONG not in repr(client)
    async with ApiClient(server.url, api_key="revoked") as client:
        assert (await readiness.look(client)).state == "unauthorized"      # 403


async def test_the_environment_key_is_used(server: OpenAIServer, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    assert (await readiness.probe(server.url, ALIAS, gateway=True)).ok        # --api-url: the convention
    # our own engine through the tunnel never gets the operator's key for some other service
    assert (await readiness.probe(server.url, ALIAS)).state == "unauthorized"
    async with ApiClient(server.url) as client:
        assert (await readiness.look(client)).state == "unauthorized"


async def test_stream_without_usage_or_role_chunk_is_estimated(server: OpenAIServer) -> None:
    events = await events_of(server.url, ask("hello"), api_key=KEY, stream_interval=0)
    done = events[-1]
    assert isinstance(done, Finished) and not any(isinstance(e, RoleStarted) for e in events)
    assert done.result.content == "Hello from the other server." and done.result.usage is None
    assert done.result.model == ALIAS and done.finish_reason == "stop"
    stats = done.stats
    assert stats.completion_tokens is None and stats.decode_tps is None       # never as exact
    assert stats.tokens_estimated and stats.estimated_tokens == 6
    assert stats.ttft_s is not None and stats.estimated_decode_tps is not None


async def test_tool_call_repeated_per_delta_is_one_call_named_once(server: OpenAIServer) -> None:
    events = await events_of(server.url, ask("weather in Paris?", tools=[TOOL]), api_key=KEY)
    done = events[-1]
    assert isinstance(done, Finished) and done.finish_reason == "tool_calls"
    (call,) = done.result.tool_calls
    assert (call.id, call.name, call.arguments()) == ("call_abc", "get_weather", {"city": "Paris"})
    deltas = [e for e in events if isinstance(e, ToolCallDelta)]
    assert [d.name for d in deltas] == ["get_weather", None, None]
    assert [d.id for d in deltas] == ["call_abc", None, None]


async def test_http_500_traceback_is_a_bounded_one_line_error(server: OpenAIServer) -> None:
    events = await events_of(server.url, ask("hi", model="no-such-model"), api_key=KEY)
    err = events[-1]
    assert isinstance(err, StreamError) and err.kind == "http_error" and err.status == 500
    assert "ValueError: model 'no-such-model' not found" in err.message
    assert "\n" not in err.message and len(err.message) < 400 and "File " not in err.message
    assert "500" in err.remedy


async def test_pings_are_not_progress(server: OpenAIServer) -> None:
    t0 = time.monotonic()
    events = await events_of(server.url, ask("ping-only please"), api_key=KEY,
                             deadlines=StreamDeadlines(1.0, 1.0))
    err = events[-1]
    assert isinstance(err, StreamError) and err.kind == "first_token_timeout"
    assert time.monotonic() - t0 < 5


# --- the CLI, as a subprocess ----------------------------------------------------------------------


def test_chat_end_to_end_with_a_key(server: OpenAIServer, tmp_path: Path) -> None:
    run = cli(tmp_path, "chat", "hello", "--no-thinking", "--api-url", server.url, "--api-key", KEY)
    assert run.returncode == 0, run.stderr
    assert run.stdout == "Hello from the other server.\n"
    assert "~6 tokens (estimated" in run.stderr and "~" in run.stderr
    assert server.state.requests[-1]["model"] == ALIAS            # the only model listed
    as_json = cli(tmp_path, "chat", "hello", "--no-thinking", "--api-url", server.url, "--json",
                  env_key=KEY)
    assert as_json.returncode == 0, as_json.stderr
    data = json.loads(as_json.stdout)
    assert data["usage"] is None and data["tokens_estimated"] is True and data["decode_tps"] is None
    assert data["estimated"]["completion_tokens"] == 6 and "one token per" in data["estimated"]["method"]
    assert data["model"] == ALIAS and data["model_requested"] == ALIAS
    no_secret_in(tmp_path, run.stdout, run.stderr, as_json.stdout, as_json.stderr)


def test_chat_tool_call_through_the_cli(server: OpenAIServer, tmp_path: Path) -> None:
    tools = tmp_path / "tools.json"
    tools.write_text(json.dumps([TOOL]))
    run = cli(tmp_path, "chat", "weather in Paris?", "--no-thinking", "--tools", str(tools), "--api-url",
              server.url, "--json", env_key=KEY)
    assert run.returncode == 0, run.stderr
    (call,) = json.loads(run.stdout)["tool_calls"]
    assert call["name"] == "get_weather" and call["arguments"] == {"city": "Paris"}
    no_secret_in(tmp_path, run.stdout, run.stderr)


def test_chat_without_or_with_a_wrong_key(server: OpenAIServer, tmp_path: Path) -> None:
    t0 = time.monotonic()
    none = cli(tmp_path, "chat", "hi", "--api-url", server.url, "--wait", "30")
    assert time.monotonic() - t0 < 15                              # a refused key is not waited out
    assert none.returncode == 1 and "API key needed or refused" in none.stderr
    assert "--api-key" in none.stderr and "OPENAI_API_KEY" in none.stderr
    wrong = cli(tmp_path, "chat", "hi", "--api-url", server.url, "--api-key", WRONG, "--json")
    assert wrong.returncode == 1 and "API key needed or refused" in wrong.stderr
    assert json.loads(wrong.stdout)["api"]["state"] == "unauthorized"
    no_secret_in(tmp_path, none.stdout, none.stderr, wrong.stdout, wrong.stderr)


def test_model_selection_rules(several: OpenAIServer, tmp_path: Path) -> None:
    ambiguous = cli(tmp_path, "chat", "hi", "--api-url", several.url, env_key=KEY)
    assert ambiguous.returncode == 2
    assert "alpha-1b" in ambiguous.stderr and "beta-70b" in ambiguous.stderr and "--model" in ambiguous.stderr
    unlisted = cli(tmp_path, "chat", "hi", "--api-url", several.url, "--model", "gamma", "--json",
                   env_key=KEY)
    assert unlisted.returncode == 2 and json.loads(unlisted.stdout)["error"]["code"] == "usage"
    assert "gamma" in unlisted.stderr and "alpha-1b, beta-70b" in unlisted.stderr
    chosen = cli(tmp_path, "chat", "hi", "--no-thinking", "--api-url", several.url, "--model", "beta-70b",
                 "--json", env_key=KEY)
    assert chosen.returncode == 0, chosen.stderr
    assert several.state.requests[-1]["model"] == "beta-70b"
    answered = json.loads(chosen.stdout)                          # the server answers with its own alias
    assert answered["model_requested"] == "beta-70b" and answered["model"] == ALIAS
    smoke = cli(tmp_path, "smoke", "--api-url", several.url, env_key=KEY)
    assert smoke.returncode == 2 and "FAIL  models" in smoke.stdout and "--model" in smoke.stdout
    no_secret_in(tmp_path, ambiguous.stderr, unlisted.stdout, unlisted.stderr, chosen.stdout, chosen.stderr,
                 smoke.stdout, smoke.stderr)


def test_smoke_passes_against_the_other_server(server: OpenAIServer, tmp_path: Path) -> None:
    run = cli(tmp_path, "smoke", "--api-url", server.url, "--api-key", KEY)
    assert run.returncode == 0, run.stdout + run.stderr
    assert "PASS  health" in run.stdout and "no /health" in run.stdout
    assert "estimated" in run.stdout and "smoke test passed" in run.stdout
    as_json = cli(tmp_path, "smoke", "--api-url", server.url, "--json", env_key=KEY)
    assert as_json.returncode == 0 and json.loads(as_json.stdout)["passed"] is True
    no_secret_in(tmp_path, run.stdout, run.stderr, as_json.stdout, as_json.stderr)
