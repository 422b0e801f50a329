"""`r37-cockpit serve` as a process: a bind beyond loopback warns on stderr, Ctrl-C ends it cleanly, and a
port in use is a clear error with a stable code. No browser: only the server's start and stop."""

from __future__ import annotations

import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DEADLINE = 30.0


@pytest.fixture
def config(tmp_path: Path) -> Path:
    path = tmp_path / "cluster.toml"
    shutil.copy(ROOT / "cluster.toml.example", path)
    return path


def serve(config: Path, *args: str) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-m", "cockpit", "--config", str(config), "serve", *args],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env={**os.environ, "XDG_STATE_HOME": str(config.parent / "state")})


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_listening(port: int, proc: subprocess.Popen[str]) -> None:
    deadline = time.monotonic() + DEADLINE
    while time.monotonic() < deadline:
        assert proc.poll() is None, proc.communicate()
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.1)
    proc.kill()
    raise AssertionError(f"serve did not listen within {DEADLINE} s: {proc.communicate()}")


def test_binding_every_interface_warns_and_ctrl_c_ends_it_cleanly(config: Path) -> None:
    port = free_port()
    proc = serve(config, "--host", "0.0.0.0", "--port", str(port))
    wait_listening(port, proc)
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=DEADLINE)
    assert proc.returncode in (0, 130), (out, err)
    assert "Traceback" not in out + err
    assert re.search(rf"http://127\.0\.0\.1:{port}/\?token=[\w-]{{40,}} ", out), out
    assert "warning: serving on 0.0.0.0" in err
    assert f"ssh -L {port}:127.0.0.1:{port}" in err


def test_a_port_in_use_is_a_clear_error(config: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        proc = serve(config, "--port", str(port))
        out, err = proc.communicate(timeout=DEADLINE)
    assert proc.returncode == 2, (out, err)
    assert out == ""      # nothing says "serving … on" for a server that never served
    assert re.fullmatch(rf"r37-cockpit: port {port} on 127\.0\.0\.1 is in use \(.*\): choose another with "
                        r"--port\n", err), err
    assert "Traceback" not in err


def test_a_second_local_client_without_the_secret_is_refused(config: Path) -> None:
    """Another account's raw client on loopback sends the right Origin and Host: refused (401), no session
    starts; the printed URL's token gets a browser in."""
    import asyncio

    import aiohttp

    port = free_port()
    proc = serve(config, "--port", str(port), "--max-sessions", "1")
    try:
        wait_listening(port, proc)
        assert proc.stdout is not None
        line = proc.stdout.readline()
        found = re.search(rf"http://127\.0\.0\.1:{port}/\?token=([\w-]+) ", line)
        assert found, line
        token = found.group(1)

        async def attempt() -> tuple[int, int, int]:
            origin = {"Origin": f"http://127.0.0.1:{port}"}
            async with aiohttp.ClientSession(cookie_jar=aiohttp.CookieJar(unsafe=True)) as http:
                with pytest.raises(aiohttp.WSServerHandshakeError) as refused:
                    await http.ws_connect(f"http://127.0.0.1:{port}/ws", headers=origin)
                async with http.get(f"http://127.0.0.1:{port}/?token={token}") as page:
                    page_status = page.status
                async with http.get(f"http://127.0.0.1:{port}/static/js/textual.js") as asset:
                    asset_status = asset.status
                return refused.value.status, page_status, asset_status

        assert asyncio.run(attempt()) == (401, 200, 200)
    finally:
        proc.send_signal(signal.SIGINT)
        _out, err = proc.communicate(timeout=DEADLINE)
    assert "refused GET /ws from 127.0.0.1: no secret" in err, err
    assert token not in err, "the secret was logged"
    assert "browser session from" not in err, err
