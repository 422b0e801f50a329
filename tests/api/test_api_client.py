"""ApiClient over real HTTP against the fake engine (aiohttp, 127.0.0.1): streams, errors, timing, cancel."""

from __future__ import annotations

import asyncio
import contextlib
import socket
import struct
from collections.abc import AsyncIterator

import pytest
from apifakes import MODEL, FakeEngine, free_port

from cockpit.api.chat import ChatRequest
from cockpit.api.client import ApiClient
from cockpit.api.errors import ApiError
from cockpit.api.stream import ChatEvent, ContentDelta, Finished, RoleStarted, StreamError, ToolCallDelta

REQ = ChatRequest([{"role": "user", "content": "Write two sentences about the ocean."}])


async def collect(client: ApiClient, request: ChatRequest = REQ) -> list[ChatEvent]:
    async with client.chat_stream(request) as stream:
        return [ev async for ev in stream]


@contextlib.asynccontextmanager
async def client_for(base: str, **kw: float) -> AsyncIterator[ApiClient]:
    client = ApiClient(base, **kw)
    try:
        yield client
    finally:
        await client.aclose()


async def test_stream_replay_and_request_body(fake_engine: FakeEngine) -> None:
    async with client_for(fake_engine.base + "/s/plain_multitoken") as client:
        stream = client.chat_stream(REQ)
        events = [ev async for ev in stream]
    assert isinstance(events[0], RoleStarted)
    fin = events[-1]
    assert isinstance(fin, Finished) and fin.result.usage and fin.result.usage.completion_tokens == 26
    assert stream.result is fin.result and stream.error is None
    assert fin.stats.ttft_s is not None and fin.stats.ttft_s > 0
    body = fake_engine.requests[-1]
    assert body["stream"] is True and body["stream_options"] == {"include_usage": True}
    assert body["chat_template_kwargs"] == {"thinking": True}
    assert body["reasoning_effort"] == "xhigh" and body["temperature"] == 1.0 and body["top_p"] == 0.95
    assert body["model"] == MODEL


@pytest.mark.parametrize("name", ["tool_call_split", "parallel_tools", "reasoning_both", "comments_crlf"])
async def test_drip_in_odd_pieces_gives_same_result(fake_engine: FakeEngine, name: str) -> None:
    async with client_for(fake_engine.base + f"/s/{name}") as client:
        whole = (await collect(client))[-1]
    async with client_for(fake_engine.base + f"/drip/{name},7,1") as client:
        dripped = (await collect(client))[-1]
    assert isinstance(whole, Finished) and isinstance(dripped, Finished)
    w, d = whole.result, dripped.result
    assert (w.content, w.reasoning, w.tool_calls, w.usage, w.finish_reason) == (
        d.content,
        d.reasoning,
        d.tool_calls,
        d.usage,
        d.finish_reason,
    )
    assert dripped.stats.chunks == whole.stats.chunks


async def test_ttft_excludes_role_chunk(fake_engine: FakeEngine) -> None:
    # The server sends the role chunk at once, then waits 300 ms before the first content.
    async with client_for(fake_engine.base + "/slowfirst/plain_multitoken,300") as client:
        events = await collect(client)
    fin = events[-1]
    assert isinstance(fin, Finished)
    assert fin.stats.ttft_s is not None and fin.stats.ttft_s >= 0.3
    assert fin.stats.max_gap_s >= 0.3


async def test_error_event_and_http_errors(fake_engine: FakeEngine) -> None:
    async with client_for(fake_engine.base + "/s/error_before_done") as client:
        err = (await collect(client))[-1]
    assert (
        isinstance(err, StreamError) and err.kind == "server_error" and "maximum model length" in err.message
    )
    async with client_for(fake_engine.base + "/status/400") as client:
        events = await collect(client)
        with pytest.raises(ApiError) as info:
            await client.chat(REQ)
    assert len(events) == 1 and isinstance(events[0], StreamError)
    assert (
        events[0].kind == "http_error" and events[0].status == 400 and "fake failure 400" in events[0].message
    )
    assert events[0].remedy
    assert info.value.kind == "http_error" and info.value.status == 400
    async with client_for(fake_engine.base + "/status/503") as client:
        (err,) = await collect(client)
    assert isinstance(err, StreamError) and err.kind == "engine_dead"
    async with client_for(fake_engine.base + "/html") as client:
        (err,) = await collect(client)
    assert isinstance(err, StreamError) and err.kind == "protocol_error" and "text/html" in err.message


async def test_truncated_body_is_protocol_error(fake_engine: FakeEngine) -> None:
    async with client_for(fake_engine.base + "/s/truncated") as client:
        err = (await collect(client))[-1]
    assert isinstance(err, StreamError) and err.kind == "protocol_error"
    assert err.partial is not None and err.partial.content == "The ocean is"


async def test_health_models_metrics(fake_engine: FakeEngine) -> None:
    async with client_for(fake_engine.base) as client:
        h = await client.health()
        assert h.ok and h.state == "ready" and h.http_status == 200
        models = await client.models()
        assert [m.id for m in models] == [MODEL] and models[0].max_model_len == 600000
        assert "vllm:num_requests_running" in await client.metrics_text()
        fake_engine.health_status = 503
        h = await client.health()
    assert h.state == "engine_dead" and not h.ok and "log" in h.remedy


async def test_non_streaming_chat(fake_engine: FakeEngine) -> None:
    async with client_for(fake_engine.base + "/smoke") as client:
        res = await client.chat(ChatRequest([{"role": "user", "content": "hi"}], thinking=False))
    assert res.content == "The ocean is vast. It is deep." and res.finish_reason == "stop"
    assert res.usage and res.usage.completion_tokens == 10
    body = fake_engine.requests[-1]
    assert body["stream"] is False and "stream_options" not in body and "reasoning_effort" not in body
    assert body["chat_template_kwargs"] == {"thinking": False}


async def test_api_down_is_unreachable() -> None:
    base = f"http://127.0.0.1:{free_port()}"
    async with client_for(base) as client:
        h = await client.health()
        events = await collect(client)
        with pytest.raises(ApiError) as info:
            await client.models()
    assert h.state == "unreachable" and "booting or tunnel down" in h.message and h.remedy
    (err,) = events
    assert isinstance(err, StreamError) and err.kind == "unreachable" and "connection refused" in err.message
    assert info.value.kind == "unreachable"


async def _raw_server(handler) -> tuple[asyncio.Server, str]:  # type: ignore[no-untyped-def]
    server = await asyncio.start_server(handler, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    return server, f"http://127.0.0.1:{port}"


async def test_tunnel_up_engine_down_is_not_ready() -> None:
    # An SSH local forward accepts, then closes when rank 0 refuses: no HTTP response at all.
    async def accept_and_close(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.read(100)
        writer.close()

    server, base = await _raw_server(accept_and_close)
    async with server, client_for(base) as client:
        h = await client.health()
        (err,) = await collect(client)
    assert h.state == "not_ready" and "booting" in h.remedy
    assert isinstance(err, StreamError) and err.kind == "not_ready"


async def test_tunnel_up_engine_down_reset_is_not_ready_too() -> None:
    """The forward may also reset the local connection (it had unread bytes): still "no answer"."""
    async def accept_and_reset(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        sock = writer.get_extra_info("socket")
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))  # close = RST
        await asyncio.sleep(0.05)  # the request is in, unread
        writer.transport.abort()

    server, base = await _raw_server(accept_and_reset)
    async with server, client_for(base) as client:
        h = await client.health()
    assert h.state == "not_ready" and "without a response" in h.message, h


async def test_silent_server_times_out() -> None:
    async def never_answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await asyncio.sleep(30)

    server, base = await _raw_server(never_answer)
    async with server, client_for(base, read_timeout=0.3, health_timeout=0.3) as client:
        h = await client.health()
        (err,) = await collect(client)
        server.close()
    assert h.state == "timeout"
    assert isinstance(err, StreamError) and err.kind == "timeout"


async def test_cancel_closes_the_response(fake_engine: FakeEngine) -> None:
    async with client_for(fake_engine.base + "/endless") as client:
        stream = client.chat_stream(REQ)
        got = 0
        async for ev in stream:
            if isinstance(ev, ContentDelta):
                got += 1
                if got == 3:
                    break
        await stream.aclose()
        await asyncio.wait_for(fake_engine.disconnected.wait(), timeout=10)
        assert stream.stats is not None and stream.stats.ttft_s is not None
        assert stream.result is None and stream.error is None


async def test_task_cancel_closes_the_response(fake_engine: FakeEngine) -> None:
    async with client_for(fake_engine.base + "/endless") as client:
        first = asyncio.Event()

        async def consume() -> None:
            async with client.chat_stream(REQ) as stream:
                async for ev in stream:
                    if isinstance(ev, ContentDelta):
                        first.set()

        task = asyncio.create_task(consume())
        await asyncio.wait_for(first.wait(), timeout=10)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        await asyncio.wait_for(fake_engine.disconnected.wait(), timeout=10)


async def test_proxy_env_is_ignored(fake_engine: FakeEngine, monkeypatch: pytest.MonkeyPatch) -> None:
    with socket.socket() as s:  # a proxy address that refuses
        s.bind(("127.0.0.1", 0))
        dead = s.getsockname()[1]
    for var in ("HTTP_PROXY", "http_proxy", "ALL_PROXY", "all_proxy"):
        monkeypatch.setenv(var, f"http://127.0.0.1:{dead}")
    monkeypatch.delenv("NO_PROXY", raising=False)
    monkeypatch.delenv("no_proxy", raising=False)
    async with client_for(fake_engine.base + "/s/tool_call_split") as client:
        assert (await client.health()).ok
        events = await collect(client)
    fin = events[-1]
    assert isinstance(fin, Finished) and fin.result.tool_calls[0].arguments() == {"city": "Paris"}
    assert sum(isinstance(e, ToolCallDelta) for e in events) == 4


async def test_a_plain_http_client_loads_no_ca_bundle_and_trusts_nothing() -> None:
    """Loading certifi's CAs cost a tenth of a one-off `status`: a client of the tunnel's http URL never
    builds that context; what it holds instead verifies (hostname, certificate) and trusts no CA, so it
    could never pass a TLS peer unchecked. An https client gets certifi's CAs."""
    import ssl

    from cockpit.api import client as client_mod

    client_mod._tls_context.cache_clear()
    async with ApiClient("http://127.0.0.1:9"):
        assert client_mod._tls_context.cache_info().misses == 0
    plain = client_mod._context_for("http://127.0.0.1:9")
    assert plain.verify_mode == ssl.CERT_REQUIRED and plain.check_hostname
    assert plain.cert_store_stats()["x509_ca"] == 0
    async with ApiClient("https://gateway.invalid"):
        assert client_mod._tls_context.cache_info().misses == 1
    assert client_mod._context_for("https://gateway.invalid").cert_store_stats()["x509_ca"] > 10
