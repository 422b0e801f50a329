"""The lean streaming path (cockpit.api.rawstream): chunked decoding, body framings, reuse, request bytes."""

from __future__ import annotations

import asyncio
import base64
import contextlib
import socket
import time
from collections.abc import AsyncIterator, Callable

import pytest
from apifakes import split_events, stream_bytes
from hypothesis import given, settings
from hypothesis import strategies as st
from test_api_sse import split_at

from cockpit import kstamp
from cockpit.api import rawstream
from cockpit.api.chat import ChatRequest
from cockpit.api.client import ApiClient
from cockpit.api.errors import ApiError
from cockpit.api.rawstream import ChunkedDecoder, supports
from cockpit.api.stream import ChatEvent, ContentDelta, Finished, StreamError

REQ = ChatRequest([{"role": "user", "content": "Write two sentences about the ocean."}])
SSE_HEAD = b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"


def chunked(pieces: list[bytes]) -> bytes:
    """Chunked framing with an extension on every size line and a trailer."""
    out = b"".join(b"%x;ext=1\r\n%s\r\n" % (len(p), p) for p in pieces if p)
    return out + b"0\r\nX-Trailer: yes\r\n\r\n"


@settings(max_examples=100, deadline=None)
@given(name=st.sampled_from(["plain_multitoken", "unicode", "tool_call_split"]),
       cuts=st.lists(st.integers(min_value=0), max_size=30))
def test_chunked_decoder_split_anywhere(name: str, cuts: list[int]) -> None:
    payload = stream_bytes(name)
    dec = ChunkedDecoder()
    out = b"".join(dec.feed(piece) for piece in split_at(chunked(split_events(payload)), cuts))
    assert out == payload and dec.finished


def test_chunked_decoder_rejects_bad_framing() -> None:
    with pytest.raises(ApiError) as info:
        ChunkedDecoder().feed(b"zz\r\nhello\r\n")
    assert info.value.kind == "protocol_error"
    with pytest.raises(ApiError):
        ChunkedDecoder().feed(b"5\r\nhelloXX0\r\n\r\n")


def test_supports_plain_http_only() -> None:
    assert supports("http://127.0.0.1:8000") and supports("http://gw.lan/prefix")
    assert not supports("https://gateway.example/v1") and not supports("unix:///tmp/sock")


class RawServer:
    """Answers each request on a connection with ``respond(n)`` bytes; records requests and connections."""

    def __init__(self, respond: Callable[[int], bytes], close_after: bool = False) -> None:
        self.respond = respond
        self.close_after = close_after
        self.requests: list[bytes] = []
        self.connections = 0

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                length = next(int(line.split(b":")[1]) for line in head.split(b"\r\n")
                              if line.lower().startswith(b"content-length:"))
                self.requests.append(head + await reader.readexactly(length))
                writer.write(self.respond(len(self.requests)))
                await writer.drain()
                if self.close_after:
                    break
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        writer.close()


@contextlib.asynccontextmanager
async def serving(server: RawServer, userinfo: str = "") -> AsyncIterator[ApiClient]:
    srv = await asyncio.start_server(server.handle, "127.0.0.1", 0)
    port = srv.sockets[0].getsockname()[1]
    client = ApiClient(f"http://{userinfo}127.0.0.1:{port}/pre")
    try:
        async with srv:
            yield client
    finally:
        await client.aclose()


async def collect(client: ApiClient) -> list[ChatEvent]:
    async with client.chat_stream(REQ) as stream:
        return [ev async for ev in stream]


def sse_chunked(n: int) -> bytes:
    """A recorded stream, one chunk per event."""
    body = chunked(split_events(stream_bytes("plain_multitoken")))
    return SSE_HEAD + b"Transfer-Encoding: chunked\r\n\r\n" + body


async def test_request_is_one_write_with_headers_and_auth() -> None:
    server = RawServer(sse_chunked)
    async with serving(server, "op:s%40cret@") as client:
        fin = (await collect(client))[-1]
    assert isinstance(fin, Finished) and fin.result.usage and fin.result.usage.completion_tokens == 26
    (req,) = server.requests
    head, _, body = req.partition(b"\r\n\r\n")
    lines = head.decode().split("\r\n")
    assert lines[0] == "POST /pre/v1/chat/completions HTTP/1.1"
    assert "Accept: text/event-stream" in lines and "User-Agent: r37-cockpit" in lines
    assert "Content-Type: application/json" in lines and f"Content-Length: {len(body)}" in lines
    assert f"Authorization: Basic {base64.b64encode(b'op:s@cret').decode()}" in lines
    assert any(line.startswith("Host: 127.0.0.1:") for line in lines)
    assert b'"stream":true' in body


async def test_finished_connection_is_reused_and_a_closed_one_replaced() -> None:
    server = RawServer(sse_chunked)
    async with serving(server) as client:
        for _ in range(3):
            assert isinstance((await collect(client))[-1], Finished)
    assert server.connections == 1 and len(server.requests) == 3
    closing = RawServer(sse_chunked, close_after=True)  # the server drops each connection after one answer
    async with serving(closing) as client:
        for _ in range(3):
            assert isinstance((await collect(client))[-1], Finished)
    assert closing.connections == 3


@pytest.mark.parametrize("framing", ["length", "close"])
async def test_content_length_and_until_close_bodies(framing: str) -> None:
    payload = stream_bytes("unicode")
    head = SSE_HEAD + (b"Content-Length: %d\r\n\r\n" % len(payload) if framing == "length" else b"\r\n")
    server = RawServer(lambda n: head + payload, close_after=True)
    async with serving(server) as client:
        fin = (await collect(client))[-1]
    assert isinstance(fin, Finished) and fin.result.content == "Océan 🌊 海 — ∞"


async def test_drop_inside_chunked_body_keeps_the_partial_answer() -> None:
    events = split_events(stream_bytes("plain_multitoken"))
    cut = chunked(events)[: len(chunked(events[:3])) - 5]  # inside the framing, before the last chunk
    server = RawServer(lambda n: SSE_HEAD + b"Transfer-Encoding: chunked\r\n\r\n" + cut, close_after=True)
    async with serving(server) as client:
        err = (await collect(client))[-1]
    assert isinstance(err, StreamError) and err.kind == "unreachable" and "dropped" in err.message
    assert err.partial is not None and err.partial.content.startswith("The ocean")


class PacedServer:
    """Answers one streamed request: the head and events[0] at once, then one event every `gap` s.

    Notes the ``time.perf_counter()`` just before each write (same clock as the client's stamps).
    """

    def __init__(self, events: list[bytes], gap: float, block_after_last: float = 0.0) -> None:
        self.events = events
        self.gap = gap
        self.block_after_last = block_after_last  # stall the whole loop after the last write
        self.written: list[float] = []
        self.done = asyncio.Event()

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        head = await reader.readuntil(b"\r\n\r\n")
        length = next(int(line.split(b":")[1]) for line in head.split(b"\r\n")
                      if line.lower().startswith(b"content-length:"))
        await reader.readexactly(length)
        try:
            for i, event in enumerate(self.events):
                if i:
                    await asyncio.sleep(self.gap)
                framed = b"%x\r\n%s\r\n" % (len(event), event)
                if i == len(self.events) - 1:
                    framed += b"0\r\n\r\n"
                prefix = SSE_HEAD + b"Transfer-Encoding: chunked\r\n\r\n" if i == 0 else b""
                self.written.append(time.perf_counter())
                writer.write(prefix + framed)
            if self.block_after_last:
                time.sleep(self.block_after_last)  # the client cannot read before this returns
            await reader.read()  # keep the connection, as the engine does, until the client goes
        except ConnectionError:
            pass
        writer.close()
        self.done.set()


async def stream_from(server: PacedServer, interval: float) -> tuple[list[list[ChatEvent]], Finished]:
    """The client's events grouped by read (a group ends where the stream has nothing buffered)."""
    srv = await asyncio.start_server(server.handle, "127.0.0.1", 0)
    port = srv.sockets[0].getsockname()[1]
    groups: list[list[ChatEvent]] = [[]]
    client = ApiClient(f"http://127.0.0.1:{port}", stream_interval=interval)
    async with srv, client, client.chat_stream(REQ) as stream:
        async for ev in stream:
            groups[-1].append(ev)
            if not stream.buffered:
                groups.append([])
        await client.aclose()
        await asyncio.wait_for(server.done.wait(), 5)
    fin = groups[-2][-1]
    assert isinstance(fin, Finished)
    return [g for g in groups if g], fin


async def test_after_the_first_token_the_socket_is_read_in_frames() -> None:
    events = split_events(stream_bytes("counting"))
    assert len(events) >= 10
    eager, _ = await stream_from(PacedServer(events, 0.01), interval=0)
    framed, fin = await stream_from(PacedServer(events, 0.01), interval=0.05)
    assert len(eager) >= len(events) - 2  # about one read per event
    assert len(framed) <= len(eager) // 2  # several events per read
    assert fin.result.content == "".join(
        ev.text for group in eager for ev in group if isinstance(ev, ContentDelta))


async def test_framed_reads_keep_the_arrival_time_of_the_bytes() -> None:
    """The last bytes are read ~0.4 s late (the client's frame and a stalled loop); timing is not."""
    events = split_events(stream_bytes("plain_multitoken"))
    server = PacedServer(events, 0.005, block_after_last=0.2)
    _, fin = await stream_from(server, interval=0.4)
    read_done = time.perf_counter()
    stats = fin.stats
    assert stats.t_first_token is not None and stats.ttft_s is not None
    assert read_done - server.written[-1] > 0.2  # the client really read the end late
    if kstamp.SO_TIMESTAMPNS is None:
        pytest.skip("no kernel receive timestamps on this platform")
    # the stamps are the kernel's, converted between clocks: within a few microseconds either way
    assert -0.001 < stats.t_first_token - server.written[1] < 0.005  # the first token event is events[1]
    assert -0.001 < stats.t_end - server.written[-1] < 0.005
    assert stats.t_start <= server.written[0]  # TTFT counts from the request write


async def test_a_kept_connection_is_usable_only_while_open_and_quiet() -> None:
    def conn_pair() -> tuple[rawstream._Conn, socket.socket]:
        a, b = socket.socketpair()
        a.setblocking(False)
        return rawstream._Conn(a, "http://x"), b

    quiet, peer = conn_pair()
    assert quiet.usable
    peer.close()
    assert not quiet.usable  # the server closed the idle connection
    chatty, peer2 = conn_pair()
    peer2.send(b"HTTP/1.1 408 Request Timeout\r\n\r\n")
    assert not chatty.usable  # bytes nobody asked for
    for c in (quiet, chatty):
        c.abort()
    peer2.close()


async def test_prepare_opens_a_batch_of_connections_that_the_batch_then_uses() -> None:
    server = RawServer(sse_chunked)
    async with serving(server) as client:
        await client.prepare(8)
        await asyncio.sleep(0.05)  # let the server accept them
        assert server.connections == 8 and not server.requests   # opened, nothing sent yet
        for _ in range(2):  # more than MAX_IDLE are kept between batches once asked for
            results = await asyncio.gather(*(collect(client) for _ in range(8)))
            assert all(isinstance(r[-1], Finished) for r in results)
        await client.prepare(8)   # enough kept: nothing new
        assert server.connections == 8 and len(server.requests) == 16


async def test_prepare_against_a_closed_port_leaves_the_error_to_the_requests() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    async with ApiClient(f"http://127.0.0.1:{port}", connect_timeout=1) as client:
        await client.prepare(4)   # no exception: best effort
        events = await collect(client)
    assert isinstance(events[-1], StreamError) and events[-1].kind == "unreachable"
