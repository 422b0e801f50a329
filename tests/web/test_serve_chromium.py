"""End to end: `r37-cockpit serve` on the demo cluster, loaded in headless Chromium (Debian's `chromium`)
and driven over the Chrome DevTools Protocol: the page fetches nothing from another host, the Hosts pane
renders in the browser's terminal, and a key press switches to the Preflight pane.

About 10 s (Chromium's start, then a TUI process booting and connecting to four hosts): the one test of
the whole web path.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import aiohttp
import pytest
from simcluster import SimCluster

DEADLINE = 40.0  # seconds for each wait: generous, the machine is shared

# textual.js keeps its xterm Terminal in a closure; catch it when its constructor assigns `fitAddon`, so
# the test reads the screen through xterm's buffer API (the canvas/WebGL renderers draw no DOM text).
HOOK = """
Object.defineProperty(Object.prototype, "fitAddon", {configurable: true, set(value) {
  Object.defineProperty(this, "fitAddon", {value, writable: true, configurable: true, enumerable: true});
  if (this.terminal) window.__cockpitSession = this;
}});
"""
SCREEN = """(() => {
  const session = window.__cockpitSession;
  if (!session) return "";
  const term = session.terminal, buffer = term.buffer.active, rows = [];
  for (let y = 0; y < term.rows; y++) {
    const line = buffer.getLine(buffer.viewportY + y);
    rows.push(line ? line.translateToString(true) : "");
  }
  return rows.join("\\n");
})()"""

STATE = ("[location.href, document.body && document.body.className, typeof window.__cockpitSession, "
         "document.querySelectorAll('.xterm').length].join(' | ')")


def chromium() -> str | None:
    return next(filter(None, map(shutil.which, ("chromium", "chromium-browser", "google-chrome"))), None)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_for_text(path: Path, pattern: str, proc: subprocess.Popen[bytes]) -> re.Match[str]:
    deadline = time.monotonic() + DEADLINE
    while time.monotonic() < deadline:
        found = re.search(pattern, path.read_text(errors="replace"))
        if found:
            return found
        assert proc.poll() is None, f"exited {proc.returncode}: {path.read_text(errors='replace')[-2000:]}"
        time.sleep(0.1)
    raise AssertionError(f"no {pattern!r} within {DEADLINE} s in {path.read_text(errors='replace')[-2000:]}")


def stop(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        proc.send_signal(signal.SIGINT)
        try:
            proc.wait(15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(5)


def session_tuis(config: Path) -> list[int]:
    """The pids of the TUI processes `serve` started for browser sessions on `config`."""
    want = ["-m", "cockpit", "--config", str(config), "tui"]
    found = []
    for proc in Path("/proc").iterdir():
        try:
            argv = (proc / "cmdline").read_bytes().decode(errors="replace").split("\0")[:-1]
        except OSError:
            continue
        if argv[1:] == want:
            found.append(int(proc.name))
    return found


def wait_no_tui(config: Path) -> None:
    deadline = time.monotonic() + DEADLINE
    while session_tuis(config) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert session_tuis(config) == [], "a browser session's TUI outlived its session"


@dataclass
class Served:
    url: str
    proc: subprocess.Popen[bytes]
    out: Path


@pytest.fixture
def served(demo_cluster: SimCluster, tmp_path: Path) -> Iterator[Served]:
    """`r37-cockpit serve` on the demo cluster, on a free port."""
    port = free_port()
    out = tmp_path / "serve.out"
    env = {**os.environ, "XDG_STATE_HOME": str(tmp_path / "state")}
    with out.open("wb") as sink:
        proc = subprocess.Popen([sys.executable, "-m", "cockpit", "--config", str(demo_cluster.config_path),
                                 "serve", "--port", str(port)], stdout=sink, stderr=subprocess.STDOUT,
                                env=env, cwd=tmp_path)
    try:
        # the URL with this run's secret: the browser swaps it for a cookie
        yield Served(wait_for_text(out, r"http://127\.0\.0\.1:\d+/\?token=[\w-]+", proc).group(0), proc, out)
    finally:
        stop(proc)


@pytest.fixture
def devtools(tmp_path: Path) -> Iterator[str]:
    """Headless Chromium with remote debugging on a port it picks: the DevTools HTTP address."""
    exe = chromium()
    if exe is None:
        if os.geteuid() == 0:
            pytest.fail("chromium is missing: scripts/test installs it (apt-get install chromium)")
        pytest.skip("chromium is not installed and we are not root (apt-get install chromium)")
    log = tmp_path / "chromium.log"
    with log.open("wb") as sink:
        proc = subprocess.Popen([exe, "--headless=new", "--no-sandbox", "--disable-gpu",
                                 "--remote-debugging-port=0", f"--user-data-dir={tmp_path / 'profile'}",
                                 "--window-size=1280,800", "--no-first-run", "about:blank"],
                                stdout=sink, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        found = wait_for_text(log, r"DevTools listening on ws://([\d.]+:\d+)/", proc)
        yield found.group(1)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGTERM)
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(5)


class Page:
    """One page target over CDP: numbered commands, and every event kept for the test to read."""

    def __init__(self, ws: aiohttp.ClientWebSocketResponse):
        self.ws = ws
        self.ids = itertools.count(1)
        self.events: list[dict[str, Any]] = []
        self.waiting: dict[int, asyncio.Future[dict[str, Any]]] = {}
        self.reader = asyncio.create_task(self._read())

    async def _read(self) -> None:
        async for message in self.ws:
            data = json.loads(message.data)
            if "id" in data and data["id"] in self.waiting:
                self.waiting.pop(data["id"]).set_result(data)
            elif "method" in data:
                self.events.append(data)

    async def send(self, method: str, **params: Any) -> dict[str, Any]:
        n = next(self.ids)
        self.waiting[n] = asyncio.get_running_loop().create_future()
        await self.ws.send_json({"id": n, "method": method, "params": params})
        reply = await asyncio.wait_for(self.waiting[n], DEADLINE)
        assert "error" not in reply, reply
        return dict(reply.get("result", {}))

    async def screen(self) -> str:
        result = await self.send("Runtime.evaluate", expression=SCREEN, returnByValue=True)
        return str(result["result"].get("value", ""))

    async def wait_screen(self, needle: str, log: Path) -> str:
        deadline = time.monotonic() + DEADLINE
        text = ""
        while time.monotonic() < deadline:
            text = await self.screen()
            if needle in text:
                return text
            await asyncio.sleep(0.25)
        state = await self.send("Runtime.evaluate", expression=STATE, returnByValue=True)
        raise AssertionError(f"{needle!r} not on the browser's screen within {DEADLINE} s "
                             f"(page: {state['result'].get('value')}):\n{text}\n"
                             f"serve's output:\n{log.read_text(errors='replace')[-3000:]}")


@pytest.fixture
async def page(devtools: str) -> AsyncIterator[Page]:
    async with aiohttp.ClientSession() as http:
        async with http.get(f"http://{devtools}/json/list") as response:
            targets = await response.json(content_type=None)
        target = next(t for t in targets if t.get("type") == "page")
        async with http.ws_connect(target["webSocketDebuggerUrl"], max_msg_size=0) as ws:
            p = Page(ws)
            try:
                yield p
            finally:
                p.reader.cancel()


def requested_urls(events: list[dict[str, Any]]) -> list[str]:
    """Every URL the page asked for: HTTP requests and websockets."""
    found = [e["params"]["request"]["url"] for e in events if e["method"] == "Network.requestWillBeSent"]
    return found + [e["params"]["url"] for e in events if e["method"] == "Network.webSocketCreated"]


async def test_the_cockpit_renders_in_chromium_and_a_key_switches_panes(served: Served, page: Page,
                                                                       demo_cluster: SimCluster) -> None:
    await page.send("Network.enable")
    await page.send("Page.enable")
    await page.send("Page.addScriptToEvaluateOnNewDocument", source=HOOK)
    await page.send("Page.navigate", url=served.url)

    hosts = await page.wait_screen("hosts 4/4 connected", served.out)
    assert "1 Hosts" in hosts and "host key (SHA256)" in hosts and "spark-0" in hosts, hosts
    await page.send("Runtime.evaluate", expression="document.querySelector('.xterm-helper-textarea').focus()")
    for kind in ("keyDown", "keyUp"):
        await page.send("Input.dispatchKeyEvent", type=kind, key="2", code="Digit2", text="2",
                        windowsVirtualKeyCode=50)
    preflight = await page.wait_screen("run the preflight", served.out)
    assert "host key (SHA256)" not in preflight

    assert len(session_tuis(demo_cluster.config_path)) == 1
    urls = requested_urls(page.events)
    # Ctrl-C with the tab still open ends the server and the session's TUI (textual-serve's own server
    # leaves it running)
    await asyncio.to_thread(stop, served.proc)
    assert served.proc.returncode == 0, served.out.read_text()
    await asyncio.to_thread(wait_no_tui, demo_cluster.config_path)
    assert "Traceback" not in served.out.read_text()

    own = urlsplit(served.url).netloc
    assert any(u.startswith(f"ws://{own}/ws") for u in urls), urls
    assert {urlsplit(u).netloc for u in urls if not u.startswith(("data:", "about:", "blob:"))} == {own}, urls
