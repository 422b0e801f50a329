"""A lean HTTP/1.1 client for the one hot request: the streamed ``POST /v1/chat/completions``.

httpx costs 2.5-3x the CPU of a plain asyncio read loop per streamed token; this path sends the request in
one write on a TCP_NODELAY socket, parses the status line and headers, and hands the body (chunked,
Content-Length or until close) to the caller piece by piece, exactly as the network delivers it. Plain
``http://`` only (the SSH tunnel or a LAN URL); ``https`` gateways stay on httpx. Every failure is an
:class:`ApiError` of the same kind the httpx path reports. Finished connections are kept for the next
stream; an abandoned stream aborts its socket, so the server sees the disconnect at once.
"""

from __future__ import annotations

import asyncio
import base64
import socket
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from urllib.parse import unquote, urlsplit

from cockpit.api.errors import (
    REMEDY_PROTOCOL,
    REMEDY_TIMEOUT,
    ApiError,
    closed_without_response,
    connect_failed,
    connect_timed_out,
    dropped,
)

READ_SIZE = 64 * 1024
MAX_HEAD_BYTES = 64 * 1024
MAX_IDLE = 4


def supports(base_url: str) -> bool:
    """True if ``base_url`` can use this path (``http://`` with a host)."""
    parts = urlsplit(base_url)
    return parts.scheme == "http" and bool(parts.hostname)


class ChunkedDecoder:
    """Incremental ``Transfer-Encoding: chunked`` decoder: framed bytes in, payload bytes out."""

    def __init__(self) -> None:
        self._buf = b""
        self._left = 0  # payload bytes still due in the current chunk
        self._state = "size"  # size | data | crlf | trailer | done

    @property
    def finished(self) -> bool:
        """True once the last (zero) chunk and its trailer have been read."""
        return self._state == "done"

    def feed(self, data: bytes) -> bytes:
        """Decode one network piece; returns the payload it completed (maybe ``b""``)."""
        buf = self._buf + data if self._buf else data
        out: list[bytes] = []
        pos, n = 0, len(buf)
        while pos < n and self._state != "done":
            if self._state == "data":
                take = min(self._left, n - pos)
                out.append(buf[pos : pos + take])
                pos += take
                self._left -= take
                if not self._left:
                    self._state = "crlf"
            elif self._state == "crlf":
                if n - pos < 2:
                    break
                if buf[pos : pos + 2] != b"\r\n":
                    raise _protocol("chunked body: no CRLF after a chunk")
                pos += 2
                self._state = "size"
            else:  # "size" or "trailer": one line
                end = buf.find(b"\r\n", pos)
                if end < 0:
                    if n - pos > 4096:
                        raise _protocol("chunked body: chunk size line too long")
                    break
                line = buf[pos:end]
                pos = end + 2
                if self._state == "trailer":
                    if not line:
                        self._state = "done"
                    continue
                try:
                    size = int(line.split(b";", 1)[0].strip(), 16)
                except ValueError:
                    raise _protocol(f"chunked body: bad chunk size {line[:40]!r}") from None
                if size < 0:
                    raise _protocol("chunked body: negative chunk size")
                self._state, self._left = ("data", size) if size else ("trailer", 0)
        self._buf = buf[pos:]
        return b"".join(out) if len(out) != 1 else out[0]


def _protocol(message: str) -> ApiError:
    return ApiError("protocol_error", message, REMEDY_PROTOCOL)


class _Closed(Exception):
    """The peer closed (or reset) the connection before any byte of a response."""


class RawResponse:
    """Status, headers and the body of one response; iterate :meth:`body` once."""

    def __init__(self, conn: _Conn, status: int, headers: dict[str, str], url: str):
        self.status = status
        self.headers = headers
        self.complete = False  # the whole body was read: the connection may serve another request
        self._conn = conn
        self._url = url
        self.keep_alive = "close" not in headers.get("connection", "").lower()

    @property
    def content_type(self) -> str:
        return self.headers.get("content-type", "")

    async def body(self) -> AsyncIterator[bytes]:
        """The body's payload in network-sized pieces (chunked framing removed)."""
        read = self._conn.read
        te = self.headers.get("transfer-encoding", "").lower()
        if self.status in (204, 304):
            pass  # no body by definition
        elif "chunked" in te:
            dec = ChunkedDecoder()
            while not dec.finished:
                data = await read()
                if not data:
                    raise dropped(self._url, "closed inside a chunked body")
                payload = dec.feed(data)
                if payload:
                    yield payload
        elif (length := self.headers.get("content-length")) is not None:
            try:
                left = int(length)
            except ValueError:
                raise _protocol(f"bad Content-Length {length!r} from {self._url}") from None
            while left > 0:
                data = await read()
                if not data:
                    raise dropped(self._url, f"closed with {left} body bytes missing")
                left -= len(data)
                yield data
        else:
            self.keep_alive = False
            while data := await read():
                yield data
        self.complete = True


class _ReadTimeout(Exception):
    """Set on the reader by the watchdog: no data for the read timeout."""


class _Conn:
    """One TCP connection: a reader and writer, and one watchdog timer for the reads of a request.

    The watchdog is armed once per request and re-armed only when it fires early, instead of a timeout
    context per read (which costs more CPU than the rest of handling a streamed token).
    """

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, url: str) -> None:
        self.reader = reader
        self.writer = writer
        self.url = url
        self._loop = asyncio.get_running_loop()
        self._timeout = 0.0
        self._waiting_since: float | None = None
        self._timer: asyncio.TimerHandle | None = None

    @property
    def usable(self) -> bool:
        return not self.writer.is_closing() and not self.reader.at_eof()

    def arm(self, timeout: float) -> None:
        """Start watching the reads of one request: a read that waits ``timeout`` s fails."""
        self._timeout = timeout
        self._timer = self._loop.call_later(timeout, self._check)

    def disarm(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def _check(self) -> None:
        now = self._loop.time()
        since = self._waiting_since
        if since is not None and now - since >= self._timeout:
            self._timer = None
            self.reader.set_exception(_ReadTimeout())
            return
        self._timer = self._loop.call_at((since if since is not None else now) + self._timeout, self._check)

    def _timed_out(self) -> ApiError:
        return ApiError("timeout", f"{self.url}: ReadTimeout (no data in time)", REMEDY_TIMEOUT)

    async def read(self) -> bytes:
        self._waiting_since = self._loop.time()
        try:
            return await self.reader.read(READ_SIZE)
        except _ReadTimeout:
            raise self._timed_out() from None
        except OSError as exc:
            raise dropped(self.url, str(exc) or type(exc).__name__) from None
        finally:
            self._waiting_since = None

    async def read_head(self) -> bytes:
        """The status line and headers (up to the blank line); :class:`_Closed` if nothing came."""
        self._waiting_since = self._loop.time()
        try:
            return await self.reader.readuntil(b"\r\n\r\n")
        except asyncio.IncompleteReadError as exc:
            if not exc.partial:
                raise _Closed from None
            raise dropped(self.url, "closed inside the response headers") from None
        except asyncio.LimitOverrunError:
            raise _protocol(f"{self.url}: response headers larger than {MAX_HEAD_BYTES} bytes") from None
        except _ReadTimeout:
            raise self._timed_out() from None
        except ConnectionResetError:
            raise _Closed from None
        except OSError as exc:
            raise dropped(self.url, str(exc) or type(exc).__name__) from None
        finally:
            self._waiting_since = None

    def abort(self) -> None:
        self.disarm()
        self.writer.transport.abort()


def _parse_head(head: bytes, url: str) -> tuple[int, dict[str, str]]:
    lines = head.decode("latin-1").split("\r\n")
    version, _, rest = lines[0].partition(" ")
    code = rest[:3]
    if not version.startswith("HTTP/1.") or not code.isdigit():
        raise _protocol(f"{url} did not answer HTTP/1.x: {lines[0][:80]!r}")
    headers: dict[str, str] = {}
    for line in lines[1:]:
        name, colon, value = line.partition(":")
        if colon:
            key = name.strip().lower()
            value = value.strip()
            headers[key] = f"{headers[key]}, {value}" if key in headers else value
    if version == "HTTP/1.0" and "keep-alive" not in headers.get("connection", "").lower():
        headers["connection"] = "close"  # HTTP/1.0 closes unless it says otherwise
    return int(code), headers


class RawStreamer:
    """Streamed POSTs to one ``http://host:port[/prefix]`` base URL over plain asyncio streams."""

    def __init__(
        self,
        base_url: str,
        *,
        connect_timeout: float,
        read_timeout: float,
        headers: Mapping[str, str],
    ) -> None:
        parts = urlsplit(base_url)
        if parts.scheme != "http" or not parts.hostname:
            raise ValueError(f"not a plain http:// URL: {base_url!r}")
        self.base_url = base_url.rstrip("/")
        self._host = parts.hostname
        self._port = parts.port or 80
        self._prefix = parts.path.rstrip("/")
        self._host_header = parts.netloc.rpartition("@")[2]
        all_headers = dict(headers)
        if parts.username is not None:  # http://user:pass@host, as httpx would send it
            creds = f"{unquote(parts.username)}:{unquote(parts.password or '')}".encode()
            all_headers["Authorization"] = "Basic " + base64.b64encode(creds).decode("ascii")
        self._headers = "".join(f"{k}: {v}\r\n" for k, v in all_headers.items())
        self._connect_timeout = connect_timeout
        self._read_timeout = read_timeout
        self._idle: list[_Conn] = []

    def _request(self, path: str, body: bytes) -> bytes:
        head = (
            f"POST {self._prefix}{path} HTTP/1.1\r\nHost: {self._host_header}\r\n"
            f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n"
            f"Accept: text/event-stream\r\n{self._headers}\r\n"
        )
        return head.encode("latin-1") + body

    async def _connect(self, url: str) -> _Conn:
        try:
            async with asyncio.timeout(self._connect_timeout):
                reader, writer = await asyncio.open_connection(self._host, self._port, limit=MAX_HEAD_BYTES)
        except TimeoutError:
            raise connect_timed_out(url) from None
        except OSError as exc:
            raise connect_failed(url, exc) from None
        sock = writer.get_extra_info("socket")
        if sock is not None:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        return _Conn(reader, writer, url)

    def _take_idle(self) -> _Conn | None:
        while self._idle:
            conn = self._idle.pop()
            if conn.usable:
                return conn
            conn.abort()
        return None

    async def _send(self, conn: _Conn, request: bytes) -> RawResponse:
        """Write the request and read the response head (skipping 1xx heads)."""
        try:
            conn.writer.write(request)
        except OSError:
            raise _Closed from None
        conn.arm(self._read_timeout)
        while True:
            status, headers = _parse_head(await conn.read_head(), conn.url)
            if not 100 <= status < 200:
                return RawResponse(conn, status, headers, conn.url)

    @asynccontextmanager
    async def post(self, path: str, body: bytes) -> AsyncIterator[RawResponse]:
        """Send ``POST prefix+path`` with a JSON ``body``; yields the response once its head is in.

        A kept connection the server closed meanwhile is retried once on a fresh one. Leaving the block
        before the body was read to its end aborts the socket.
        """
        url = self.base_url + path
        request = self._request(path, body)
        conn = self._take_idle()
        resp: RawResponse | None = None
        try:
            if conn is not None:
                try:
                    resp = await self._send(conn, request)
                except _Closed:
                    conn.abort()
                    conn = None
            if resp is None:
                conn = await self._connect(url)
                try:
                    resp = await self._send(conn, request)
                except _Closed:
                    raise closed_without_response(url) from None
            yield resp
        finally:
            if conn is not None:
                conn.disarm()
                if resp is not None and resp.complete and resp.keep_alive and len(self._idle) < MAX_IDLE:
                    self._idle.append(conn)
                else:
                    conn.abort()

    async def aclose(self) -> None:
        """Close the kept connections."""
        while self._idle:
            self._idle.pop().abort()
