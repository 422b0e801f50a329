"""Every way a request to the engine can fail, as a typed error with a human message and a remedy."""

from __future__ import annotations

import errno
import json
import re
from collections.abc import Callable
from typing import Any

from cockpit.api.httplib import httpx
from cockpit.api.stream import REMEDY_PROTOCOL, ErrorKind, error_message
from cockpit.safetext import neutralise

REMEDY_REFUSED = (
    "If the engine is starting, wait for 'Application startup complete.' in rank 0's log; "
    "otherwise check the SSH tunnel to rank 0 (or the --api-url)."
)
REMEDY_DROPPED = (
    "The connection broke mid-answer (the part that arrived is kept): the engine may have died or the SSH "
    "tunnel dropped; `r37-cockpit status`, and rank 0's last lines: `r37-cockpit logs --rank 0 -n 200`."
)
REMEDY_NOT_READY = (
    "The tunnel is up but nothing answers on rank 0's API port yet: the engine is still booting "
    "(or the container is down; check `docker ps` on rank 0)."
)
REMEDY_DEAD = "The engine died: read the last lines of rank 0's container log, stop all ranks, relaunch."
REMEDY_TIMEOUT = "The engine did not answer in time: check /metrics for a hang and rank 0's log."
REMEDY_HUNG = (
    "The engine may be hung: `r37-cockpit status`; collect rank 0's last lines with "
    "`r37-cockpit logs --rank 0 -n 200`, stop head first (`r37-cockpit stop`), relaunch."
)
REMEDY_KEY = (
    "Pass the gateway's key with --api-key KEY or the OPENAI_API_KEY environment variable (sent as "
    "'Authorization: Bearer …'); if one was sent, it was refused: check it is this server's key."
)
REMEDY_SERVER_FAILED = (
    "The server failed on the request. Some servers answer a request they reject (an unknown parameter, "
    "a bad model name) with 500: check --model and the options; for the cockpit's engine, rank 0's log."
)
MAX_DETAIL_CHARS = 300
"""The most characters of a server's error text kept in a message (one line, controls shown)."""
REMEDY_NO_FIRST_TOKEN = (
    REMEDY_HUNG + " (A long prompt's prefill may need more: [engine] first_token_timeout_s or --timeout S.)"
)


class ApiError(Exception):
    """A failed API call: ``kind`` for code, ``message`` and ``remedy`` for humans."""

    def __init__(self, kind: ErrorKind, message: str, remedy: str = "", status: int | None = None):
        super().__init__(message)
        self.kind: ErrorKind = kind
        self.message = message
        self.remedy = remedy
        self.status = status

    def __str__(self) -> str:
        return f"{self.kind}: {self.message}" + (f" ({self.remedy})" if self.remedy else "")

    def __repr__(self) -> str:
        return f"ApiError(kind={self.kind!r}, message={self.message!r}, status={self.status!r})"


def _caused_by(exc: BaseException, test: Callable[[BaseException], bool]) -> bool:
    """True if ``test`` holds for ``exc`` or an exception it was raised from."""
    seen: set[int] = set()
    cur: BaseException | None = exc
    while cur is not None and id(cur) not in seen:
        seen.add(id(cur))
        if test(cur):
            return True
        cur = cur.__cause__ or cur.__context__
    return False


def is_refused(exc: BaseException) -> bool:
    """True if ``exc`` (or an exception it was raised from) is a refused connection."""
    return _caused_by(exc, lambda e: isinstance(e, ConnectionRefusedError)
                      or getattr(e, "errno", None) == errno.ECONNREFUSED
                      or "connection refused" in str(e).lower() or "connect call failed" in str(e).lower())


def connect_timed_out(url: str) -> ApiError:
    """Nothing answered the connect in time."""
    return ApiError("unreachable", f"no answer connecting to {url} (connect timeout)", REMEDY_REFUSED)


def connect_failed(url: str, exc: BaseException) -> ApiError:
    """The connect failed: refused (booting or tunnel down) or another socket error."""
    if is_refused(exc):
        return ApiError(
            "unreachable", f"not ready (booting or tunnel down): connection refused at {url}", REMEDY_REFUSED
        )
    return ApiError("unreachable", f"cannot connect to {url}: {exc}", REMEDY_REFUSED)


def closed_without_response(url: str) -> ApiError:
    """The server accepted the connection and closed it before answering."""
    return ApiError(
        "not_ready", f"not ready: {url} closed the connection without a response", REMEDY_NOT_READY
    )


def dropped(url: str, detail: object) -> ApiError:
    """The connection broke in the middle of a response."""
    return ApiError("unreachable", f"connection to {url} dropped: {detail}", REMEDY_DROPPED)


def no_first_token(seconds: float) -> ApiError:
    """The first-token deadline passed: nothing but comments, keep-alives or empty chunks came."""
    return ApiError("first_token_timeout", f"no first token within {seconds:g} s", REMEDY_NO_FIRST_TOKEN)


def no_token_for(seconds: float) -> ApiError:
    """The idle deadline passed mid-answer."""
    return ApiError("idle_timeout", f"no token for {seconds:g} s mid-answer", REMEDY_HUNG)


def no_answer_within(seconds: float) -> ApiError:
    """A non-streamed answer (it comes whole) did not come within the first-token deadline."""
    return ApiError("first_token_timeout", f"no answer within {seconds:g} s", REMEDY_NO_FIRST_TOKEN)


def not_answered_in_time(url: str, seconds: float) -> ApiError:
    """A plain request (``/health``, ``/v1/models``) was not answered whole within its total deadline."""
    return ApiError(
        "timeout", f"{url}: no complete answer within {seconds:g} s (silent or trickling)", REMEDY_TIMEOUT
    )


def too_large(url: str, cap: int) -> ApiError:
    """A plain answer's body passed its cap (the rest was not read)."""
    return ApiError("too_large", f"{url}: answer larger than {_size(cap)} (the rest was not read)",
                    REMEDY_PROTOCOL)


def _size(n: int) -> str:
    return f"{n // (1024 * 1024)} MiB" if n >= 1024 * 1024 else f"{n // 1024} KiB"


def _reset(exc: BaseException) -> bool:
    """True if ``exc`` was raised from a connection reset."""
    return _caused_by(exc, lambda e: isinstance(e, ConnectionResetError)
                      or getattr(e, "errno", None) == errno.ECONNRESET)


def from_transport(exc: httpx.HTTPError, url: str, *, answered: bool = False) -> ApiError:
    """Map an httpx transport exception to an :class:`ApiError`.

    ``answered``: the response head had arrived. Before it, a reset is the same as a close without a
    response (an SSH tunnel whose far end refuses resets or closes the local connection, either way).
    """
    if isinstance(exc, httpx.ConnectTimeout):
        return connect_timed_out(url)
    if isinstance(exc, httpx.TimeoutException):
        return ApiError(
            "timeout", f"{url}: {type(exc).__name__} ({exc or 'no data in time'})", REMEDY_TIMEOUT
        )
    if isinstance(exc, httpx.ConnectError):
        return connect_failed(url, exc)
    if isinstance(exc, httpx.RemoteProtocolError) and "without sending" in str(exc):
        return closed_without_response(url)
    if not answered and isinstance(exc, httpx.ReadError) and _reset(exc):
        return closed_without_response(url)
    if isinstance(exc, httpx.RemoteProtocolError | httpx.ReadError | httpx.WriteError):
        return dropped(url, exc)
    if isinstance(exc, httpx.UnsupportedProtocol | httpx.InvalidURL):
        return ApiError("unreachable", f"bad API URL {url!r}: {exc}", "Use http://HOST:PORT (see --api-url).")
    return ApiError("protocol_error", f"{url}: {type(exc).__name__}: {exc}", REMEDY_PROTOCOL)


def from_status(status: int, body: bytes, url: str) -> ApiError:
    """Map a non-2xx HTTP answer to an :class:`ApiError`, with vLLM's error message when there is one."""
    detail = _body_message(body)
    if status == 503:
        return ApiError(
            "engine_dead",
            f"engine dead: {url} answered 503" + (f": {detail}" if detail else ""),
            REMEDY_DEAD,
            status,
        )
    if status in (401, 403):
        return ApiError(
            "unauthorized",
            f"API key needed or refused: {url} answered {status}" + (f": {detail}" if detail else ""),
            REMEDY_KEY,
            status,
        )
    remedy = _remedy_for(status, detail) or {
        400: "The server rejected the request (model name, max_tokens against the context, image count).",
        404: "Wrong path or model name: check --api-url and the served model name in /v1/models.",
        413: "The request is too large (images or prompt): send less.",
        422: "The request body is invalid for this server version.",
        501: "The server does not implement this (HTTP 501 Not Implemented): a feature it lacks or has "
             "switched off, not a failure of the request; its message says which.",
    }.get(status, REMEDY_SERVER_FAILED if status >= 500 else "")
    return ApiError(
        "http_error", f"HTTP {status} from {url}" + (f": {detail}" if detail else ""), remedy, status
    )


# What the server's own message says went wrong, for 400/404/422 (real vLLM 0.32's texts:
# docs/vllm.md#errors; llama.cpp's: docs/llamacpp.md): the first pattern that matches gives the remedy, so
# it names the actual cause, not every possible one.
_REMEDY_BY_MESSAGE: tuple[tuple[frozenset[int], re.Pattern[str], str], ...] = (
    (frozenset({400}), re.compile(r"--enable-auto-tool-choice|--tool-call-parser"),
     "The server was started without the tool-calling flags the request needs (see the message): "
     "`tool_choice: auto` needs vLLM's `--enable-auto-tool-choice` and `--tool-call-parser NAME`, a named "
     "tool_choice `--tool-call-parser NAME` (rank 0's serve command); without them, send no tool_choice."),
    (frozenset({400}), re.compile(r"max_model_len|maximum context length|max_tokens|exceeds the available "
                                  r"context size", re.IGNORECASE),
     "The prompt plus max_tokens exceed the served context (--max-model-len; llama.cpp's llama-server: "
     "-c, shared by its slots): ask for fewer tokens (--max-tokens) or send a shorter prompt."),
    (frozenset({400, 404}), re.compile(r"model .* does not exist", re.IGNORECASE),
     "Wrong model name: use one the server lists in /v1/models (--model), or leave --model out."),
    (frozenset({400, 422}), re.compile(r"validation error|json_invalid|Field required|^'\w+' is required$"),
     "The server could not read the request body (invalid JSON or a missing field): a client bug or a "
     "server version that expects another request shape; check --api-url points at vLLM's OpenAI server."),
    (frozenset({400}), re.compile(r"\b(?:temperature|top_p|top_k|min_p|presence_penalty|frequency_penalty)\b"
                                  r".*(?:must|got)"),
     "A sampling option is out of the server's range (see the message): use a value it accepts."),
    # llama.cpp's llama-server: a body that is not JSON is a 500 with nlohmann's parse error, an image for
    # a model without a projector a 500, an unknown path a 404 "File Not Found" (docs/llamacpp.md)
    (frozenset({400, 500}), re.compile(r"\[json\.exception\.parse_error"),
     "The server could not read the request body (it is not valid JSON): a client bug, not a failure of "
     "the server; check what sent it."),
    (frozenset({400, 500}), re.compile(r"image input is not supported"),
     "The served model takes no images (not a failure of the server): send the request without images, or "
     "serve a vision model (llama.cpp's llama-server: with its projector, --mmproj FILE)."),
    (frozenset({404}), re.compile(r"^(?:File )?Not Found$"),
     "Wrong path: the server has no such route; check --api-url (the server's base URL)."),
)


def _remedy_for(status: int, detail: str) -> str:
    for statuses, pattern, remedy in _REMEDY_BY_MESSAGE:
        if status in statuses and pattern.search(detail):
            return remedy
    return ""


def _body_message(body: bytes) -> str:
    """A server's error text as one bounded line: JSON's message, else the text (a traceback: its
    last line)."""
    text = body.decode("utf-8", "replace").strip()
    if not text:
        return ""
    try:
        payload: Any = json.loads(text)
    except (json.JSONDecodeError, RecursionError):
        return one_line(text)
    return one_line(error_message(payload)[0])


_TRACEBACK = "Traceback (most recent call last)"
_BREAKS = re.compile(r"[ \t\r\n\f\v]+")


def one_line(text: str, limit: int = MAX_DETAIL_CHARS) -> str:
    """Untrusted error text as one line of at most ``limit`` characters: a Python traceback becomes its
    last line (the exception), line breaks and runs of space one space, other controls visible symbols
    (``cockpit.safetext``)."""
    text = text[: 64 * 1024]
    if _TRACEBACK in text:
        lines = [ln.strip() for ln in text[text.index(_TRACEBACK):].splitlines() if ln.strip()]
        text = "server traceback, ending: " + (lines[-1] if lines else "")
    text = _BREAKS.sub(" ", text).strip()
    text = text if len(text) <= limit else text[: limit - 1] + "…"
    return neutralise(text)
