"""`serve`'s pure parts (the session command, the network warning, the websocket guard) and the page it
serves: nothing on it or in any asset it references comes from another host."""

from __future__ import annotations

import re
import shlex
import sys
from pathlib import Path
from urllib.parse import urljoin, urlsplit

import pytest
from aiohttp.test_utils import TestClient, TestServer

from cockpit.cli.serve_cmd import exposure_warning, tui_argv, url
from cockpit.loopback import is_loopback
from cockpit.tui.web.server import CockpitServer, refusal

NAMES = {"localhost", "admin-box"}


def test_the_session_command_is_this_cockpits_tui_with_the_same_config_and_mode(tmp_path: Path) -> None:
    config, lab = tmp_path / "my cluster's.toml", tmp_path / "lab $(x).toml"
    argv = tui_argv([config, lab], read_only=True, cluster="lab")
    assert argv == [sys.executable, "-m", "cockpit", "--config", str(config), "--config", str(lab),
                    "--cluster", "lab", "--read-only", "tui"]
    assert shlex.split(shlex.join(argv)) == argv   # the shell textual-serve runs it with gets it whole
    assert tui_argv([config], read_only=False) == [sys.executable, "-m", "cockpit", "--config", str(config),
                                                   "tui"]


@pytest.mark.parametrize("host", ["127.0.0.1", "127.0.0.2", "localhost", "::1", "[::1]"])
def test_loopback_binds_print_no_warning(host: str) -> None:
    assert is_loopback(host)
    assert exposure_warning(host, 8000) is None


@pytest.mark.parametrize("host", ["0.0.0.0", "::", "10.0.0.5", "admin-box"])
def test_any_other_bind_warns_and_names_the_tunnel(host: str) -> None:
    warning = exposure_warning(host, 8123)
    assert warning is not None and host in warning
    assert "ssh -L 8123:127.0.0.1:8123" in warning


def test_the_printed_url_is_one_a_browser_on_this_machine_opens() -> None:
    assert url("127.0.0.1", 8000) == "http://127.0.0.1:8000/"
    assert url("0.0.0.0", 8000) == "http://127.0.0.1:8000/"
    assert url("::1", 9000) == "http://[::1]:9000/"


@pytest.mark.parametrize(("origin", "host"), [
    ("http://127.0.0.1:8000", "127.0.0.1:8000"),
    ("http://localhost:8000", "localhost:8000"),
    ("http://[::1]:8000", "[::1]:8000"),
    ("http://10.0.0.5:8000", "10.0.0.5:8000"),
    ("http://admin-box:9000", "admin-box:9000"),
])
def test_the_page_of_this_server_may_open_the_session(origin: str, host: str) -> None:
    assert refusal(origin, host, NAMES) is None


@pytest.mark.parametrize(("origin", "host", "reason"), [
    ("https://evil.example", "127.0.0.1:8000", "not this server's"),        # another site's page
    ("http://127.0.0.1:8001", "127.0.0.1:8000", "not this server's"),
    # DNS rebinding: a name the attacker controls, pointed at 127.0.0.1
    ("http://rebind.evil.example:8000", "rebind.evil.example:8000", "not an address or a name"),
    (None, "127.0.0.1:8000", "no Origin"),
    ("http://127.0.0.1:8000", None, "no Host"),
    ("http://x", "[not-an-ip", "malformed"),
    ("http://x", "x" * 400, "no Host"),
])
def test_other_pages_and_rebound_names_are_refused(origin: str | None, host: str | None, reason: str) -> None:
    found = refusal(origin, host, NAMES)
    assert found is not None and reason in found


URL_IN_TEXT = re.compile(r"""\b(?:https?|wss?)://[^\s"'`)<>]+""", re.IGNORECASE)
REFERENCE = re.compile(r"""\s(?:src|href)=["']([^"']+)["']|\burl\(\s*["']?([^"')]+)["']?\s*\)|"""
                       r"""@import\s+["']([^"']+)["']""")   # HTML attributes, CSS url() and @import
BLOCK_COMMENT = re.compile(r"/\*.*?\*/", re.DOTALL)


def _foreign(text: str, own: str) -> list[str]:
    """The absolute URLs in `text` (comments aside: licence headers name their projects' sites) that
    point at a host other than `own`."""
    return [u for u in URL_IN_TEXT.findall(BLOCK_COMMENT.sub("", text)) if urlsplit(u).netloc != own]


async def test_the_page_and_every_asset_it_references_come_from_this_server() -> None:
    server = CockpitServer("true", "127.0.0.1", 0, on_ready=lambda: None)
    async with TestClient(TestServer(await server._make_app())) as client:
        own = f"{client.host}:{client.port}"
        page = await client.get(f"/?token={server.token}")   # the secret URL: a cookie, then the page
        assert page.status == 200 and page.url.query_string == ""
        html = await page.text()
        assert "fonts.googleapis" not in html and _foreign(html, own) == []
        refs = {next(g for g in m if g) for m in REFERENCE.findall(html)}
        assert {"/static/js/textual.js", "/static/css/xterm.css",
                "/static/fonts/RobotoMono-VariableFont_wght.ttf"} <= refs
        for ref in sorted(refs):
            assert urlsplit(urljoin(f"http://{own}/", ref)).netloc == own, ref
            asset = await client.get(urljoin("/", ref))
            assert asset.status == 200, ref
            if ref.endswith((".js", ".css")):
                text = await asset.text()
                assert _foreign(text, own) == [], ref
                assert "googleapis" not in text and "@import" not in text, ref


async def test_a_websocket_from_another_sites_page_is_refused() -> None:
    server = CockpitServer("true", "127.0.0.1", 0, on_ready=lambda: None)
    async with TestClient(TestServer(await server._make_app())) as client:
        await client.get(f"/?token={server.token}")   # even a browser holding the cookie
        response = await client.get("/ws", headers={"Origin": "https://evil.example", "Connection": "Upgrade",
                                                    "Upgrade": "websocket", "Sec-WebSocket-Version": "13",
                                                    "Sec-WebSocket-Key": "dGhlIHNhbXBsZSBub25jZQ=="})
        assert response.status == 403
        assert "not this server's" in await response.text()
