"""Credentials in an API URL authenticate the requests and are never shown."""

from __future__ import annotations

import json

import pytest
from aiohttp import web

from cockpit.api.chat import ChatRequest
from cockpit.api.client import ApiClient
from cockpit.api.urls import redact, split_credentials
from cockpit.constants import SERVED_MODEL

KEY = "sk-PLANTED-0123456789"


def test_split_and_redact() -> None:
    assert split_credentials("http://127.0.0.1:8000") == ("http://127.0.0.1:8000", None)
    assert split_credentials(f"http://r37:{KEY}@h:1/v") == ("http://h:1/v", ("r37", KEY))
    assert split_credentials("https://u%40x:p%3Aw@h") == ("https://h", ("u@x", "p:w"))
    assert redact(f"http://r37:{KEY}@h:1") == "http://r37:***@h:1"
    assert KEY not in redact(f"http://r37:{KEY}@h:1")


@pytest.fixture
async def auth_server():  # type: ignore[no-untyped-def]
    seen: list[str | None] = []

    async def health(request: web.Request) -> web.Response:
        seen.append(request.headers.get("Authorization"))
        return web.Response(status=200)

    async def models(request: web.Request) -> web.Response:
        seen.append(request.headers.get("Authorization"))
        if request.headers.get("Authorization") is None:
            return web.Response(status=401, text="no key")
        return web.json_response({"object": "list", "data": [{"id": SERVED_MODEL, "object": "model"}]})

    async def chat(request: web.Request) -> web.StreamResponse:
        seen.append(request.headers.get("Authorization"))
        resp = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await resp.prepare(request)
        chunk = {"id": "x", "object": "chat.completion.chunk", "model": SERVED_MODEL,
                 "choices": [{"index": 0, "delta": {"role": "assistant", "content": "hi"},
                              "finish_reason": "stop"}]}
        await resp.write(f"data: {json.dumps(chunk)}\n\ndata: [DONE]\n\n".encode())
        return resp

    app = web.Application()
    app.router.add_get("/health", health)
    app.router.add_get("/v1/models", models)
    app.router.add_post("/v1/chat/completions", chat)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    yield port, seen
    await runner.cleanup()


async def test_userinfo_becomes_basic_auth_and_is_never_in_messages(auth_server) -> None:  # type: ignore[no-untyped-def]
    port, seen = auth_server
    async with ApiClient(f"http://r37:{KEY}@127.0.0.1:{port}") as client:
        assert KEY not in client.base_url
        health = await client.health()
        assert health.ok and KEY not in json.dumps(health.to_dict())
        assert [m.id for m in await client.models()] == [SERVED_MODEL]       # 401 without the header
        result = await client.chat_streamed(ChatRequest([{"role": "user", "content": "hello"}]))
        assert result.content == "hi"                                           # the raw http path
    assert seen and all(h is not None and h.startswith("Basic ") for h in seen)
    # nothing answers here: the error message names the URL without the key
    async with ApiClient(f"http://r37:{KEY}@127.0.0.1:1") as client:
        down = await client.health()
    assert not down.ok and KEY not in down.message and KEY not in json.dumps(down.to_dict())
