"""The textual-serve server of `r37-cockpit serve`: the package's own page (no asset from the internet),
textual-serve's bundled statics, and a websocket that only a page this server served may open.

Every browser tab runs its own `r37-cockpit tui` process, ended when the tab closes or the server stops
(killed if it does not quit in time), never left running. That process can change hosts: a page of
another site must not reach it. Browsers let any page open a websocket to 127.0.0.1, so the websocket
is refused unless its Origin is this server's (cross-site websocket hijacking), and the Host must be an
IP address, `localhost` or this machine's name (DNS rebinding: a name the attacker controls, pointed at
127.0.0.1).
"""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import logging
import socket
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import aiohttp_jinja2
from aiohttp import WSCloseCode, web
from textual_serve.app_service import AppService
from textual_serve.server import Server, to_int

TEMPLATES = Path(__file__).resolve().parent / "templates"
MAX_FONT_SIZE = 64
MAX_SIZE = 1000         # columns or rows a browser may ask for
STOP_GRACE = 10.0       # seconds a session's TUI gets to quit before it is killed

log = logging.getLogger("r37-cockpit.serve")


def local_names() -> set[str]:
    """The host names a browser may use for this machine besides IP addresses."""
    return {"localhost", socket.gethostname().lower(), socket.getfqdn().lower()}


def _hostname(netloc: str) -> str | None:
    try:
        return urlsplit(f"//{netloc}").hostname
    except ValueError:
        return None


def refusal(origin: str | None, host: str | None, names: set[str]) -> str | None:
    """Why a websocket with these Origin and Host headers is refused, or None when it may open."""
    if not host or len(host) > 300:
        return "no Host header"
    name = _hostname(host)
    if name is None:
        return "a malformed Host header"
    try:
        ipaddress.ip_address(name)
    except ValueError:
        if name.lower() not in names:
            return f"Host {name[:80]!r} is not an address or a name of this machine"
    if not origin:
        return "no Origin header (only the cockpit's page may open the session)"
    if origin.lower() not in (f"http://{host}".lower(), f"https://{host}".lower()):
        return f"Origin {origin[:120]!r} is not this server's (another site's page)"
    return None


class CockpitServer(Server):
    """textual-serve's server with the cockpit's page, quiet logging and the websocket guard."""

    def __init__(self, command: str, host: str, port: int, on_ready: Callable[[], None]):
        # textual-serve's own static files (its default statics path): script, stylesheet and font
        super().__init__(command, host=host, port=port, title="r37-cockpit", templates_path=TEMPLATES)
        self._on_ready = on_ready
        self._names = local_names()
        self._sessions: set[web.WebSocketResponse] = set()

    def initialize_logging(self) -> None:
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(logging.Formatter("r37-cockpit serve: %(message)s"))
        for name in ("textual-serve", log.name):
            logger = logging.getLogger(name)
            logger.handlers[:] = [handler]
            logger.setLevel(logging.INFO)
            logger.propagate = False

    async def on_startup(self, app: web.Application) -> None:
        self._on_ready()

    async def handle_index(self, request: web.Request) -> web.Response:
        """The page: relative asset URLs and a websocket URL the page derives from its own address."""
        font_size = min(max(to_int(request.query.get("fontsize", "16"), 16), 6), MAX_FONT_SIZE)
        context: dict[str, Any] = {"font_size": font_size, "static_url": "/static/",
                                   "title": self.title}
        return aiohttp_jinja2.render_template("index.html", request, context)

    async def handle_websocket(self, request: web.Request) -> web.WebSocketResponse:
        """textual-serve's session handler, behind the guard, with every session tracked so that stopping
        the server ends each TUI (textual-serve leaves them running)."""
        reason = refusal(request.headers.get("Origin"), request.headers.get("Host"), self._names)
        if reason is not None:
            log.warning("refused a browser session from %s: %s", request.remote, reason)
            raise web.HTTPForbidden(text=f"refused: {reason}\n")
        width = min(max(to_int(request.query.get("width", "80"), 80), 10), MAX_SIZE)
        height = min(max(to_int(request.query.get("height", "24"), 24), 5), MAX_SIZE)
        websocket = web.WebSocketResponse(heartbeat=15)
        await websocket.prepare(request)

        async def close() -> None:  # what AppService calls (it wants no result)
            await websocket.close()

        service = AppService(self.command, write_bytes=websocket.send_bytes, write_str=websocket.send_str,
                             close=close, download_manager=self.download_manager)
        self._sessions.add(websocket)
        log.info("browser session from %s", request.remote)
        try:
            await service.start(width, height)
            await self._process_messages(websocket, service)
        except asyncio.CancelledError:
            pass
        except Exception as exc:  # one broken session must not stop the server
            log.warning("browser session from %s failed: %s: %s", request.remote, type(exc).__name__, exc)
        finally:
            self._sessions.discard(websocket)
            await asyncio.shield(stop_session(service))
            await websocket.close()
            log.info("browser session from %s ended", request.remote)
        return websocket

    async def on_shutdown(self, app: web.Application) -> None:
        """Close every browser session: each handler then ends its TUI."""
        for websocket in list(self._sessions):
            await websocket.close(code=WSCloseCode.GOING_AWAY, message=b"the cockpit server stopped")


async def stop_session(service: AppService) -> None:
    """Ask the session's TUI to quit; kill it if it has not within STOP_GRACE seconds."""
    with contextlib.suppress(TimeoutError, ConnectionError, OSError):
        await asyncio.wait_for(service.stop(), STOP_GRACE)
    process = service._process
    if process is not None and process.returncode is None:
        with contextlib.suppress(ProcessLookupError):
            process.kill()
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(process.wait(), STOP_GRACE)
