"""A real HTTP server (aiohttp on 127.0.0.1) that misbehaves on purpose, as a broken engine or a hostile
gateway could: the cockpit's client talks to it exactly as to vLLM (``--api-url`` for the CLI).

It runs on a loop of its own in a thread, so the same server serves async tests and the synchronous CLI
(whose ``main`` runs its own event loop). The first path segment picks the behaviour; every mode serves
``/health``, ``/v1/models`` and ``/v1/chat/completions`` under it, well behaved unless the mode says
otherwise:

  /garbage        stream: a token, then a line that is no SSE field and a ``data:`` line that is not JSON
  /nodone         stream: a token and a finish chunk, then the body ends without ``data: [DONE]``
  /hugeevent      stream: a token, then one event that never ends (4 MiB and counting)
  /endless        /health, /v1/models and a non-streamed answer: a body without end
  /flood          stream: 8 KiB tokens as fast as the client reads, forever
  /trickle        every answer one byte a second
  /comments/<ms>  stream: only SSE comments, one every <ms>
  /keepalive/<ms> stream: a token, then only SSE comments, one every <ms>
  /reset          stream: a token, then the connection is reset (RST)
  /status/<code>  every request answers <code>; the error message holds terminal escapes
  /badusage/<v>   stream: a token, then ``usage`` malformed (v = string | types | huge)
  /nested         stream: a token, then a chunk of 100 000 ``[``; /v1/models and a non-streamed answer too
  /escapes        a finished answer (thinking, content, a tool call) full of terminal escapes and markup
  /escmodels      /v1/models lists only a model whose name holds escapes
"""

from __future__ import annotations

import asyncio
import json
import socket
import struct
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web

from cockpit.constants import SERVED_MODEL

PARTIAL = "Partial answer"
"""The text every misbehaving stream sends before it misbehaves (the client must keep it)."""

ESCAPES = (
    "copy \x1b]52;c;cm0gLXJmIH4=\x07 title \x1b]0;pwned\x07 clear \x1b[2J\x1b[H moved \x1b[10;10H "
    "link \x1b]8;;http://evil.example/\x1b\\click\x1b]8;;\x1b\\ bell \x07 c1 \x9b31m "
    "markup [bold red]not bold[/] [link=http://x]x[/link]"
)
"""Terminal escapes of every kind that matters (OSC 52 clipboard, OSC 0 title, clear screen, cursor
move, OSC 8 hyperlink, BEL, a C1 CSI) and Rich-markup-like text."""

NESTED = "[" * 100_000
EVIL_MODEL = "evil\x1b]0;title\x07\x1b[2J"
ERROR_ESCAPES = "engine says \x1b]52;c;aGFjaw==\x07 \x1b]0;owned\x07 \x1b[2J no"


@dataclass
class HostileState:
    """What tests inspect: bytes written per route and how often a client left mid-answer."""

    base: str = ""
    sent: dict[str, int] = field(default_factory=dict)
    left: threading.Event = field(default_factory=threading.Event)
    requests: int = 0

    def count(self, mode: str, n: int) -> None:
        self.sent[mode] = self.sent.get(mode, 0) + n


def _chunk(delta: dict[str, Any] | None = None, *, finish: str | None = None, model: str = SERVED_MODEL,
           **extra: Any) -> bytes:
    body: dict[str, Any] = {
        "id": "chatcmpl-hostile", "object": "chat.completion.chunk", "created": 1764456000, "model": model,
        "choices": [] if delta is None else [{"index": 0, "delta": delta, "finish_reason": finish}],
        **extra,
    }
    return b"data: " + json.dumps(body, separators=(",", ":")).encode() + b"\n\n"


START = _chunk({"role": "assistant", "content": ""}) + _chunk({"content": PARTIAL})
DONE = b"data: [DONE]\n\n"
BAD_USAGE = {
    "string": "lots",
    "types": {"prompt_tokens": "many", "completion_tokens": [1], "total_tokens": {"n": 1}},
    "huge": {"prompt_tokens": 1, "completion_tokens": 1e400, "total_tokens": 2},
}


def _escape_answer() -> bytes:
    call = {"index": 0, "id": "call-\x1b]0;t\x07", "type": "function",
            "function": {"name": "get_\x1b[2Jweather", "arguments": json.dumps({"city": ESCAPES})}}
    return b"".join([
        _chunk({"role": "assistant", "content": ""}, model="m\x1b]0;title\x07"),
        _chunk({"reasoning": "thinking " + ESCAPES + "\n"}),
        _chunk({"content": "line one " + ESCAPES + "\nline two\r\n"}),
        _chunk({"tool_calls": [call]}),
        _chunk({}, finish="stop"),
        _chunk(None, usage={"prompt_tokens": 5, "completion_tokens": 9, "total_tokens": 14}),
        DONE,
    ])


def _completion(content: str) -> dict[str, Any]:
    return {"id": "chatcmpl-hostile", "object": "chat.completion", "model": SERVED_MODEL,
            "choices": [{"index": 0, "message": {"role": "assistant", "content": content},
                         "finish_reason": "stop"}],
            "usage": {"prompt_tokens": 5, "completion_tokens": 9, "total_tokens": 14}}


def _models(*names: str) -> bytes:
    return json.dumps({"object": "list", "data": [{"id": n, "object": "model"} for n in names]}).encode()


def _gone(request: web.Request) -> bool:
    return request.transport is None or request.transport.is_closing()


async def _pause(request: web.Request, seconds: float) -> None:
    """Sleep, raising ConnectionResetError as soon as the client is gone."""
    loop = asyncio.get_running_loop()
    end = loop.time() + seconds
    while (left := end - loop.time()) > 0:
        if _gone(request):
            raise ConnectionResetError("the client left")
        await asyncio.sleep(min(left, 0.02))


def build_app(state: HostileState) -> web.Application:
    async def open_body(request: web.Request, ctype: str, status: int = 200) -> web.StreamResponse:
        resp = web.StreamResponse(status=status, headers={"Content-Type": ctype, "Cache-Control": "no-cache"})
        await resp.prepare(request)
        return resp

    async def endless(request: web.Request, resp: web.StreamResponse, mode: str, piece: bytes) -> None:
        while True:
            await resp.write(piece)
            state.count(mode, len(piece))
            await asyncio.sleep(0)

    async def trickle(request: web.Request, resp: web.StreamResponse, mode: str, body: bytes) -> None:
        for i in range(len(body)):
            await resp.write(body[i : i + 1])
            state.count(mode, 1)
            await _pause(request, 1.0)

    def reset(request: web.Request) -> None:
        """Close with an RST: SO_LINGER 0, then abort."""
        assert request.transport is not None
        sock = request.transport.get_extra_info("socket")
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        request.transport.abort()

    async def plain(request: web.Request, kind: str) -> web.StreamResponse:
        mode, arg = request.match_info["mode"], request.match_info.get("arg", "")
        state.requests += 1
        body = _models(SERVED_MODEL) if kind == "models" else b""
        if kind == "chat":
            body = json.dumps(_completion("The ocean is vast. It is deep.")).encode()
        try:
            if mode == "status":
                err = {"error": {"message": ERROR_ESCAPES, "type": "InternalServerError", "code": int(arg)}}
                return web.json_response(err, status=int(arg))
            if mode == "endless":
                resp = await open_body(request, "application/json")
                await endless(request, resp, mode, b"x" * 65536 if kind == "health" else b"[1," * 20000)
            if mode == "trickle":
                resp = await open_body(request, "application/json")
                await trickle(request, resp, mode, body or b"ok")
            if mode == "nested" and kind != "health":
                return web.Response(body=NESTED.encode(), content_type="application/json")
            if mode == "escmodels" and kind == "models":
                return web.Response(body=_models(EVIL_MODEL), content_type="application/json")
        except (ConnectionResetError, ConnectionError):
            state.left.set()
            return web.Response()
        if kind == "health":
            return web.Response(body=b"")
        return web.Response(body=body, content_type="application/json")

    async def health(request: web.Request) -> web.StreamResponse:
        return await plain(request, "health")

    async def models(request: web.Request) -> web.StreamResponse:
        return await plain(request, "models")

    async def chat(request: web.Request) -> web.StreamResponse:
        body = await request.json()
        mode, arg = request.match_info["mode"], request.match_info.get("arg", "")
        if not body.get("stream") or mode == "status":
            return await plain(request, "chat")
        state.requests += 1
        resp = await open_body(request, "text/event-stream")
        try:
            if mode == "escapes":
                await resp.write(_escape_answer())
            elif mode == "garbage":
                await resp.write(START + b"this line is no sse field\n\ndata: {not json at all}\n\n")
                await _pause(request, 600)
            elif mode == "nodone":
                await resp.write(START + _chunk({}, finish="stop"))
            elif mode == "hugeevent":
                await resp.write(START + b'data: {"choices":[{"index":0,"delta":{"content":"')
                for _ in range(64):
                    await resp.write(b"x" * 65536)
                    state.count(mode, 65536)
            elif mode == "flood":
                await resp.write(START)
                await endless(request, resp, mode, _chunk({"content": "y" * 8192}))
            elif mode == "trickle":
                await trickle(request, resp, mode, START)
            elif mode in ("comments", "keepalive"):
                await resp.write(START if mode == "keepalive" else START[: START.index(b"\n\n") + 2])
                while True:
                    await _pause(request, int(arg) / 1000)
                    await resp.write(b": keep-alive\n\n")
                    state.count(mode, 1)
            elif mode == "reset":
                await resp.write(START)
                await asyncio.sleep(0.1)
                reset(request)
                return resp
            elif mode == "badusage":
                await resp.write(START + _chunk(None, usage=BAD_USAGE[arg]))
                await _pause(request, 600)
            elif mode == "nested":
                await resp.write(START + b"data: " + NESTED.encode() + b"\n\n")
                await _pause(request, 600)
            else:
                await resp.write(START + _chunk({}, finish="stop") + DONE)
            await resp.write_eof()
        except (ConnectionResetError, ConnectionError):
            state.left.set()
        return resp

    app = web.Application()
    for prefix in ("/{mode}", "/{mode}/{arg}"):
        app.router.add_get(prefix + "/health", health)
        app.router.add_get(prefix + "/v1/models", models)
        app.router.add_post(prefix + "/v1/chat/completions", chat)
    return app


@contextmanager
def hostile_server() -> Iterator[HostileState]:
    """Run the server on 127.0.0.1 (a free port) in a thread of its own while the block runs."""
    state = HostileState()
    ready = threading.Event()
    loop = asyncio.new_event_loop()
    stop: list[asyncio.Event] = []

    async def main() -> None:
        runner = web.AppRunner(build_app(state), shutdown_timeout=1.0)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        port = runner.addresses[0][1]
        state.base = f"http://127.0.0.1:{port}"
        stop.append(asyncio.Event())
        ready.set()
        await stop[0].wait()
        await runner.cleanup()

    thread = threading.Thread(target=loop.run_until_complete, args=(main(),), daemon=True)
    thread.start()
    assert ready.wait(10), "the hostile server did not start"
    try:
        yield state
    finally:
        loop.call_soon_threadsafe(stop[0].set)
        thread.join(10)
        loop.close()
