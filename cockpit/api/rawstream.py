"""A lean HTTP/1.1 client for the one hot request: the streamed ``POST /v1/chat/completions``.

httpx costs 2.5-3x the CPU of a plain socket read loop per streamed token; this path sends the request in
one write on a TCP_NODELAY socket, parses the status line and headers, and hands the body (chunked,
Content-Length or until close) to the caller with the kernel's arrival time of every piece. Plain
``http://`` only (the SSH tunnel or a LAN URL); ``https`` gateways stay on httpx. Every failure is an
:class:`ApiError` of the same kind the httpx path reports. Finished connections are kept for the next
stream; an abandoned stream closes its socket, so the server sees the disconnect at once.

A request may carry a *watch* (:data:`Watch`): the stream deadlines (no first token, no token mid-answer)
are judged by the same watchdog timer as the read timeout, so they cost nothing per chunk; an overdue
stream fails its read with the watch's error and its socket is closed.
"""

from __future__ import annotations

import asyncio
import base64
import socket
import time
from collections.abc import AsyncIterator, Callable, Mapping
from contextlib import asynccontextmanager
from urllib.parse import unquote, urlsplit

from cockpit import kstamp
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
MAX_KEEP = 64  # the most connections preconnect keeps (a batch of that many requests)
_MAX_STAMP_AGE = 5.0  # a stamp older than the pacing interval plus this is a wall-clock step: ignored

Watch = Callable[[float], "ApiError | float"]
"""A request's progress rule: given ``time.perf_counter()``, the error if the stream is overdue, else the
``perf_counter`` time at which it falls due (asked only when the watchdog fires, never per chunk). A due
time that moves later needs nothing; one that moves earlier (the first token switches a long first-token
deadline to a shorter idle one) must be told with :meth:`RawResponse.rewatch`."""


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
            if self._state == "size":
                end = buf.find(b"\r\n", pos)
                if end < 0:
                    if n - pos > 4096:
                        raise _protocol("chunked body: chunk size line too long")
                    break
                size = _chunk_size(buf[pos:end])
                pos = end + 2
                if not size:
                    self._state = "trailer"
                    continue
                stop = pos + size
                if stop + 2 <= n:  # the whole chunk is here (the usual case): take it at once
                    if buf[stop : stop + 2] != b"\r\n":
                        raise _protocol("chunked body: no CRLF after a chunk")
                    out.append(buf[pos:stop])
                    pos = stop + 2
                    continue
                self._state, self._left = "data", size
            elif self._state == "data":
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
            else:  # "trailer": header lines up to a blank one
                end = buf.find(b"\r\n", pos)
                if end < 0:
                    if n - pos > 4096:
                        raise _protocol("chunked body: trailer line too long")
                    break
                if end == pos:
                    self._state = "done"
                pos = end + 2
        self._buf = buf[pos:]
        return b"".join(out) if len(out) != 1 else out[0]


def _chunk_size(line: bytes) -> int:
    try:
        size = int(line.split(b";", 1)[0] if b";" in line else line, 16)
    except ValueError:
        raise _protocol(f"chunked body: bad chunk size {line[:40]!r}") from None
    if size < 0:
        raise _protocol("chunked body: negative chunk size")
    return size


def _protocol(message: str) -> ApiError:
    return ApiError("protocol_error", message, REMEDY_PROTOCOL)


class _Closed(Exception):
    """The peer closed (or reset) the connection before any byte of a response."""


class RawResponse:
    """Status, headers and the body of one response; iterate :meth:`body` once.

    ``t_sent`` is the ``time.perf_counter()`` at which the request was handed to the kernel.
    """

    def __init__(self, conn: _Conn, status: int, headers: dict[str, str], t_sent: float) -> None:
        self.status = status
        self.headers = headers
        self.t_sent = t_sent
        self.complete = False  # the whole body was read: the connection may serve another request
        self._conn = conn
        self._url = conn.url
        self.keep_alive = "close" not in headers.get("connection", "").lower()

    @property
    def content_type(self) -> str:
        return self.headers.get("content-type", "")

    def pace(self, interval: float) -> None:
        """From now on read the socket at most every ``interval`` s (see :meth:`_Conn.read`)."""
        self._conn.pace(interval)

    def rewatch(self) -> None:
        """The watch's due time may have moved earlier: ask it again now (once, not per chunk)."""
        self._conn.rewatch()

    async def body(self) -> AsyncIterator[tuple[bytes, float]]:
        """The body's payload with arrival times, in read-sized pieces (chunked framing removed)."""
        recv = self._conn.recv
        te = self.headers.get("transfer-encoding", "").lower()
        try:
            if self.status in (204, 304):
                pass  # no body by definition
            elif "chunked" in te:
                dec = ChunkedDecoder()
                while not dec.finished:
                    data, t = await recv()
                    if not data:
                        raise dropped(self._url, "closed inside a chunked body")
                    payload = dec.feed(data)
                    if payload:
                        yield payload, t
            elif (length := self.headers.get("content-length")) is not None:
                try:
                    left = int(length)
                except ValueError:
                    raise _protocol(f"bad Content-Length {length!r} from {self._url}") from None
                while left > 0:
                    data, t = await recv()
                    if not data:
                        raise dropped(self._url, f"closed with {left} body bytes missing")
                    left -= len(data)
                    yield data, t
            else:
                self.keep_alive = False
                while True:
                    data, t = await recv()
                    if not data:
                        break
                    yield data, t
        except OSError as exc:
            raise dropped(self._url, str(exc) or type(exc).__name__) from None
        self.complete = True


class _ReadTimeout(Exception):
    """Set on the waiting read by the watchdog: no data for the read timeout."""


class _Conn:
    """One non-blocking TCP socket, read with ``recvmsg`` so each read carries the kernel's arrival time.

    Reads return ``(bytes, t)`` with ``t`` on the ``time.perf_counter()`` clock: when the kernel received
    the last segment the read took (a FIN counts), not when this process got round to reading it. That
    makes two things free: a busy event loop does not skew TTFT or tokens/s, and the reader may *pace*
    itself — read at most every ``interval`` s and take whatever arrived meanwhile in one wakeup (a read
    that fills its 64 KiB buffer is followed at once by the next, so a burst is never throttled) —
    without losing timing accuracy. Wakeups, not bytes, are what a streamed token costs a client.

    One watchdog timer per request enforces the read timeout and the request's :data:`Watch`; it is
    re-armed only when it fires early (a timeout context per read costs more CPU than the rest of handling
    a streamed token). When it fails a request, the waiting read raises (or the next read does).
    """

    def __init__(self, sock: socket.socket, url: str) -> None:
        self.sock = sock
        self.url = url
        kstamp.enable(sock)  # where it cannot, reads are timed when they return
        self._fd = sock.fileno()
        self._loop = asyncio.get_running_loop()
        self._pending: tuple[bytes, float] | None = None  # read past the head: the body's first bytes
        self._interval = 0.0
        self._not_before = 0.0  # loop time before which a paced read sleeps
        self._timeout = 0.0
        self._waiter: asyncio.Future[None] | None = None
        self._waiting_since: float | None = None
        self._timer: asyncio.TimerHandle | None = None
        self._watch: Watch | None = None
        self._failure: ApiError | None = None  # set by the watchdog: every read raises it
        self.closed = False

    @property
    def usable(self) -> bool:
        """True if the kept connection is still open and has nothing unread (the peer did not close)."""
        if self.closed:
            return False
        try:
            self.sock.recv(1, socket.MSG_PEEK)  # returns at once: EOF, or bytes nobody asked for
        except BlockingIOError:
            return True  # nothing to read: still open
        except OSError:
            return False
        return False

    def pace(self, interval: float) -> None:
        self._interval = interval
        self._not_before = self._loop.time() + interval

    def arm(self, timeout: float, watch: Watch | None = None) -> None:
        """Start watching the reads of one request: a read that waits ``timeout`` s fails, and so does
        the request once ``watch`` says it is overdue."""
        self._interval = 0.0
        self._timeout = timeout
        self._watch = watch
        self._failure = None
        self._timer = None
        self._check()

    def rewatch(self) -> None:
        if self._timer is not None:  # None: disarmed, or the request already failed
            self._timer.cancel()
            self._check()

    def disarm(self) -> None:
        self._watch = None
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def _check(self) -> None:
        self._timer = None
        now = self._loop.time()
        since = self._waiting_since
        if since is not None and now - since >= self._timeout:
            self._fail(self._timed_out())
            return
        at = (since if since is not None else now) + self._timeout
        if self._watch is not None:
            t = time.perf_counter()
            due = self._watch(t)
            if isinstance(due, ApiError):
                self._fail(due)
                return
            at = min(at, now + (due - t))
        self._timer = self._loop.call_at(at, self._check)

    def _fail(self, error: ApiError) -> None:
        self._failure = error
        if self._waiter is not None and not self._waiter.done():
            self._waiter.set_exception(_ReadTimeout())

    def _timed_out(self) -> ApiError:
        return ApiError("timeout", f"{self.url}: ReadTimeout (no data in time)", REMEDY_TIMEOUT)

    async def send(self, data: bytes) -> float:
        """Write ``data`` whole; returns the ``perf_counter`` time it went out."""
        t = time.perf_counter()
        await self._loop.sock_sendall(self.sock, data)
        return t

    async def _readable(self) -> None:
        waiter = self._waiter = self._loop.create_future()
        self._waiting_since = self._loop.time()
        self._loop.add_reader(self._fd, _wake, waiter)
        try:
            await waiter
        finally:
            self._loop.remove_reader(self._fd)
            self._waiter = self._waiting_since = None

    async def recv(self) -> tuple[bytes, float]:
        """Next received bytes (``b""`` at end of stream) and when they arrived (``perf_counter``).

        Raises ``OSError`` as the socket reports it.
        """
        if self._failure is not None:
            raise self._failure
        if self._pending is not None:
            out, self._pending = self._pending, None
            return out
        if self._interval:
            delay = self._not_before - self._loop.time()
            if delay > 0:
                await asyncio.sleep(delay)
        while True:
            try:
                data, anc, _flags, _addr = self.sock.recvmsg(READ_SIZE, kstamp.CMSG_SPACE)
                break
            except (BlockingIOError, InterruptedError):
                if self._failure is not None:  # failed while nothing waited (a paced read's sleep)
                    raise self._failure from None
                try:
                    await self._readable()
                except _ReadTimeout:
                    raise (self._failure or self._timed_out()) from None
        t_read, now_real = kstamp.clock_pair()  # one moment on both clocks: the stamp is on the wall clock
        if self._interval:
            # a full read means more is waiting: take it now (a burst drains at full speed, never queues
            # up behind the frame); otherwise the next read waits for the next frame
            full = len(data) == READ_SIZE
            self._not_before = self._loop.time() + (0.0 if full else self._interval)
        if anc:
            return data, kstamp.received_at(anc, t_read, now_real, self._interval + _MAX_STAMP_AGE)
        return data, t_read

    async def read_head(self) -> bytes:
        """The status line and headers (up to the blank line); :class:`_Closed` if nothing came."""
        buf = b""
        while True:
            try:
                data, t = await self.recv()
            except (ConnectionResetError, BrokenPipeError):
                if not buf:
                    raise _Closed from None
                raise dropped(self.url, "reset inside the response headers") from None
            except OSError as exc:
                raise dropped(self.url, str(exc) or type(exc).__name__) from None
            if not data:
                if not buf:
                    raise _Closed
                raise dropped(self.url, "closed inside the response headers")
            buf += data
            end = buf.find(b"\r\n\r\n")
            if end >= 0:
                if end + 4 < len(buf):
                    self._pending = (buf[end + 4 :], t)
                return buf[: end + 4]
            if len(buf) > MAX_HEAD_BYTES:
                raise _protocol(f"{self.url}: response headers larger than {MAX_HEAD_BYTES} bytes")

    def abort(self) -> None:
        """Close the socket now (the server sees the request end)."""
        self.disarm()
        if not self.closed:
            self.closed = True
            if self._waiter is not None:
                self._loop.remove_reader(self._fd)
            self.sock.close()


def _wake(waiter: asyncio.Future[None]) -> None:
    if not waiter.done():
        waiter.set_result(None)


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
    """Streamed POSTs to one ``http://host:port[/prefix]`` base URL over plain non-blocking sockets."""

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
        self._keep = MAX_IDLE  # connections kept for the next requests; raised by preconnect

    def _request(self, path: str, body: bytes) -> bytes:
        head = (
            f"POST {self._prefix}{path} HTTP/1.1\r\nHost: {self._host_header}\r\n"
            f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n"
            f"Accept: text/event-stream\r\n{self._headers}\r\n"
        )
        return head.encode("latin-1") + body

    async def _connect(self, url: str) -> _Conn:
        """A connected socket to the first address of the host that answers."""
        loop = asyncio.get_running_loop()
        await kstamp.ensure_live()  # the first connection of the process: no unstamped first answer
        try:
            async with asyncio.timeout(self._connect_timeout):
                infos = await loop.getaddrinfo(self._host, self._port, type=socket.SOCK_STREAM)
                error: OSError = OSError(f"no address for {self._host}")
                for family, kind, proto, _name, addr in infos:
                    sock = socket.socket(family, kind, proto)
                    try:
                        sock.setblocking(False)
                        await loop.sock_connect(sock, addr)
                        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                    except OSError as exc:
                        sock.close()
                        error = exc
                        continue
                    except BaseException:  # cancelled (or the connect timeout)
                        sock.close()
                        raise
                    return _Conn(sock, url)
                raise error
        except TimeoutError:
            raise connect_timed_out(url) from None
        except OSError as exc:
            raise connect_failed(url, exc) from None

    def _take_idle(self) -> _Conn | None:
        while self._idle:
            conn = self._idle.pop()
            if conn.usable:
                return conn
            conn.abort()
        return None

    async def _send(
        self, conn: _Conn, request: bytes, watch: Watch | None, read_timeout: float | None
    ) -> RawResponse:
        """Write the request and read the response head (skipping 1xx heads)."""
        conn.arm(self._read_timeout if read_timeout is None else read_timeout, watch)
        try:
            t_sent = await conn.send(request)
        except OSError:
            raise _Closed from None
        while True:
            status, headers = _parse_head(await conn.read_head(), conn.url)
            if not 100 <= status < 200:
                return RawResponse(conn, status, headers, t_sent)

    @asynccontextmanager
    async def post(
        self, path: str, body: bytes, *, watch: Watch | None = None, read_timeout: float | None = None
    ) -> AsyncIterator[RawResponse]:
        """Send ``POST prefix+path`` with a JSON ``body``; yields the response once its head is in.

        ``watch`` fails the request when it says so (see :data:`Watch`), also while the head is awaited;
        ``read_timeout`` replaces the streamer's for this request. A kept connection the server closed
        meanwhile is retried once on a fresh one. Leaving the block before the body was read to its end
        (also on a failure) aborts the socket.
        """
        url = self.base_url + path
        request = self._request(path, body)
        conn = self._take_idle()
        resp: RawResponse | None = None
        try:
            if conn is not None:
                try:
                    resp = await self._send(conn, request, watch, read_timeout)
                except _Closed:
                    conn.abort()
                    conn = None
            if resp is None:
                conn = await self._connect(url)
                try:
                    resp = await self._send(conn, request, watch, read_timeout)
                except _Closed:
                    raise closed_without_response(url) from None
            yield resp
        finally:
            if conn is not None:
                conn.disarm()
                if resp is not None and resp.complete and resp.keep_alive and len(self._idle) < self._keep:
                    self._idle.append(conn)
                else:
                    conn.abort()

    async def preconnect(self, n: int) -> None:
        """Open connections until ``n`` are kept (at most ``MAX_KEEP``), so that ``n`` requests sent
        together all go out at once rather than after their connects (a benchmark's batch)."""
        kept = []
        for conn in self._idle:
            if conn.usable:
                kept.append(conn)
            else:
                conn.abort()
        self._idle = kept
        self._keep = max(self._keep, min(n, MAX_KEEP))
        missing = min(n, MAX_KEEP) - len(self._idle)
        if missing <= 0:
            return
        url = self.base_url
        opened = await asyncio.gather(*(self._connect(url) for _ in range(missing)), return_exceptions=True)
        self._idle += [got for got in opened if isinstance(got, _Conn)]
        for got in opened:
            if isinstance(got, BaseException):
                raise got

    async def aclose(self) -> None:
        """Close the kept connections."""
        while self._idle:
            self._idle.pop().abort()
