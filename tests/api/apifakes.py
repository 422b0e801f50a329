"""A tiny real HTTP server (aiohttp on 127.0.0.1) replaying recorded vLLM SSE streams byte for byte.

Routes (all under an optional prefix, so a test picks the behaviour through the client's base URL):
  /s/<name>                      replay streams/<name>.txt, one write per event
  /drip/<name>/<bytes>/<ms>      replay in pieces of <bytes> with <ms> pauses (split anywhere)
  /slowfirst/<name>/<ms>         send the role chunk, pause <ms>, then the rest
  /endless                       role chunk, then one content chunk every 20 ms until the client leaves
  /comments/<ms>                 role chunk, then only an SSE comment every <ms> until the client leaves
  /idle/<ms>                     role chunk, one content chunk, then every <ms> one of: a comment, an
                                 empty content chunk, a role-only chunk, a usage-only chunk (no token)
  /hang                          role chunk, then nothing (a non-streamed request: no answer at all)
  /trickle                       /health and /v1/models answer one body byte a second
  /status/<code>                 answer <code> with a vLLM error body
  /html                          answer 200 text/html
  /smoke                         behave like the engine for the smoke test (routes by prompt)
"""

from __future__ import annotations

import asyncio
import json
import socket
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from aiohttp import web

STREAMS = Path(__file__).parent / "streams"
MODEL = "deepseek-v4.1-flash"


def stream_bytes(name: str) -> bytes:
    return (STREAMS / f"{name}.txt").read_bytes()


def split_events(raw: bytes) -> list[bytes]:
    """Split at event boundaries (blank lines), keeping the separators, for per-event writes."""
    sep = b"\r\n\r\n" if b"\r\n\r\n" in raw else b"\n\n"
    parts = raw.split(sep)
    out = [p + sep for p in parts[:-1]]
    if parts[-1]:
        out.append(parts[-1])
    return out


@dataclass
class FakeEngine:
    """State of the fake server that tests can set and inspect."""

    base: str = ""
    health_status: int = 200
    models: list[str] = field(default_factory=lambda: [MODEL])
    requests: list[dict[str, Any]] = field(default_factory=list)
    disconnected: asyncio.Event = field(default_factory=asyncio.Event)
    chunks_sent: int = 0
    comments_sent: int = 0


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _sse_response() -> web.StreamResponse:
    resp = web.StreamResponse(status=200)
    resp.content_type = "text/event-stream"
    resp.headers["Cache-Control"] = "no-cache"
    return resp


def _chunk(delta: dict[str, Any]) -> bytes:
    body = {
        "id": "chatcmpl-endless",
        "object": "chat.completion.chunk",
        "created": 1764456000,
        "model": MODEL,
        "choices": [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": None}],
    }
    return b"data: " + json.dumps(body, separators=(",", ":")).encode() + b"\n\n"


NOT_TOKENS: list[bytes] = [
    b": keep-alive\n\n",
    _chunk({"content": ""}),
    _chunk({"role": "assistant"}),
    b'data: {"id":"chatcmpl-endless","object":"chat.completion.chunk","created":1764456000,'
    b'"model":"' + MODEL.encode() + b'","choices":[],"usage":{"prompt_tokens":14,"total_tokens":15,'
    b'"completion_tokens":1}}\n\n',
]
"""What a server may send mid-answer that is not a token (none of it may reset a deadline)."""


async def _until_gone(request: web.Request, state: FakeEngine) -> None:
    """Wait, sending nothing, until the client closed the connection (then mark it)."""
    while request.transport is not None and not request.transport.is_closing():
        await asyncio.sleep(0.02)
    state.disconnected.set()


async def _pause(request: web.Request, seconds: float) -> None:
    """Sleep, but raise ConnectionResetError as soon as the client is gone (a handler is not cancelled
    when its client leaves, and the test server's cleanup would wait for it)."""
    end = asyncio.get_running_loop().time() + seconds
    while (left := end - asyncio.get_running_loop().time()) > 0:
        if request.transport is None or request.transport.is_closing():
            raise ConnectionResetError("the client left")
        await asyncio.sleep(min(left, 0.02))


async def _trickle(request: web.Request, body: bytes, content_type: str) -> web.StreamResponse:
    resp = web.StreamResponse(status=200, headers={"Content-Type": content_type})
    resp.content_length = len(body)
    await resp.prepare(request)
    for i in range(len(body)):
        await resp.write(body[i : i + 1])
        try:
            await _pause(request, 1.0)
        except ConnectionResetError:
            return resp
    await resp.write_eof()
    return resp


def build_app(state: FakeEngine) -> web.Application:
    async def health(request: web.Request) -> web.StreamResponse:
        if request.match_info.get("mode") == "trickle":
            return await _trickle(request, b"ok", "text/plain")
        return web.Response(status=state.health_status, body=b"")

    async def models(request: web.Request) -> web.StreamResponse:
        data = [
            {
                "id": m,
                "object": "model",
                "created": 1764456000,
                "owned_by": "vllm",
                "root": f"/srv/{m}",
                "parent": None,
                "max_model_len": 600000,
                "permission": [],
            }
            for m in state.models
        ]
        if request.match_info.get("mode") == "trickle":
            return await _trickle(request, json.dumps({"object": "list", "data": data}).encode(),
                                  "application/json")
        return web.json_response({"object": "list", "data": data})

    async def metrics(request: web.Request) -> web.Response:
        return web.Response(text=f'vllm:num_requests_running{{engine="0",model_name="{MODEL}"}} 0.0\n')

    async def replay(resp: web.StreamResponse, pieces: list[bytes], pause: float = 0.0) -> None:
        for piece in pieces:
            await resp.write(piece)
            state.chunks_sent += 1
            if pause:
                await asyncio.sleep(pause)

    async def chat(request: web.Request) -> web.StreamResponse:
        body = await request.json()
        state.requests.append(body)
        mode = request.match_info.get("mode", "")
        arg = request.match_info.get("arg", "")
        if mode == "status":
            code = int(arg)
            err = {
                "error": {
                    "message": f"fake failure {code}",
                    "type": "BadRequestError",
                    "param": None,
                    "code": code,
                }
            }
            return web.json_response(err, status=code)
        if mode == "html":
            return web.Response(text="<html>proxy login</html>", content_type="text/html")
        if mode == "smoke":
            return await smoke_chat(request, body)
        if mode == "hang" and not body.get("stream"):
            await _until_gone(request, state)
            return web.Response(status=200)
        resp = _sse_response()
        await resp.prepare(request)
        try:
            if mode == "s":
                await replay(resp, split_events(stream_bytes(arg)))
            elif mode == "drip":
                name, size, ms = arg.split(",")
                raw = stream_bytes(name)
                n = int(size)
                await replay(resp, [raw[i : i + n] for i in range(0, len(raw), n)], int(ms) / 1000)
            elif mode == "slowfirst":
                name, ms = arg.split(",")
                events = split_events(stream_bytes(name))
                await replay(resp, events[:1])
                await asyncio.sleep(int(ms) / 1000)
                await replay(resp, events[1:])
            elif mode == "endless":
                await resp.write(_chunk({"role": "assistant", "content": ""}))
                while True:
                    await resp.write(_chunk({"content": " wave"}))
                    state.chunks_sent += 1
                    await asyncio.sleep(0.02)
            elif mode == "comments":
                await resp.write(_chunk({"role": "assistant", "content": ""}))
                while True:
                    await _pause(request, int(arg) / 1000)
                    await resp.write(b": keep-alive\n\n")
                    state.comments_sent += 1
            elif mode == "idle":
                await resp.write(_chunk({"role": "assistant", "content": ""}))
                await resp.write(_chunk({"content": "The ocean"}))
                state.chunks_sent += 1
                n = 0
                while True:
                    await _pause(request, int(arg) / 1000)
                    await resp.write(NOT_TOKENS[n % len(NOT_TOKENS)])
                    n += 1
                    state.comments_sent += 1
            elif mode == "hang":
                await resp.write(_chunk({"role": "assistant", "content": ""}))
                await _until_gone(request, state)
                return resp
        except (ConnectionResetError, ConnectionError):
            state.disconnected.set()
            return resp
        except asyncio.CancelledError:
            state.disconnected.set()
            raise
        await resp.write_eof()
        return resp

    async def smoke_chat(request: web.Request, body: dict[str, Any]) -> web.StreamResponse:
        prompt = json.dumps(body.get("messages"))
        if not body.get("stream"):
            return web.json_response(
                {
                    "id": "chatcmpl-card",
                    "object": "chat.completion",
                    "created": 1764456000,
                    "model": MODEL,
                    "choices": [
                        {
                            "index": 0,
                            "message": {
                                "role": "assistant",
                                "content": "The ocean is vast. It is deep.",
                                "reasoning": None,
                                "tool_calls": [],
                            },
                            "logprobs": None,
                            "finish_reason": "stop",
                            "stop_reason": None,
                        }
                    ],
                    "usage": {"prompt_tokens": 14, "total_tokens": 24, "completion_tokens": 10},
                }
            )
        name = (
            "counting"
            if "Count from 1 to 30" in prompt
            else "tool_call_split"
            if body.get("tools")
            else "plain_multitoken"
        )
        resp = _sse_response()
        await resp.prepare(request)
        await replay(resp, split_events(stream_bytes(name)))
        await resp.write_eof()
        return resp

    app = web.Application()
    for prefix in ("", "/{mode:s|drip|slowfirst|status|comments|idle}/{arg}",
                   "/{mode:endless|html|smoke|hang|trickle}"):
        app.router.add_get(prefix + "/health", health)
        app.router.add_get(prefix + "/v1/models", models)
        app.router.add_get(prefix + "/metrics", metrics)
        app.router.add_post(prefix + "/v1/chat/completions", chat)
    return app


