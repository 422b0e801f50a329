"""Async client for the engine's OpenAI-compatible API (httpx), with every failure typed.

The base URL is normally ``http://127.0.0.1:<forwarded port>`` (SSH tunnel to rank 0) or ``--api-url``.
``trust_env=False``: proxy variables in the environment never reroute the private API. Streamed chat on a
plain ``http://`` URL goes over :mod:`cockpit.api.rawstream` (about half the CPU per token of httpx); https
gateways and every other request use httpx.

Nothing waits forever: a streamed answer is given up on by its :class:`StreamDeadlines` (no first token,
no token mid-answer; judged by the raw path's watchdog timer, so at no cost per chunk), a non-streamed one
when it did not come whole within the first-token deadline, and ``/health``, ``/v1/models`` and
``/metrics`` when they were not answered whole within ``health_timeout`` (a server that trickles a byte a
second cannot hold them). A request given up on is closed, so the server sees the disconnect.

Nothing is kept without bound either: every plain body has its cap (``MAX_*_BODY``), one SSE event
:data:`MAX_EVENT_BYTES` and a streamed answer's text :data:`~cockpit.api.stream.MAX_ANSWER_CHARS`; past a
cap the request ends with a ``too_large`` error (a streamed one keeps the part that fits).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import json
import math
import socket
import ssl
import time
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, replace
from typing import Any, Literal, Self, cast
from urllib.parse import urlsplit

from cockpit.api import rawstream, sse
from cockpit.api.apikey import ApiKey, key_from_env
from cockpit.api.chat import ChatRequest
from cockpit.api.errors import (
    REMEDY_PROTOCOL,
    ApiError,
    from_status,
    from_transport,
    no_answer_within,
    no_first_token,
    no_token_for,
    not_answered_in_time,
    too_large,
)
from cockpit.api.httplib import httpx
from cockpit.api.sse import SseDecoder, SseError, SseTooLarge
from cockpit.api.status import ApiState, ApiStatus, Route
from cockpit.api.stream import (
    REMEDY_TOO_LARGE,
    ChatEvent,
    ChatResult,
    ChunkAccumulator,
    Finished,
    StreamDeadlines,
    StreamError,
    StreamStats,
    result_from_response,
)
from cockpit.api.urls import basic_auth, split_credentials
from cockpit.constants import PROBE_PARAM, PROBE_VALUE, STREAM_FRAME_MS

_MAX_ERROR_BODY = 64 * 1024
MAX_HEALTH_BODY = 64 * 1024
"""The most body bytes ``/health`` may answer (vLLM answers none); more is a ``too_large`` error."""
MAX_MODELS_BODY = 1024 * 1024
"""The most body bytes of ``/v1/models``."""
MAX_METRICS_BODY = 8 * 1024 * 1024
"""The most body bytes of ``/metrics`` (vLLM's is some hundred KiB)."""
MAX_COMPLETION_BODY = 8 * 1024 * 1024
"""The most body bytes of a non-streamed answer."""
MAX_EVENT_BYTES = sse.MAX_EVENT_BYTES
"""The largest single event of a streamed answer (1 MiB); the whole answer's text is bounded by
:data:`~cockpit.api.stream.MAX_ANSWER_CHARS`."""
_HEADERS = {"User-Agent": "r37-cockpit"}

Via = Literal[Route, "direct"]
"""How a client reaches its server, which decides what it sends beyond the request:

- ``tunnel``: the cockpit's own SSH tunnel to rank 0's engine. ``/health``, ``/v1/models`` and
  ``/metrics`` ask with ``?r37-cockpit=probe`` (:data:`~cockpit.constants.PROBE_QUERY`), so the
  engine's access log tells the cockpit's looks from an operator's requests; ``OPENAI_API_KEY`` is
  never sent (the engine behind the tunnel was launched without one).
- ``gateway``: a server the operator named (``--api-url``): plain paths, and ``OPENAI_API_KEY`` from
  the environment when no key was given.
- ``direct``: a URL a program chose itself (a benchmark's or a test's engine): plain paths, no key
  from the environment.
"""
_VIA: dict[str, tuple[bool, bool]] = {      # per way: (a key from the environment, probes marked)
    "tunnel": (False, True), "gateway": (True, False), "direct": (False, False)}


def via(api_url: str | None) -> Route:
    """The way to the engine of a cockpit that was (or was not) given ``--api-url``."""
    return "tunnel" if api_url is None else "gateway"


@functools.cache
def _tls_context() -> Any:
    """httpx's default TLS context (certifi's CAs), made once: building one loads every CA certificate
    (20-60 ms of CPU), and the liveness probe opens a client every few seconds (perf/watch_cost.py)."""
    return httpx.create_ssl_context()


def _context_for(base_url: str) -> ssl.SSLContext:
    """certifi's CAs for an https URL; for a plain http one (the tunnel) a context that trusts no
    certificate at all, since it is never used: redirects are not followed, so no request leaves the
    base URL, and were one to meet TLS it would fail verification, never pass unchecked. Loading the
    CAs was a tenth of a one-off `status`'s CPU."""
    if urlsplit(base_url).scheme == "https":
        return cast(ssl.SSLContext, _tls_context())
    return ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)      # verification on, nothing trusted
_CHAT_PATH = "/v1/chat/completions"
STREAM_INTERVAL = STREAM_FRAME_MS / 1000
"""Once an answer's first token is in, its socket is read at most this often (s); see :class:`ApiClient`."""


@dataclass(frozen=True, slots=True)
class ModelInfo:
    """One entry of ``GET /v1/models``."""

    id: str
    owned_by: str | None = None
    max_model_len: int | None = None
    root: str | None = None


class ChatStream:
    """Async iterator of :data:`ChatEvent` for one streamed request.

    The last event is always :class:`Finished` or :class:`StreamError`; no exception escapes for network,
    HTTP or protocol failures. Closing it (``aclose()``, ``async with``, ``break`` inside ``async with``,
    or cancelling the task) closes the HTTP response, so the server sees the request aborted.
    """

    def __init__(
        self, gen: AsyncGenerator[list[ChatEvent], None], acc_holder: list[ChunkAccumulator]
    ) -> None:
        self._gen = gen
        self._acc = acc_holder
        self._batch: list[ChatEvent] = []  # events of the last read, in reverse order
        self.result: ChatResult | None = None
        self.error: StreamError | None = None

    def __aiter__(self) -> Self:
        return self

    async def __anext__(self) -> ChatEvent:
        while not self._batch:
            batch = await self._gen.__anext__()  # one read's events: a single trip down the stack
            batch.reverse()
            self._batch = batch
        event = self._batch.pop()
        if isinstance(event, StreamError):
            self.error = event
        elif isinstance(event, Finished):
            self.result = event.result
        return event

    async def aclose(self) -> None:
        await self._gen.aclose()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    @property
    def buffered(self) -> int:
        """Events of the last read not yet taken: 0 means the next one waits for the network."""
        return len(self._batch)

    @property
    def stats(self) -> StreamStats | None:
        """Timing up to the last chunk received (also after a cancel)."""
        return self._acc[0].live_stats() if self._acc else None


class ApiClient:
    """One connection pool to the engine's API; call :meth:`aclose` when done (or use ``async with``).

    A streamed answer is read as it arrives until its first token, then at most every
    ``stream_interval`` s: every wakeup of the process costs far more CPU than the bytes it reads, and
    a screen shows text in frames anyway. Timing stays exact on the plain-http path: each read carries
    the kernel's arrival time, so TTFT and tokens/s do not depend on when the client looked.
    ``stream_interval=0`` reads every piece at once.

    ``deadlines`` (also per request) bound every chat request (see the module text); without them only
    the read timeout (a single read that waits ``read_timeout`` s) ends a silent answer.
    ``health_timeout`` is the total deadline of ``/health``, ``/v1/models`` and ``/metrics``.
    ``via``: how the server is reached (:data:`Via`): whether those three are marked as the cockpit's
    probes and whether ``OPENAI_API_KEY`` may be sent.
    """

    def __init__(
        self,
        base_url: str,
        *,
        connect_timeout: float = 5.0,
        read_timeout: float = 600.0,
        health_timeout: float = 5.0,
        max_connections: int = 64,
        stream_interval: float = STREAM_INTERVAL,
        deadlines: StreamDeadlines | None = None,
        api_key: ApiKey | str | None = None,
        via: Via = "direct",
    ) -> None:
        env_key, mark_probes = _VIA[via]
        # credentials in the URL go into the Authorization header only: base_url is what messages show
        self.base_url, creds = split_credentials(base_url.rstrip("/"))
        self._key = _choose_key(api_key, creds, env_key)
        headers = dict(_HEADERS)
        if self._key is not None:
            headers["Authorization"] = self._key.bearer()
        elif creds:
            headers["Authorization"] = basic_auth(creds)
        self.stream_interval = stream_interval
        self.health_timeout = health_timeout
        self.deadlines = deadlines
        self._probe_params = {PROBE_PARAM: PROBE_VALUE} if mark_probes else None
        self._connect_timeout = connect_timeout
        self._read_timeout = read_timeout
        self._http = httpx.AsyncClient(
            base_url=self.base_url,
            trust_env=False,
            timeout=self._timeout(read_timeout),
            limits=httpx.Limits(max_connections=max_connections, max_keepalive_connections=max_connections),
            headers=headers,
            # Headers and body go out in separate writes: without TCP_NODELAY, Nagle holds the body
            # until the server's delayed ACK (~40 ms on Linux), which would show up in every TTFT.
            transport=httpx.AsyncHTTPTransport(
                verify=_context_for(self.base_url),
                socket_options=[(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)],
                limits=httpx.Limits(max_connections=max_connections,
                                    max_keepalive_connections=max_connections)),
        )
        self._raw = (
            rawstream.RawStreamer(
                self.base_url, connect_timeout=connect_timeout, read_timeout=read_timeout, headers=headers
            )
            if rawstream.supports(self.base_url)
            else None
        )

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    def __repr__(self) -> str:
        return f"ApiClient({self.base_url!r}, key={'yes' if self._key else 'no'})"

    @property
    def has_key(self) -> bool:
        """True if requests carry a bearer API key."""
        return self._key is not None

    def scrub(self, text: str) -> str:
        """``text`` without the API key in it (a gateway may echo it in an error body)."""
        return text if self._key is None else self._key.scrub(text)

    def _scrubbed(self, err: ApiError) -> ApiError:
        if self._key is None:
            return err
        return ApiError(err.kind, self.scrub(err.message), self.scrub(err.remedy), err.status)

    async def prepare(self, n: int) -> None:
        """Have ``n`` connections open for streamed requests, so that ``n`` requests sent together
        go out together (a benchmark's synchronized batch) instead of one on a kept connection and the
        rest after their connects. Best effort: a failure here shows in the requests themselves."""
        try:
            async with asyncio.timeout(self._connect_timeout + 1):
                if self._raw is not None:
                    await self._raw.preconnect(n)
                elif n > 1:  # httpx keeps the connections these cheap requests opened
                    await asyncio.gather(*(self._http.get("/v1/models")
                                           for _ in range(min(n, rawstream.MAX_KEEP))))
        except (ApiError, httpx.HTTPError, OSError, TimeoutError):
            return

    async def aclose(self) -> None:
        if self._raw is not None:
            await self._raw.aclose()
        await self._http.aclose()

    def _url(self, path: str) -> str:
        return self.base_url + path

    def _timeout(self, read: float) -> httpx.Timeout:
        return httpx.Timeout(connect=self._connect_timeout, read=read, write=30.0, pool=30.0)

    def _read_timeout_for(self, deadlines: StreamDeadlines | None) -> float | None:
        """A single read may wait as long as the deadlines allow (a long prefill sends nothing): the
        read timeout for a request under ``deadlines`` if it must be longer than the client's (by a
        second, so that the deadline and its message win)."""
        if deadlines is None or deadlines.longest + 1.0 <= self._read_timeout:
            return None
        return deadlines.longest + 1.0

    # plain endpoints ----------------------------------------------------------------------------

    async def health(self) -> ApiStatus:
        """``GET /health``: 200 ready, 503 engine dead, refused = not ready (booting or tunnel down)."""
        t0 = time.perf_counter()
        url = self._url("/health")

        def answer(state: ApiState, message: str, remedy: str = "", code: int | None = None) -> ApiStatus:
            return ApiStatus(state, message, remedy, self.base_url, http_status=code,
                             seconds=time.perf_counter() - t0)

        try:
            status, body = await self._fetch("GET", "/health", total=self.health_timeout,
                                             cap=MAX_HEALTH_BODY, params=self._probe_params)
        except ApiError as err:
            state: ApiState = (
                err.kind if err.kind in ("unreachable", "not_ready", "timeout")
                else "http_error" if err.kind == "too_large" else "unreachable"
            )
            return answer(state, err.message, err.remedy, err.status)
        if status == 200:
            return answer("ready", "ready: /health answered 200", "", 200)
        failure = self._scrubbed(from_status(status, body, url))
        answered: ApiState = ("engine_dead" if failure.kind == "engine_dead"
                              else "unauthorized" if failure.kind == "unauthorized" else "http_error")
        return answer(answered, failure.message, failure.remedy, status)

    async def _fetch(
        self, method: str, path: str, *, total: float | None, cap: int,
        expired: Callable[[], ApiError] | None = None, **kwargs: Any,
    ) -> tuple[int, bytes]:
        """One plain request read whole: its status and body. Raises :class:`ApiError`.

        ``total``: seconds for the whole answer, body included (then ``expired()``, or a timeout error);
        ``cap``: the most body bytes a 200 answer may have (more is a ``too_large`` error, and the rest is
        not read); an error answer's body is read up to its first 64 KiB only.
        """
        url = self._url(path)
        try:
            async with asyncio.timeout(total), self._http.stream(method, path, **kwargs) as resp:
                limit = cap if resp.status_code == 200 else _MAX_ERROR_BODY
                body = bytearray()
                async for piece in resp.aiter_bytes():
                    body += piece
                    if len(body) > limit:
                        if resp.status_code != 200:
                            del body[limit:]
                            break
                        raise too_large(url, cap)
                return resp.status_code, bytes(body)
        except TimeoutError:
            assert total is not None
            raise (expired() if expired else not_answered_in_time(url, total)) from None
        except httpx.HTTPError as exc:
            raise from_transport(exc, url) from None

    async def _request(
        self, method: str, path: str, *, total: float | None, cap: int,
        expired: Callable[[], ApiError] | None = None, **kwargs: Any,
    ) -> bytes:
        """:meth:`_fetch` of a request that must answer 200; its body. Raises :class:`ApiError`."""
        status, body = await self._fetch(method, path, total=total, cap=cap, expired=expired, **kwargs)
        if status != 200:
            raise self._scrubbed(from_status(status, body, self._url(path)))
        return body

    async def _get_json(self, path: str, cap: int) -> Any:
        url = self._url(path)
        return _json(await self._request("GET", path, total=self.health_timeout, cap=cap,
                                         params=self._probe_params), url)

    async def models(self) -> list[ModelInfo]:
        """``GET /v1/models``; raises :class:`ApiError`."""
        body = await self._get_json("/v1/models", MAX_MODELS_BODY)
        data = body.get("data") if isinstance(body, dict) else None
        if not isinstance(data, list):
            raise ApiError("protocol_error", "/v1/models has no 'data' list", REMEDY_PROTOCOL, 200)
        out = []
        for m in data:
            if not isinstance(m, dict) or not isinstance(m.get("id"), str):
                raise ApiError(
                    "protocol_error", f"/v1/models entry without an id: {m!r:.100}", REMEDY_PROTOCOL
                )
            mml = m.get("max_model_len")
            meta = m.get("meta")   # llama.cpp's llama-server: `meta.n_ctx`, its context per slot
            if mml is None and isinstance(meta, dict):
                mml = meta.get("n_ctx")
            owner, root = m.get("owned_by"), m.get("root")  # other servers put anything here
            out.append(ModelInfo(m["id"], owner if isinstance(owner, str) else None,
                                 mml if isinstance(mml, int) and not isinstance(mml, bool) and mml > 0
                                 else None,
                                 root if isinstance(root, str) else None))
        return out

    async def metrics_text(self) -> str:
        """``GET /metrics`` (Prometheus text); raises :class:`ApiError`."""
        body = await self._request("GET", "/metrics", total=self.health_timeout, cap=MAX_METRICS_BODY,
                                   params=self._probe_params)
        return body.decode("utf-8", "replace")

    # chat ---------------------------------------------------------------------------------------

    async def chat(self, request: ChatRequest, *, deadlines: StreamDeadlines | None = None) -> ChatResult:
        """Non-streamed chat completion; raises :class:`ApiError`. ``stats`` holds total time only.

        The answer comes whole, so all of it must come within the first-token deadline.
        """
        url = self._url(_CHAT_PATH)
        d = deadlines or self.deadlines
        total = d.first_token_s if d is not None and d.first_token_s != math.inf else None
        extra: dict[str, Any] = {}
        if (read := self._read_timeout_for(d)) is not None:
            extra["timeout"] = self._timeout(read)
        t0 = time.perf_counter()
        raw = await self._request(
            "POST", _CHAT_PATH, json=request.to_body(stream=False), total=total, cap=MAX_COMPLETION_BODY,
            expired=None if total is None else functools.partial(no_answer_within, total), **extra)
        t1 = time.perf_counter()
        body = _json(raw, url)
        if isinstance(body, dict) and ("error" in body or body.get("object") == "error"):
            raise self._scrubbed(from_status(500, raw[:_MAX_ERROR_BODY], url))
        try:
            result = result_from_response(body, None)
        except (TypeError, ValueError, ArithmeticError, RecursionError) as exc:  # StreamProtocolError too
            raise ApiError("protocol_error", f"{url}: {exc}", REMEDY_PROTOCOL, 200) from None
        completion = result.usage.completion_tokens if result.usage else None
        stats = StreamStats(t0, None, t1, completion, 1, 0.0, 0.0)   # no usage: no count (no deltas to count)
        return replace(result, stats=stats)

    async def chat_streamed(
        self, request: ChatRequest, *, deadlines: StreamDeadlines | None = None
    ) -> ChatResult:
        """Stream a request to the end and return its result with full timing; raises :class:`ApiError`."""
        async with self.chat_stream(request, deadlines=deadlines) as stream:
            async for event in stream:
                if isinstance(event, StreamError):
                    raise ApiError(event.kind, event.message, event.remedy, event.status)
                if isinstance(event, Finished):
                    return event.result
        raise ApiError("protocol_error", "stream ended without a result", REMEDY_PROTOCOL)

    def chat_stream(self, request: ChatRequest, *, deadlines: StreamDeadlines | None = None) -> ChatStream:
        """Streamed chat completion as typed events (see :class:`ChatStream`).

        ``deadlines`` (default: the client's): a stream that misses one ends with a
        ``first_token_timeout`` or ``idle_timeout`` :class:`StreamError` and its connection is closed.
        """
        holder: list[ChunkAccumulator] = []
        return ChatStream(self._stream(request, holder, deadlines or self.deadlines), holder)

    async def _stream(
        self, request: ChatRequest, holder: list[ChunkAccumulator], deadlines: StreamDeadlines | None
    ) -> AsyncGenerator[list[ChatEvent], None]:
        """One streamed request as lists of events, a list per body piece read.

        A single generator on purpose: every paced read wakes the whole stack of awaiting frames, and
        on a small VM a wakeup costs more than the bytes it brings (see perf/stream.py).
        """
        url = self._url(_CHAT_PATH)
        body = request.to_body(stream=True)
        acc = ChunkAccumulator(t_start=time.perf_counter())
        holder.append(acc)
        first: Callable[[], None] | None = None  # once, at the first token (raw path)
        answered = False  # the response head is in (an httpx failure after it is a drop, not "no answer")
        watch = None if deadlines is None else _deadline_watch(acc, deadlines)
        read_timeout = self._read_timeout_for(deadlines)
        try:
            async with contextlib.AsyncExitStack() as stack:
                if self._raw is not None:
                    payload = json.dumps(body, ensure_ascii=False, separators=(",", ":")).encode()
                    raw = await stack.enter_async_context(
                        self._raw.post(_CHAT_PATH, payload, watch=watch, read_timeout=read_timeout))
                    acc.t_start = raw.t_sent
                    status, ctype, pieces = raw.status, raw.content_type, raw.body()

                    def first_token(raw: rawstream.RawResponse = raw) -> None:
                        if self.stream_interval > 0:
                            raw.pace(self.stream_interval)  # from the first token on, read in frames
                        if watch is not None:
                            raw.rewatch()  # the idle deadline now, maybe sooner than the first-token one

                    if self.stream_interval > 0 or watch is not None:
                        first = first_token
                else:
                    opened = stack.enter_async_context(
                        self._http.stream("POST", _CHAT_PATH, json=body,
                                          headers={"Accept": "text/event-stream"},
                                          timeout=self._timeout(read_timeout or self._read_timeout))
                    )
                    resp = await (opened if watch is None else _within(watch, opened))
                    status, ctype = resp.status_code, resp.headers.get("content-type", "")
                    answered = True
                    pieces = (_read_now(resp.aiter_bytes()) if watch is None
                              else _read_watched(resp.aiter_bytes(), watch))
                if status != 200:
                    err = self._scrubbed(from_status(status, await _error_body(pieces), url))
                    yield [acc.fail(err.message, err.kind, err.remedy, err.status)]
                    return
                if "text/event-stream" not in ctype:
                    msg = f"{url} answered {ctype or 'no content type'}, not an event stream"
                    yield [acc.fail(msg, "protocol_error", REMEDY_PROTOCOL, status)]
                    return
                decoder = SseDecoder(MAX_EVENT_BYTES)
                drained = 0
                t = acc.t_start
                async for piece, t in pieces:
                    if acc.done:  # after [DONE] or an error: drain briefly so the connection is reusable
                        drained += len(piece)
                        if drained > _MAX_ERROR_BODY:
                            return
                        continue
                    batch: list[ChatEvent] = []
                    for sse in decoder.feed(piece):
                        batch += acc.feed(sse, t)
                    if batch:
                        failed = isinstance(batch[-1], StreamError)
                        if failed and self._key is not None:  # a server's error event, maybe echoing the key
                            last = batch[-1]
                            assert isinstance(last, StreamError)
                            batch[-1] = replace(last, message=self.scrub(last.message))
                        yield batch  # (the consumer takes the list's events: look before)
                        if failed:
                            return  # nothing more to wait for: the connection is closed, not drained
                    if first is not None and acc.first_token_seen:
                        first()
                        first = None
                if not acc.done:
                    batch = []
                    for sse in decoder.close():
                        batch += acc.feed(sse, t)
                    yield batch + acc.end_of_body(time.perf_counter())
        except httpx.HTTPError as exc:
            if not acc.done:
                err = from_transport(exc, url, answered=answered)
                yield [acc.fail(err.message, err.kind, err.remedy, err.status)]
        except ApiError as exc:
            if not acc.done:
                yield [acc.fail(exc.message, exc.kind, exc.remedy, exc.status)]
        except SseTooLarge as exc:
            if not acc.done:
                yield [acc.fail(str(exc), "too_large", REMEDY_TOO_LARGE)]
        except SseError as exc:
            if not acc.done:
                yield [acc.fail(str(exc), "protocol_error", REMEDY_PROTOCOL)]


def _choose_key(api_key: ApiKey | str | None, creds: tuple[str, str] | None, env_key: bool) -> ApiKey | None:
    """The bearer key: the one given, else none when the URL holds credentials (they are sent as basic
    auth), else ``OPENAI_API_KEY`` (unless ``env_key`` is off)."""
    if api_key is not None:
        return api_key if isinstance(api_key, ApiKey) else ApiKey(api_key)
    if creds is not None or not env_key:
        return None
    return key_from_env()


def _json(body: bytes, url: str) -> Any:
    """A JSON body, or a ``protocol_error`` (not JSON, not UTF-8, nested too deeply)."""
    try:
        return json.loads(body)
    except (json.JSONDecodeError, UnicodeDecodeError):
        raise ApiError("protocol_error", f"{url} did not answer JSON", REMEDY_PROTOCOL, 200) from None
    except RecursionError:
        raise ApiError("protocol_error", f"{url} answered JSON nested too deeply to read", REMEDY_PROTOCOL,
                       200) from None


def _deadline_watch(acc: ChunkAccumulator, deadlines: StreamDeadlines) -> rawstream.Watch:
    """The deadlines of one stream as a :data:`rawstream.Watch` over its accumulator."""
    first, idle = deadlines.first_token_s, deadlines.idle_s

    def watch(now: float) -> ApiError | float:
        last = acc.last_token_at
        if last is None:
            due = acc.t_start + first
            return no_first_token(first) if now >= due else due
        due = last + idle
        return no_token_for(idle) if now >= due else due

    return watch


async def _within(watch: rawstream.Watch, awaitable: Awaitable[Any]) -> Any:
    """``await awaitable`` until ``watch`` falls due, then raise its error (httpx path: one timeout per
    read; nothing arrives meanwhile, so the due time cannot move while it waits)."""
    now = time.perf_counter()
    due = watch(now)
    if isinstance(due, ApiError):
        with contextlib.suppress(AttributeError):
            awaitable.close()  # type: ignore[attr-defined]  # a coroutine never awaited
        raise due
    if due == math.inf:  # no deadline (0 in the config)
        return await awaitable
    try:
        async with asyncio.timeout(due - now):
            return await awaitable
    except TimeoutError:
        late = watch(max(time.perf_counter(), due))
        raise (late if isinstance(late, ApiError) else no_first_token(due - now)) from None


async def _read_watched(pieces: AsyncIterator[bytes], watch: rawstream.Watch
                        ) -> AsyncIterator[tuple[bytes, float]]:
    """:func:`_read_now` under the stream deadlines (the httpx path)."""
    clock = time.perf_counter
    it = aiter(pieces)
    while True:
        try:
            piece = await _within(watch, anext(it))
        except StopAsyncIteration:
            return
        yield piece, clock()


async def _read_now(pieces: AsyncIterator[bytes]) -> AsyncIterator[tuple[bytes, float]]:
    """Body pieces stamped with the time this process read them (httpx has no kernel arrival time)."""
    clock = time.perf_counter
    async for piece in pieces:
        yield piece, clock()


async def _error_body(pieces: AsyncIterator[tuple[bytes, float]]) -> bytes:
    """The start of an error response's body (enough for its message)."""
    raw = b""
    async for piece, _t in pieces:
        raw += piece
        if len(raw) >= _MAX_ERROR_BODY:
            break
    return raw
