"""Servers that are not vLLM: API keys, readiness without /health, model choice, streams without usage,
repeated tool-call names, legacy function_call, 500 tracebacks."""

from __future__ import annotations

import argparse
import json
import pickle
from pathlib import Path

import pytest
from aiohttp import web

from cockpit.api.apikey import ApiKey, key_from_env, parse_key
from cockpit.api.choose import MAX_LISTED, ModelChoiceError, choose_model
from cockpit.api.client import ApiClient
from cockpit.api.errors import REMEDY_KEY, from_status, one_line
from cockpit.api.readiness import look, probe
from cockpit.api.sse import SseEvent
from cockpit.api.stream import ChunkAccumulator, ContentDelta, Finished, ToolCallDelta, Usage
from cockpit.constants import SERVED_MODEL
from cockpit.errorcodes import code_for_api_kind

KEY = "sk-unit-PLANTED-77aa88bb99cc"


def feed(acc: ChunkAccumulator, *chunks: dict[str, object]) -> list[object]:
    out: list[object] = []
    for i, c in enumerate(chunks):
        out += acc.feed(SseEvent(json.dumps(c)), float(i + 1))
    out += acc.feed(SseEvent("[DONE]"), float(len(chunks) + 1))
    return out


def delta(d: dict[str, object], finish: str | None = None) -> dict[str, object]:
    return {"choices": [{"index": 0, "delta": d, "finish_reason": finish}]}


# --- the key ---------------------------------------------------------------------------------------


def test_a_key_never_shows_itself() -> None:
    key = ApiKey(f"  {KEY}\n")
    assert key.bearer() == f"Bearer {KEY}"
    for shown in (str(key), repr(key), f"{key}", f"{key!r}", "{}".format(key),  # noqa: UP032
                  repr(argparse.Namespace(api_key=key))):
        assert KEY not in shown
    with pytest.raises(TypeError):
        json.dumps({"api_key": key})
    with pytest.raises(TypeError):
        pickle.dumps(key)
    assert key == ApiKey(KEY) and key.scrub(f"bad key {KEY}!") == "bad key ***!"


@pytest.mark.parametrize("bad", ["", "   ", "two words", "a\r\nX-Evil: 1", "ключ", "k" * 5000])
def test_an_unusable_key_is_refused_without_echoing_it(bad: str) -> None:
    with pytest.raises(argparse.ArgumentTypeError) as info:
        parse_key(bad)
    assert bad.strip() == "" or bad not in str(info.value)


def test_key_from_env() -> None:
    assert key_from_env({"OPENAI_API_KEY": KEY}) == ApiKey(KEY)
    assert key_from_env({"OPENAI_API_KEY": " "}) is None and key_from_env({}) is None
    assert key_from_env({"OPENAI_API_KEY": "bad key"}) is None


def test_which_key_a_client_sends(monkeypatch: pytest.MonkeyPatch) -> None:
    def auth(client: ApiClient) -> str | None:
        return client._http.headers.get("Authorization")

    monkeypatch.setenv("OPENAI_API_KEY", "sk-from-env")
    assert auth(ApiClient("http://h:1", via="gateway")) == "Bearer sk-from-env"     # a gateway
    assert auth(ApiClient("http://h:1")) is None              # our own engine never gets the operator's key
    assert auth(ApiClient("http://h:1", api_key=KEY)) == f"Bearer {KEY}"
    assert auth(ApiClient("http://u:p@h:1", via="gateway")).startswith("Basic ")  # the URL's credentials
    assert auth(ApiClient("http://u:p@h:1", api_key=KEY)) == f"Bearer {KEY}"  # the key given wins
    assert auth(ApiClient("http://h:1", via="tunnel")) is None
    monkeypatch.delenv("OPENAI_API_KEY")
    client = ApiClient("http://h:1", api_key=KEY)
    assert auth(ApiClient("http://h:1")) is None and KEY not in repr(client) and client.has_key


# --- errors ----------------------------------------------------------------------------------------


def test_401_and_403_say_the_key_is_needed_or_refused() -> None:
    for status in (401, 403):
        err = from_status(status, b'{"error": {"message": "nope"}}', "http://h/v1/models")
        assert err.kind == "unauthorized" and "API key needed or refused" in err.message
        assert err.remedy == REMEDY_KEY and code_for_api_kind(err.kind) == "api-unauthorized"


def test_a_traceback_or_text_body_becomes_one_bounded_line() -> None:
    tb = ("Traceback (most recent call last):\n  File \"/a.py\", line 3, in f\n    g()\n"
          "ValueError: temperature \x1b]52;c;aGk=\x07 too high\n")
    err = from_status(500, tb.encode(), "http://h/v1/chat/completions")
    assert err.kind == "http_error" and err.status == 500
    assert "server traceback, ending: ValueError: temperature" in err.message
    assert "\n" not in err.message and "\x1b" not in err.message and "File" not in err.message
    assert "␛" in err.message
    long = from_status(500, b"x" * 100_000, "http://h")
    assert len(long.message) < 400 and long.message.endswith("…")
    assert from_status(404, b'{"detail":"Not Found"}', "http://h/x").message.endswith(": Not Found")
    assert one_line("a\r\n\tb   c") == "a b c"


# --- model choice ----------------------------------------------------------------------------------


def test_model_choice() -> None:
    assert choose_model([], None, default=SERVED_MODEL, gateway=False) == SERVED_MODEL      # tunnel
    assert choose_model(["x"], None, default=SERVED_MODEL, gateway=True) == "x"
    assert choose_model(["x", SERVED_MODEL], None, default=SERVED_MODEL, gateway=True) == SERVED_MODEL
    assert choose_model(["x", "y"], "y", default=SERVED_MODEL, gateway=True) == "y"
    with pytest.raises(ModelChoiceError) as several:
        choose_model(["x", "y"], None, default=SERVED_MODEL, gateway=True)
    assert several.value.usage and "x, y" in several.value.message and "--model" in several.value.message
    with pytest.raises(ModelChoiceError) as unlisted:
        choose_model(["x"], "z", default=SERVED_MODEL, gateway=False)
    assert unlisted.value.usage and "lists x" in unlisted.value.message
    with pytest.raises(ModelChoiceError) as empty:
        choose_model([], None, default=SERVED_MODEL, gateway=True)
    assert not empty.value.usage
    many = [f"m{i}" for i in range(MAX_LISTED + 5)]
    with pytest.raises(ModelChoiceError) as long:
        choose_model(many, None, default=SERVED_MODEL, gateway=True)
    assert "and 5 more" in long.value.message and f"m{MAX_LISTED}," not in long.value.message


# --- streams ---------------------------------------------------------------------------------------


def test_repeated_tool_call_id_and_name_are_one_call_named_once() -> None:
    acc = ChunkAccumulator(t_start=0.0)
    pieces = ['{"city"', ': "Paris"}']
    out = feed(acc, *[delta({"content": None, "tool_calls": [
        {"index": 0, "id": "c1", "type": "function", "function": {"name": "get_weather", "arguments": p}}],
        "function_call": {"name": "get_weather", "arguments": p}}) for p in pieces],
        delta({}, "tool_calls"))
    done = out[-1]
    assert isinstance(done, Finished)
    (call,) = done.result.tool_calls
    assert call.name == "get_weather" and call.id == "c1" and call.arguments() == {"city": "Paris"}
    assert [(d.id, d.name) for d in out if isinstance(d, ToolCallDelta)] == [("c1", "get_weather"),
                                                                             (None, None)]


def test_vllm_style_tool_call_is_unchanged() -> None:
    acc = ChunkAccumulator(t_start=0.0)
    out = feed(acc, delta({"tool_calls": [{"index": 0, "id": "t", "type": "function",
                                           "function": {"name": "get_", "arguments": ""}}]}),
               delta({"tool_calls": [{"index": 0, "function": {"name": "weather"}}]}),
               delta({"tool_calls": [{"index": 0, "function": {"arguments": "{}"}}]}))
    assert isinstance(out[-1], Finished) and out[-1].result.tool_calls[0].name == "get_weather"


def test_legacy_function_call_alone_is_a_tool_call() -> None:
    acc = ChunkAccumulator(t_start=0.0)
    out = feed(acc, delta({"function_call": {"name": "f", "arguments": '{"a"'}}),
               delta({"function_call": {"arguments": ": 1}"}}), delta({}, "function_call"))
    assert isinstance(out[-1], Finished)
    (call,) = out[-1].result.tool_calls
    assert call.name == "f" and call.arguments() == {"a": 1}


def test_explicit_nulls_no_role_chunk_and_estimated_tokens() -> None:
    acc = ChunkAccumulator(t_start=0.0)
    out = feed(acc, {"id": None, "model": None, "choices": [{"index": 0, "delta": {"content": None,
                                                                                     "role": None}}]},
               delta({"content": "a", "reasoning": None, "tool_calls": None, "refusal": None}),
               delta({"content": "b"}), delta({"content": None}, "stop"),
               {"choices": [], "usage": None, "timings": {"predicted_n": 2}})
    done = out[-1]
    assert isinstance(done, Finished) and done.result.content == "ab"
    assert [e.text for e in out if isinstance(e, ContentDelta)] == ["a", "b"]
    s = done.stats
    assert s.completion_tokens is None and s.decode_tps is None
    assert s.tokens_estimated and s.estimated_tokens == 2
    assert s.estimated_decode_tps == 0.25  # (2 - 1) / (6 - 2)
    assert s.ttft_s == 2.0


def test_with_usage_nothing_is_estimated() -> None:
    acc = ChunkAccumulator(t_start=0.0)
    out = feed(acc, delta({"content": "a"}), delta({"content": "b"}, "stop"),
               {"choices": [], "usage": {"prompt_tokens": 1, "completion_tokens": 5, "total_tokens": 6}})
    assert any(isinstance(e, Usage) for e in out)
    s = out[-1].stats  # type: ignore[attr-defined]
    assert s.completion_tokens == 5 and not s.tokens_estimated and s.estimated_decode_tps is None


# --- readiness -------------------------------------------------------------------------------------


@pytest.fixture
async def server():  # type: ignore[no-untyped-def]
    """`/health` as `app["health"]` says (an HTTP status, or None: no route), `/v1/models` lists one."""
    hits: list[str] = []
    answer = {"health": 200}
    app = web.Application()

    async def health(request: web.Request) -> web.Response:
        hits.append("health")
        return web.Response(status=answer["health"])

    async def models(request: web.Request) -> web.Response:
        hits.append("models")
        return web.json_response({"data": [{"id": SERVED_MODEL, "owned_by": {"odd": 1}}], "meta": {}})

    app.router.add_get("/health", health)
    app.router.add_get("/v1/models", models)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    yield answer, f"http://127.0.0.1:{port}", hits
    await runner.cleanup()


async def test_readiness_with_and_without_health(server) -> None:  # type: ignore[no-untyped-def]
    app, url, hits = server
    async with ApiClient(url) as client:
        status = await look(client)
        assert status.ok and hits == ["health"]          # vLLM: /health only, as before
        app["health"] = 404
        status = await look(client)
        assert status.ok and status.models == (SERVED_MODEL,) and "no /health" in status.message
        app["health"] = 503
        assert (await look(client)).state == "engine_dead"
        app["health"] = 401
        assert (await look(client)).state == "unauthorized"
    app["health"] = 404
    probed = await probe(url, SERVED_MODEL)
    assert probed.ok and "no /health" in probed.message
    app["health"] = 200
    assert (await probe(url, SERVED_MODEL)).message == f"ready: /health 200, /v1/models lists {SERVED_MODEL}"


async def test_only_the_tunnel_marks_its_probes(tmp_path: Path) -> None:
    """The way to the server decides what a client adds: through the cockpit's tunnel its /health,
    /v1/models and /metrics say they are probes (the Logs pane drops their access lines); a gateway the
    operator named, and a program's own URL, get the plain paths."""
    from cockpit.constants import PROBE_QUERY
    from cockpit.sim.engine.spawn import ready_engine

    log = tmp_path / "engine.log"
    with ready_engine(log) as url:
        for way in ("tunnel", "gateway", "direct"):
            async with ApiClient(url, via=way) as client:
                await client.health()
                await client.models()
                await client.metrics_text()
    text = log.read_text()                       # the engine has ended: every line is written
    gets = [line.split('"GET ')[1].split()[0] for line in text.splitlines() if '"GET ' in line]
    probes = [g for g in gets if g.endswith("?" + PROBE_QUERY)]
    assert probes == [f"/health?{PROBE_QUERY}", f"/v1/models?{PROBE_QUERY}", f"/metrics?{PROBE_QUERY}"], gets
    assert gets[-6:] == ["/health", "/v1/models", "/metrics"] * 2
