"""The textual-serve server of `r37-cockpit serve`: the package's own page (no asset from the internet),
textual-serve's bundled statics, and a websocket that only a page this server served may open, for a
browser that holds this run's secret.

Loopback is shared by every account on the admin box, and the Origin check below only stops browsers: any
local user's raw client can send the right Origin. So every request (page, statics, websocket, download)
needs this run's secret: a random token printed once in the URL (`/?token=…`), exchanged on the first visit
for an HttpOnly, SameSite=Strict cookie (then a redirect drops the token from the address bar), compared in
constant time (hmac.compare_digest). Without it a request gets 401 and no session starts. At most
`max_sessions` browser sessions run at once (each is a TUI with its own SSH connections); another is refused
with 503. A browser's resize is clamped like the size in the query string.

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
import hmac
import ipaddress
import json
import logging
import secrets
import signal
import socket
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import aiohttp_jinja2
from aiohttp import WSCloseCode, WSMsgType, web
from textual_serve.app_service import AppService
from textual_serve.server import Server, to_int

TEMPLATES = Path(__file__).resolve().parent / "templates"
MAX_FONT_SIZE = 64
MAX_SIZE = 1000         # columns or rows a browser may ask for
STOP_GRACE = 10.0       # seconds a session's TUI gets to quit before it is killed
DEFAULT_MAX_SESSIONS = 3
MAX_FRAME = 64 * 1024   # bytes in one websocket frame from a browser (a key press, a paste, a resize)
TOKEN_PARAM = "token"

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


def clamp_size(width: object, height: object, default: tuple[int, int] = (80, 24)) -> tuple[int, int]:
    """A terminal size a browser asked for, as integers within 10..MAX_SIZE columns and 5..MAX_SIZE rows
    (anything that is not an integer gets the default)."""
    def one(value: object, fallback: int, low: int) -> int:
        if isinstance(value, str):
            value = to_int(value, fallback) if len(value) <= 12 else fallback
        if not isinstance(value, int) or isinstance(value, bool):
            value = fallback
        return min(max(value, low), MAX_SIZE)
    return one(width, default[0], 10), one(height, default[1], 5)


def same_secret(given: str | None, token: str) -> bool:
    """Whether `given` is this run's token, compared in constant time."""
    if not given:
        return False
    return hmac.compare_digest(given.encode("utf-8", "surrogateescape"), token.encode("ascii"))


class CockpitServer(Server):
    """textual-serve's server with the cockpit's page, quiet logging, the secret, the session cap and the
    websocket guard."""

    def __init__(self, command: str, host: str, port: int, on_ready: Callable[[], None] = lambda: None,
                 *, token: str | None = None, max_sessions: int = DEFAULT_MAX_SESSIONS):
        # textual-serve's own static files (its default statics path): script, stylesheet and font
        super().__init__(command, host=host, port=port, title="r37-cockpit", templates_path=TEMPLATES)
        self._on_ready = on_ready
        self._names = local_names()
        self._sessions: set[web.WebSocketResponse] = set()
        self._starting = 0      # sessions admitted whose websocket is not yet open
        self.token = token or secrets.token_urlsafe(32)
        self.max_sessions = max_sessions
        # cookies are per host, not per port: one name per port, so two servers do not log each other out
        self.cookie = f"r37-cockpit-{port}"

    def secret_url(self, base: str) -> str:
        """`base` (the server's address, ending in /) with this run's token: the URL to print once."""
        return f"{base}?{TOKEN_PARAM}={self.token}"

    @web.middleware
    async def _guard(self, request: web.Request,
                     handler: Callable[[web.Request], Awaitable[web.StreamResponse]]) -> web.StreamResponse:
        """Every request needs the secret: the cookie, or on the page the token (then swapped for the
        cookie and a redirect to the same page without it)."""
        if same_secret(request.cookies.get(self.cookie), self.token):
            return await handler(request)
        if request.path == "/" and same_secret(request.query.get(TOKEN_PARAM), self.token):
            rest = {k: v for k, v in request.query.items() if k != TOKEN_PARAM}
            response = web.Response(status=303, headers={"Location": str(request.rel_url.with_query(rest))})
            response.set_cookie(self.cookie, self.token, httponly=True, samesite="Strict", path="/")
            return response
        log.warning("refused %s %s from %s: no secret (open the URL `serve` printed)",
                    request.method, request.path[:80], request.remote)
        return web.Response(status=401, text="refused: this cockpit needs the secret URL "
                                             "`r37-cockpit serve` printed\n")

    async def _make_app(self) -> web.Application:
        app = await super()._make_app()
        app.middlewares.append(self._guard)
        return app

    def listen(self) -> socket.socket:
        """The listening socket, bound now (OSError such as EADDRINUSE before anything is printed)."""
        info = socket.getaddrinfo(self.host or None, self.port, type=socket.SOCK_STREAM,
                                  flags=socket.AI_PASSIVE)[0]
        sock = socket.socket(info[0], info[1], info[2])
        try:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            sock.bind(info[4])
            sock.listen(128)
        except BaseException:
            sock.close()
            raise
        sock.setblocking(False)
        return sock

    def serve_on(self, sock: socket.socket) -> None:
        """Serve on a socket from `listen` until Ctrl-C or SIGTERM (textual-serve's serve, given a socket)."""
        self.initialize_logging()
        loop = asyncio.get_event_loop()
        loop.add_signal_handler(signal.SIGINT, self.request_exit)
        loop.add_signal_handler(signal.SIGTERM, self.request_exit)
        web.run_app(self._make_app(), sock=sock, handle_signals=False, loop=loop, print=lambda *a: None,
                    access_log=None)

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
        if len(self._sessions) + self._starting >= self.max_sessions:
            log.warning("refused a browser session from %s: %d sessions already open (--max-sessions)",
                        request.remote, self.max_sessions)
            raise web.HTTPServiceUnavailable(
                text=f"refused: {self.max_sessions} browser sessions are already open (the most this "
                     f"`serve` allows: --max-sessions); close a tab\n")
        width, height = clamp_size(request.query.get("width", "80"), request.query.get("height", "24"))
        websocket = web.WebSocketResponse(heartbeat=15, max_msg_size=MAX_FRAME)
        self._starting += 1
        try:
            await websocket.prepare(request)
        finally:
            self._starting -= 1

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

    async def _process_messages(self, websocket: web.WebSocketResponse, app_service: AppService) -> None:
        """The browser's frames, read tolerantly: malformed ones are ignored, a resize is clamped."""
        async for message in websocket:
            if message.type != WSMsgType.TEXT:
                continue
            try:
                envelope = json.loads(message.data)
            except (ValueError, RecursionError):
                continue
            if not isinstance(envelope, list) or not envelope or not isinstance(envelope[0], str):
                continue
            kind, data = envelope[0], envelope[1] if len(envelope) > 1 else None
            if kind == "stdin" and isinstance(data, str):
                await app_service.send_bytes(data.encode("utf-8", "replace"))
            elif kind == "resize" and isinstance(data, dict):
                await app_service.set_terminal_size(*clamp_size(data.get("width"), data.get("height")))
            elif kind == "ping" and isinstance(data, str | int | float) and len(str(data)) <= 100:
                await websocket.send_json(["pong", data])
            elif kind == "blur":
                await app_service.blur()
            elif kind == "focus":
                await app_service.focus()

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
