"""The simulated engine's API, checked with independent clients: the OpenAI SDK and raw httpx (SSE)."""

from __future__ import annotations

import asyncio
import base64
import json
import struct
import subprocess
import zlib
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import httpx
import openai
import pytest
from prometheus_client.parser import text_string_to_metric_families

from cockpit.sim.engine.spawn import start_ready

REPO = Path(__file__).resolve().parents[2]
MODEL = "deepseek-v4.1-flash"
OFF = {"chat_template_kwargs": {"thinking": False}}

TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "get_weather",
            "description": "Get the current weather in a city",
            "parameters": {
                "type": "object",
                "properties": {"city": {"type": "string"}},
                "required": ["city"],
            },
        },
    },
    {
        "type": "function",
        "function": {
            "name": "get_time",
            "description": "Get the local time in a city",
            "parameters": {
                "type": "object",
                "properties": {"city": {"type": "string"}},
                "required": ["city"],
            },
        },
    },
]


def start_engine(tmp: Path, *extra: str) -> tuple[subprocess.Popen[bytes], str]:
    """`serve-ready` in a subprocess; returns it and its base URL once /health answers."""
    return start_ready(tmp / "engine.log", *extra)


@pytest.fixture(scope="module")
def engine_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("engine")


@pytest.fixture(scope="module")
def engine_url(engine_dir: Path) -> Iterator[str]:
    proc, url = start_engine(engine_dir, "--time-scale", "0.05")
    yield url
    proc.terminate()
    assert proc.wait(5) == 0


@pytest.fixture
async def client(engine_url: str) -> AsyncIterator[openai.AsyncOpenAI]:
    c = openai.AsyncOpenAI(base_url=engine_url + "/v1", api_key="none", max_retries=0)
    yield c
    await c.close()


async def sse(url: str, body: dict) -> list[dict | str]:
    """Raw SSE events of a streamed chat completion (JSON objects, and the string "[DONE]")."""
    events: list[dict | str] = []
    async with (
        httpx.AsyncClient(timeout=30) as c,
        c.stream("POST", url + "/v1/chat/completions", json={"stream": True, **body}) as r,
    ):
        assert r.status_code == 200
        assert r.headers["content-type"].startswith("text/event-stream")
        buf = ""
        async for text in r.aiter_text():
            buf += text
            while "\n\n" in buf:
                frame, buf = buf.split("\n\n", 1)
                assert frame.startswith("data: "), frame
                data = frame[len("data: ") :]
                events.append(data if data == "[DONE]" else json.loads(data))
        assert buf == ""
    return events


def png(width: int, height: int, pixel: object) -> str:
    """A data URL of an RGB PNG whose pixel (x, y) colour is pixel(x, y)."""
    raw = b"".join(b"\x00" + b"".join(bytes(pixel(x, y)) for x in range(width)) for y in range(height))  # type: ignore[operator]

    def chunk(kind: bytes, body: bytes) -> bytes:
        return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body))

    data = (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0))
        + chunk(b"IDAT", zlib.compress(raw))
        + chunk(b"IEND", b"")
    )
    return "data:image/png;base64," + base64.b64encode(data).decode()


def image_message(text: str, *urls: str) -> list[dict]:
    parts: list[dict] = [{"type": "text", "text": text}]
    parts += [{"type": "image_url", "image_url": {"url": u}} for u in urls]
    return [{"role": "user", "content": parts}]


RED, GREEN, BLUE, YELLOW = (230, 20, 20), (20, 200, 40), (20, 40, 230), (250, 240, 10)


# --- plain endpoints -----------------------------------------------------------------------------
async def test_health_models_and_schedule(engine_url: str) -> None:
    async with httpx.AsyncClient() as c:
        health = await c.get(engine_url + "/health")
        assert health.status_code == 200 and health.content == b""
        models = (await c.get(engine_url + "/v1/models")).json()
        sched = (await c.get(engine_url + "/sim/schedule")).json()
    assert models["object"] == "list"
    (m,) = models["data"]
    assert m["id"] == MODEL and m["owned_by"] == "vllm" and m["max_model_len"] == 600000
    assert m["parent"] is None and m["permission"][0]["object"] == "model_permission"
    assert sched["sim_only"] is True
    assert sched["single_stream_tok_s"]["prose"] == pytest.approx(50.5, abs=0.01)
    assert sched["aggregate_tok_s"]["prose"]["8"] == pytest.approx(229.28, abs=0.01)


# --- OpenAI SDK ----------------------------------------------------------------------------------
async def test_sdk_non_stream_ocean_and_usage(client: openai.AsyncOpenAI) -> None:
    r = await client.chat.completions.create(
        model=MODEL,
        max_tokens=128,
        temperature=0,
        extra_body=OFF,
        messages=[{"role": "user", "content": "Write two sentences about the ocean."}],
    )
    text = r.choices[0].message.content or ""
    assert text.count(".") == 2 and "ocean" in text.lower()
    assert r.choices[0].finish_reason == "stop"
    assert r.object == "chat.completion"
    assert r.usage is not None and r.usage.completion_tokens > 10
    assert r.usage.total_tokens == r.usage.prompt_tokens + r.usage.completion_tokens


async def test_sdk_stream_counting_and_determinism(client: openai.AsyncOpenAI) -> None:
    async def run() -> tuple[str, int]:
        stream = await client.chat.completions.create(
            model=MODEL,
            stream=True,
            temperature=0,
            extra_body=OFF,
            stream_options={"include_usage": True},
            messages=[{"role": "user", "content": "Count from 1 to 50."}],
        )
        text, usage = "", 0
        async for ch in stream:
            if ch.choices and ch.choices[0].delta.content:
                text += ch.choices[0].delta.content
            if ch.usage:
                usage = ch.usage.completion_tokens
        return text, usage

    first, second = await run(), await run()
    assert first[0] == ", ".join(str(i) for i in range(1, 51))
    assert first == second


async def test_sdk_single_word_and_max_tokens(client: openai.AsyncOpenAI) -> None:
    r = await client.chat.completions.create(
        model=MODEL,
        temperature=0,
        extra_body=OFF,
        max_tokens=10,
        messages=[{"role": "user", "content": "Reply with the single word OK."}],
    )
    assert r.choices[0].message.content == "OK"
    r = await client.chat.completions.create(
        model=MODEL,
        extra_body=OFF,
        max_completion_tokens=7,
        messages=[{"role": "user", "content": "Tell me about forests."}],
    )
    assert r.choices[0].finish_reason == "length" and r.usage is not None and r.usage.completion_tokens == 7


async def test_sdk_stop_string(client: openai.AsyncOpenAI) -> None:
    r = await client.chat.completions.create(
        model=MODEL,
        temperature=0,
        extra_body=OFF,
        stop=[", 5,"],
        messages=[{"role": "user", "content": "Count from 1 to 20."}],
    )
    assert r.choices[0].message.content == "1, 2, 3, 4"
    assert r.choices[0].finish_reason == "stop"


async def test_sdk_needle(client: openai.AsyncOpenAI) -> None:
    filler = " ".join(f"Sentence {i} is about nothing in particular." for i in range(200))
    prompt = f"{filler} The secret code is PLUM-7731. {filler}\n\nWhat is the secret code?"
    r = await client.chat.completions.create(
        model=MODEL,
        temperature=0,
        extra_body=OFF,
        max_tokens=50,
        messages=[{"role": "user", "content": prompt}],
    )
    assert "PLUM-7731" in (r.choices[0].message.content or "")
    assert r.usage is not None and r.usage.prompt_tokens > 2000


async def test_sdk_tools_auto_parallel_round_trip_forced(client: openai.AsyncOpenAI) -> None:
    msgs = [{"role": "user", "content": "What is the weather in Paris right now?"}]
    r = await client.chat.completions.create(
        model=MODEL, temperature=0, extra_body=OFF, tools=TOOLS, messages=msgs
    )
    choice = r.choices[0]
    assert choice.finish_reason == "tool_calls"
    (call,) = choice.message.tool_calls or []
    assert call.function.name == "get_weather" and json.loads(call.function.arguments) == {"city": "Paris"}
    assert call.id.startswith("chatcmpl-tool-")

    r = await client.chat.completions.create(
        model=MODEL,
        temperature=0,
        extra_body=OFF,
        tools=TOOLS,
        messages=[{"role": "user", "content": "What's the weather in Tokyo and in London?"}],
    )
    calls = r.choices[0].message.tool_calls or []
    assert [json.loads(c.function.arguments)["city"] for c in calls] == ["Tokyo", "London"]
    assert r.choices[0].finish_reason == "tool_calls"

    follow = [
        *msgs,
        {"role": "assistant", "content": None, "tool_calls": [call.model_dump()]},
        {"role": "tool", "tool_call_id": call.id, "content": json.dumps({"temp_c": 17, "sky": "cloudy"})},
    ]
    r = await client.chat.completions.create(
        model=MODEL, temperature=0, extra_body=OFF, tools=TOOLS, messages=follow
    )
    text = r.choices[0].message.content or ""
    assert "17" in text and "cloudy" in text and r.choices[0].finish_reason == "stop"

    r = await client.chat.completions.create(
        model=MODEL,
        temperature=0,
        extra_body=OFF,
        tools=TOOLS,
        tool_choice={"type": "function", "function": {"name": "get_time"}},
        messages=[{"role": "user", "content": "What time is it in Berlin?"}],
    )
    names = [c.function.name for c in r.choices[0].message.tool_calls or []]
    assert "get_time" in names and "get_weather" in names  # the card's quirk
    assert r.choices[0].finish_reason == "stop"
    r = await client.chat.completions.create(
        model=MODEL,
        temperature=0,
        extra_body=OFF,
        tools=TOOLS[1:],
        tool_choice={"type": "function", "function": {"name": "get_time"}},
        messages=[{"role": "user", "content": "What time is it in Berlin?"}],
    )
    assert [c.function.name for c in r.choices[0].message.tool_calls or []] == ["get_time"]


async def test_sdk_images(client: openai.AsyncOpenAI) -> None:
    stripes = png(60, 20, lambda x, y: (RED, GREEN, BLUE)[x // 20])
    grid = png(40, 40, lambda x, y: ((RED, GREEN), (BLUE, YELLOW))[y // 20][x // 20])
    red, blue = png(16, 16, lambda x, y: RED), png(16, 16, lambda x, y: BLUE)

    async def ask(*urls: str) -> str:
        r = await client.chat.completions.create(
            model=MODEL,
            temperature=0,
            extra_body=OFF,
            max_tokens=200,
            messages=image_message("Describe the image(s).", *urls),
        )
        return (r.choices[0].message.content or "").lower()

    text = await ask(stripes)
    assert (
        "three" in text and "stripes" in text and text.index("red") < text.index("green") < text.index("blue")
    )
    text = await ask(grid)
    assert "top-left red" in text and "top-right green" in text and "bottom-left blue" in text
    assert "bottom-right yellow" in text
    text = await ask(red, blue)
    assert "two images" in text and "red" in text and "blue" in text
    with pytest.raises(openai.BadRequestError) as err:
        await ask(*[red] * 5)
    assert err.value.status_code == 400


async def test_sdk_errors(client: openai.AsyncOpenAI) -> None:
    with pytest.raises(openai.NotFoundError):
        await client.chat.completions.create(model="nope", messages=[{"role": "user", "content": "hi"}])
    with pytest.raises(openai.BadRequestError):
        await client.chat.completions.create(model=MODEL, messages=[])
    with pytest.raises(openai.BadRequestError) as err:
        await client.chat.completions.create(
            model=MODEL,
            messages=[{"role": "user", "content": "hi"}],
            extra_body={"reasoning_effort": "extreme"},
        )
    assert "reasoning_effort" in str(err.value)


async def test_raw_error_shapes(engine_url: str) -> None:
    async with httpx.AsyncClient() as c:
        bad = await c.post(
            engine_url + "/v1/chat/completions",
            content=b"{not json",
            headers={"content-type": "application/json"},
        )
        missing = await c.post(engine_url + "/v1/chat/completions", json={"model": MODEL})
        too_long = await c.post(
            engine_url + "/v1/chat/completions",
            json={"messages": [{"role": "user", "content": "hi"}], "max_tokens": 700000},
        )
    for r in (bad, missing, too_long):
        assert r.status_code == 400
        err = r.json()["error"]
        assert set(err) == {"message", "type", "param", "code"}
        assert err["type"] == "BadRequestError" and err["code"] == 400
    assert "maximum context length" in too_long.json()["error"]["message"]


# --- raw SSE ---------------------------------------------------------------------------------------
def deserts(max_tokens: int, **stream_options: bool) -> dict[str, object]:
    """A streamed, greedy, thinking-off request about deserts with these `stream_options`."""
    return {"messages": [{"role": "user", "content": "Tell me about deserts."}], "max_tokens": max_tokens,
            "temperature": 0, "stream_options": stream_options, **OFF}


async def test_sse_framing_role_first_multi_token_usage(engine_url: str) -> None:
    events = await sse(engine_url, deserts(120, include_usage=True))
    assert events[-1] == "[DONE]"
    chunks = [e for e in events if isinstance(e, dict)]
    first = chunks[0]["choices"][0]
    assert first["delta"] == {"role": "assistant", "content": ""}
    body = [c for c in chunks[1:] if c["choices"]]
    for c in chunks:
        assert c["object"] == "chat.completion.chunk" and c["model"] == MODEL
    for c in body:
        delta = c["choices"][0]["delta"]
        assert set(delta) <= {"content"} and "usage" not in c
        assert "reasoning" not in delta and "tool_calls" not in delta and "role" not in delta
    assert body[-1]["choices"][0]["finish_reason"] == "length"
    assert all(c["choices"][0]["finish_reason"] is None for c in body[:-1])
    usage_chunk = chunks[-1]
    assert usage_chunk["choices"] == []
    usage = usage_chunk["usage"]
    assert usage["completion_tokens"] == 120
    assert usage["completion_tokens_details"]["reasoning_tokens"] == 0
    # K3 speculation: fewer chunks than tokens, and some chunks carry several tokens
    assert len(body) < 100
    assert max(len(c["choices"][0]["delta"].get("content", "")) for c in body) > 12


async def test_sse_continuous_usage_counts_up_on_every_chunk(engine_url: str) -> None:
    events = await sse(engine_url, deserts(60, include_usage=True, continuous_usage_stats=True))
    chunks = [e for e in events if isinstance(e, dict)]
    counts = [c["usage"]["completion_tokens"] for c in chunks]
    assert counts[0] == 0 and counts == sorted(counts) and counts[-1] == 60
    assert all(c["usage"]["total_tokens"] == c["usage"]["prompt_tokens"] + n for c, n in zip(chunks, counts,
                                                                                           strict=True))
    assert len(set(counts)) > 10  # it moves with the tokens, not only at the end


async def test_sse_reasoning_effort_scales(engine_url: str) -> None:
    async def reasoning_tokens(effort: str | int) -> tuple[int, list[dict]]:
        events = await sse(
            engine_url,
            {
                "messages": [{"role": "user", "content": "Reply with the single word OK."}],
                "temperature": 0,
                "reasoning_effort": effort,
                "stream_options": {"include_usage": True},
            },
        )
        chunks = [e for e in events if isinstance(e, dict)]
        return chunks[-1]["usage"]["completion_tokens_details"]["reasoning_tokens"], chunks

    low, chunks = await reasoning_tokens("low")
    high, _ = await reasoning_tokens("max")
    mid, _ = await reasoning_tokens(50)
    assert 0 < low < mid < high
    deltas = [c["choices"][0]["delta"] for c in chunks if c["choices"]][1:]
    reasoning = "".join(d.get("reasoning", "") for d in deltas)
    content = "".join(d.get("content", "") for d in deltas)
    assert reasoning and content.endswith("OK")
    first_content = next(i for i, d in enumerate(deltas) if d.get("content"))
    assert all("reasoning" not in d for d in deltas[first_content + 1 :])  # thinking comes first


async def test_sse_tool_call_deltas(engine_url: str) -> None:
    events = await sse(
        engine_url,
        {
            "messages": [{"role": "user", "content": "Weather in Paris and Rome?"}],
            "tools": TOOLS,
            "temperature": 0,
            **OFF,
        },
    )
    chunks = [e for e in events if isinstance(e, dict)]
    tool_deltas = [tc for c in chunks for tc in c["choices"][0]["delta"].get("tool_calls", [])]
    heads = [tc for tc in tool_deltas if "id" in tc]
    assert [h["index"] for h in heads] == [0, 1]
    for h in heads:
        assert h["type"] == "function" and h["function"] == {"name": "get_weather"}
        assert h["id"].startswith("chatcmpl-tool-")
    args: dict[int, str] = {}
    for tc in tool_deltas:
        if "id" not in tc:
            assert set(tc) == {"index", "function"} and set(tc["function"]) == {"arguments"}
            args[tc["index"]] = args.get(tc["index"], "") + tc["function"]["arguments"]
    assert [json.loads(args[i]) for i in (0, 1)] == [{"city": "Paris"}, {"city": "Rome"}]
    assert chunks[-1]["choices"][0]["finish_reason"] == "tool_calls"


# --- metrics ---------------------------------------------------------------------------------------
def metrics(text: str) -> dict[str, float]:
    out: dict[str, float] = {}
    for fam in text_string_to_metric_families(text):
        for s in fam.samples:
            key = s.name + (
                "{"
                + ",".join(
                    f"{k}={v}" for k, v in sorted(s.labels.items()) if k not in ("engine", "model_name")
                )
                + "}"
            )
            out[key] = s.value
            assert s.labels.get("model_name") == MODEL and s.labels.get("engine") == "0"
    return out


async def test_metrics_move_and_match_spec_decode(engine_url: str, engine_dir: Path) -> None:
    async with httpx.AsyncClient() as c:
        before = metrics((await c.get(engine_url + "/metrics")).text)
        events = await sse(
            engine_url,
            {
                "messages": [{"role": "user", "content": "Count from 1 to 300."}],
                "temperature": 0,
                "stream_options": {"include_usage": True},
                **OFF,
            },
        )
        after = metrics((await c.get(engine_url + "/metrics")).text)
    usage = [e for e in events if isinstance(e, dict)][-1]["usage"]

    def d(name: str) -> float:
        return after[name] - before.get(name, 0.0)

    assert d("vllm:generation_tokens_total{}") == usage["completion_tokens"]
    assert d("vllm:prompt_tokens_total{}") + d("vllm:prefix_cache_hits_total{}") == usage["prompt_tokens"]
    assert d("vllm:request_success_total{finished_reason=stop}") == 1
    assert d("vllm:time_to_first_token_seconds_count{}") == 1
    assert d("vllm:e2e_request_latency_seconds_count{}") == 1
    drafts, drafted, accepted = (
        d("vllm:spec_decode_num_drafts_total{}"),
        d("vllm:spec_decode_num_draft_tokens_total{}"),
        d("vllm:spec_decode_num_accepted_tokens_total{}"),
    )
    assert drafted == 3 * drafts
    # every decode step yields 1 + accepted tokens; the first token comes from prefill
    assert drafts + accepted + 1 == usage["completion_tokens"]
    per_pos = [d(f"vllm:spec_decode_num_accepted_tokens_per_pos_total{{position={p}}}") for p in range(3)]
    assert sum(per_pos) == accepted and per_pos[0] >= per_pos[1] >= per_pos[2]
    assert 1 + accepted / drafts > 2.8  # counting is highly predictable
    assert after["vllm:num_requests_running{}"] == 0
    assert (
        after["vllm:time_to_first_token_seconds_bucket{le=+Inf}"]
        == after["vllm:time_to_first_token_seconds_count{}"]
    )
    # the periodic engine log lines (every 10 engine seconds = 0.5 s here) report the busy period
    for _ in range(40):
        log = (engine_dir / "engine.log").read_text()
        if "SpecDecoding metrics: Mean acceptance length:" in log:
            break
        await asyncio.sleep(0.1)
    assert "Engine 000: Avg prompt throughput:" in log and "Avg generation throughput:" in log
    assert "SpecDecoding metrics: Mean acceptance length:" in log
