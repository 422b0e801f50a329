"""`serve` lets in only a browser that opened this run's secret URL.

A second, raw websocket client (aiohttp, as any local account could run) that sends the right Origin and
Host but not the secret is refused: no session process starts, so no key it sends reaches a TUI. With the
cookie the secret URL gives, the same client's key press reaches the session's process. The session
process here is a recorder (it writes every byte textual-serve sends it to a file), so the test sees
exactly what a TUI would have received. Also: the session cap, the clamped resize, malformed frames.
"""

from __future__ import annotations

import asyncio
import json
import shlex
import sys
import time
from collections.abc import AsyncIterator
from pathlib import Path

import aiohttp
import pytest
from aiohttp.test_utils import TestClient, TestServer

from cockpit.tui.web.server import MAX_SIZE, CockpitServer, clamp_size, same_secret

DEADLINE = 30.0
WS_HEADERS = {"Connection": "Upgrade", "Upgrade": "websocket", "Sec-WebSocket-Version": "13",
              "Sec-WebSocket-Key": "dGhlIHNhbXBsZSBub25jZQ=="}
RECORDER = ("import sys\n"
            "out = open(sys.argv[1], 'ab', buffering=0)\n"
            "while True:\n"
            "    data = sys.stdin.buffer.read1(65536)\n"
            "    if not data:\n"
            "        break\n"
            "    out.write(data)\n")


def recorder_command(record: Path) -> str:
    return "exec " + shlex.join([sys.executable, "-c", RECORDER, str(record)])


@pytest.fixture
async def served(tmp_path: Path) -> AsyncIterator[tuple[CockpitServer, TestClient, Path]]:
    record = tmp_path / "received"
    server = CockpitServer(recorder_command(record), "127.0.0.1", 0, max_sessions=2)
    async with TestClient(TestServer(await server._make_app())) as client:
        yield server, client, record


def origin(client: TestClient) -> str:
    return f"http://{client.host}:{client.port}"


async def wait_recorded(record: Path, needle: bytes) -> bytes:
    deadline = time.monotonic() + DEADLINE
    data = b""
    while time.monotonic() < deadline:
        data = record.read_bytes() if record.exists() else b""
        if needle in data:
            return data
        await asyncio.sleep(0.05)
    raise AssertionError(f"{needle!r} never reached the session's process: {data[-500:]!r}")


async def login(client: TestClient, server: CockpitServer) -> None:
    """What a browser does with the printed URL: the token for the cookie, then the page without it."""
    response = await client.get(f"/?token={server.token}&fontsize=20", allow_redirects=False)
    assert response.status == 303
    assert response.headers["Location"] == "/?fontsize=20"
    cookie = response.headers["Set-Cookie"]
    assert "HttpOnly" in cookie and "SameSite=Strict" in cookie and server.token in cookie
    assert (await client.get("/?fontsize=20")).status == 200


async def test_a_raw_client_with_the_right_origin_but_no_secret_is_refused_and_presses_no_key(
        served: tuple[CockpitServer, TestClient, Path]) -> None:
    server, client, record = served
    headers = {**WS_HEADERS, "Origin": origin(client)}
    for path, extra in [("/ws", {}), ("/ws?token=" + server.token[:-1] + "x", {}),
                        ("/ws", {"Cookie": f"{server.cookie}=wrong"}),
                        ("/ws", {"Cookie": f"r37-cockpit-1={server.token}"})]:    # another port's name
        response = await client.get(path, headers={**headers, **extra})
        assert response.status == 401, path
        assert "secret URL" in await response.text()
    with pytest.raises(aiohttp.WSServerHandshakeError) as refused:
        await client.ws_connect("/ws", headers={"Origin": origin(client)})
    assert refused.value.status == 401
    # the page and every asset need it too; a wrong token gets no cookie
    for path in ("/", "/?token=nope", "/static/js/textual.js", "/download/x"):
        response = await client.get(path, allow_redirects=False)
        assert response.status == 401, path
        assert "Set-Cookie" not in response.headers
    await asyncio.sleep(0.5)
    assert not record.exists(), "a session process started for a client without the secret"


async def test_with_the_cookie_the_same_client_drives_the_session(
        served: tuple[CockpitServer, TestClient, Path]) -> None:
    server, client, record = served
    await login(client, server)
    assert (await client.get("/static/js/textual.js")).status == 200
    async with client.ws_connect("/ws?width=100&height=30", headers={"Origin": origin(client)}) as ws:
        await ws.send_str(json.dumps(["stdin", "4"]))
        data = await wait_recorded(record, b"D\x00\x00\x00\x014")
        # resize frames are clamped like the query string's size; malformed frames are ignored
        await ws.send_str("not json")
        await ws.send_str(json.dumps(["resize", {"width": 20000, "height": 4000}]))
        await ws.send_str(json.dumps(["resize", "big"]))
        await ws.send_str(json.dumps({"stdin": "x"}))
        await ws.send_str(json.dumps(["stdin", 5]))
        await ws.send_str(json.dumps(["stdin", "y"]))
        data = await wait_recorded(record, b"D\x00\x00\x00\x01y")
    metas = [json.loads(m) for m in data.split(b"M")[1:] for m in [m[4:m.index(b"}") + 1]] if m]
    resizes = [m for m in metas if m.get("type") == "resize"]
    assert resizes == [{"type": "resize", "width": MAX_SIZE, "height": MAX_SIZE}], metas
    assert b"D\x00\x00\x00\x01x" not in data


async def test_sessions_beyond_the_cap_are_refused(served: tuple[CockpitServer, TestClient, Path]) -> None:
    server, client, _ = served
    await login(client, server)
    first = await client.ws_connect("/ws", headers={"Origin": origin(client)})
    second = await client.ws_connect("/ws", headers={"Origin": origin(client)})
    try:
        with pytest.raises(aiohttp.WSServerHandshakeError) as refused:
            await client.ws_connect("/ws", headers={"Origin": origin(client)})
        assert refused.value.status == 503
    finally:
        await first.close()
    # a closed session frees its place
    deadline = time.monotonic() + DEADLINE
    while len(server._sessions) >= 2 and time.monotonic() < deadline:
        await asyncio.sleep(0.05)
    third = await client.ws_connect("/ws", headers={"Origin": origin(client)})
    await third.close()
    await second.close()


def test_the_secret_is_compared_whole() -> None:
    assert same_secret("abc", "abc")
    assert not same_secret("abd", "abc") and not same_secret("ab", "abc") and not same_secret(None, "abc")
    assert not same_secret("", "abc") and not same_secret("\udcff", "abc")
    assert CockpitServer("true", "127.0.0.1", 0).token != CockpitServer("true", "127.0.0.1", 0).token
    assert len(CockpitServer("true", "127.0.0.1", 0).token) >= 40


@pytest.mark.parametrize(("width", "height", "size"), ids=str, argvalues=[
    (20000, 4000, (MAX_SIZE, MAX_SIZE)), ("20000", "4000", (MAX_SIZE, MAX_SIZE)), (-5, 0, (10, 5)),
    (None, "x", (80, 24)), (True, 3.5, (80, 24)), ("9" * 5000, "30", (80, 30)), (120, 40, (120, 40)),
])
def test_sizes_are_clamped(width: object, height: object, size: tuple[int, int]) -> None:
    assert clamp_size(width, height) == size
