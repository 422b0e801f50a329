"""The OpenAI-compatible HTTP API on rank 0, in vLLM's wire format (aiohttp)."""

from __future__ import annotations

import hashlib
import json
import random
import sys
import time
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from http import HTTPStatus
from typing import Any

from aiohttp import web
from aiohttp.abc import AbstractAccessLogger

from cockpit.sim.engine import images, textgen, tokens
from cockpit.sim.engine.arrival import ARRIVAL, note_arrival
from cockpit.sim.engine.core import EngineCore, Request, Token, build_output, sleep_until
from cockpit.sim.engine.metrics import render
from cockpit.sim.engine.tracebacks import VLLM_VERSION

EFFORTS = {"low": 25, "high": 50, "xhigh": 75, "max": 100}
MAX_IMAGES = 4


class ApiError(Exception):
    """A request error returned in vLLM's error JSON shape."""

    def __init__(
        self, message: str, status: int = 400, kind: str = "BadRequestError", param: str | None = None
    ) -> None:
        super().__init__(message)
        self.message, self.status, self.kind, self.param = message, status, kind, param

    def body(self) -> dict[str, Any]:
        return {
            "error": {"message": self.message, "type": self.kind, "param": self.param, "code": self.status}
        }

    def response(self) -> web.Response:
        return web.json_response(self.body(), status=self.status)


@dataclass
class ParsedRequest:
    """A validated chat completion request."""

    chat: textgen.ChatInput
    prompt_tokens: int
    prompt_key: list[str]
    max_tokens: int
    stop: list[str]
    stream: bool
    include_usage: bool
    continuous_usage: bool  # vLLM's stream_options.continuous_usage_stats: usage so far on every chunk
    named_tool: bool
    body: dict[str, Any] = field(default_factory=dict)


def _effort(value: Any) -> int:
    if isinstance(value, bool):
        raise ApiError(f"Invalid reasoning_effort {value!r}", param="reasoning_effort")
    if isinstance(value, int) and 1 <= value <= 100:
        return value
    if isinstance(value, str) and value in EFFORTS:
        return EFFORTS[value]
    if isinstance(value, str) and value.isdigit() and 1 <= int(value) <= 100:
        return int(value)
    raise ApiError(
        f"Invalid reasoning_effort {value!r}: use low, high, xhigh, max or an integer 1-100",
        param="reasoning_effort",
    )


def _messages(
    raw: Any, max_images: int = MAX_IMAGES
) -> tuple[list[dict[str, Any]], list[str], list[tuple[int, int]]]:
    if not isinstance(raw, list) or not raw:
        raise ApiError("messages: field required and must be a non-empty list", param="messages")
    out, texts, sizes = [], [], []
    n_images = 0
    for i, m in enumerate(raw):
        if not isinstance(m, dict) or m.get("role") not in (
            "system",
            "developer",
            "user",
            "assistant",
            "tool",
        ):
            raise ApiError(
                f"messages[{i}]: each message needs a role of system, user, assistant or tool",
                param="messages",
            )
        content, text_parts, pics = m.get("content"), [], []
        if isinstance(content, str):
            text_parts.append(content)
        elif isinstance(content, list):
            for part in content:
                kind = part.get("type") if isinstance(part, dict) else None
                if kind == "text":
                    text_parts.append(str(part.get("text", "")))
                elif kind == "image_url":
                    n_images += 1
                    if n_images > max_images:
                        raise ApiError(f"At most {max_images} image(s) may be provided in one prompt.")
                    url = part.get("image_url", {})
                    url = url.get("url", "") if isinstance(url, dict) else str(url)
                    try:
                        pics.append(images.parse_data_url(url))
                    except images.ImageError as exc:
                        raise ApiError(str(exc), param="messages") from exc
                else:
                    raise ApiError(f"messages[{i}]: unsupported content part type {kind!r}", param="messages")
        elif content is not None:
            raise ApiError(f"messages[{i}].content must be a string or a list of parts", param="messages")
        if m.get("tool_calls"):
            text_parts.append(json.dumps(m["tool_calls"]))
        text = "\n".join(text_parts)
        out.append({"role": m["role"], "text": text, "images": pics})
        texts.append(text)
        sizes += [(p.width, p.height) for p in pics]
    return out, texts, sizes


def parse(body: Any, served: str, max_model_len: int, max_images: int = MAX_IMAGES) -> ParsedRequest:
    """Validate a chat completion body; raises ApiError with vLLM-style messages."""
    if not isinstance(body, dict):
        raise ApiError("Request body must be a JSON object")
    model = body.get("model", served)
    if model != served:
        raise ApiError(f"The model `{model}` does not exist. Valid aliases: {served}.", 404,
                       "NotFoundError", "model")
    msgs, texts, sizes = _messages(body.get("messages"), max_images)
    tools = body.get("tools") or []
    if not isinstance(tools, list) or any(not isinstance(t, dict) or "function" not in t for t in tools):
        raise ApiError("tools must be a list of {type: function, function: {...}} objects", param="tools")
    choice = body.get("tool_choice", "auto" if tools else "none")
    named = isinstance(choice, dict)
    if named:
        name = choice.get("function", {}).get("name")
        if name not in {t["function"].get("name") for t in tools}:
            raise ApiError(f"Tool '{name}' has not been passed in `tools`.", param="tool_choice")
    elif choice not in ("auto", "none", "required"):
        raise ApiError(f"Invalid tool_choice {choice!r}", param="tool_choice")
    kwargs = body.get("chat_template_kwargs") or {}
    if not isinstance(kwargs, dict):
        raise ApiError("chat_template_kwargs must be an object", param="chat_template_kwargs")
    thinking = kwargs.get("thinking", kwargs.get("enable_thinking", True))
    effort_raw = body.get("reasoning_effort", kwargs.get("reasoning_effort", "xhigh"))
    effort = _effort(effort_raw)
    temperature = body.get("temperature", 1.0)
    top_p = body.get("top_p", 0.95)
    if not isinstance(temperature, (int, float)) or temperature < 0:
        raise ApiError("temperature must be non-negative", param="temperature")
    if not isinstance(top_p, (int, float)) or not 0 < top_p <= 1:
        raise ApiError("top_p must be in (0, 1]", param="top_p")
    if body.get("n", 1) != 1:
        raise ApiError("Only n=1 is supported by the simulated engine", param="n")
    prompt = tokens.prompt_tokens(texts, sizes, tools)
    max_tokens = body.get("max_completion_tokens", body.get("max_tokens"))
    if max_tokens is None:
        max_tokens = max_model_len - prompt
    if not isinstance(max_tokens, int) or isinstance(max_tokens, bool) or max_tokens < 1:
        raise ApiError("max_tokens must be a positive integer", param="max_tokens")
    if prompt + max_tokens > max_model_len:
        raise ApiError(
            f"This model's maximum context length is {max_model_len} tokens. However, you requested "
            f"{prompt + max_tokens} tokens ({prompt} in the messages, {max_tokens} in the "
            "completion). Please reduce the length of the messages or completion."
        )
    stop = body.get("stop") or []
    stop = [stop] if isinstance(stop, str) else stop
    if not isinstance(stop, list) or not all(isinstance(s, str) for s in stop):
        raise ApiError("stop must be a string or a list of strings", param="stop")
    key_text = json.dumps([[m["role"], m["text"]] for m in msgs]) + json.dumps(tools)
    if temperature == 0:
        seed = int(hashlib.sha1(key_text.encode()).hexdigest()[:12], 16)
    elif isinstance(body.get("seed"), int):
        seed = int(hashlib.sha1(f"{key_text}{body['seed']}".encode()).hexdigest()[:12], 16)
    else:
        seed = random.getrandbits(48)
    chat = textgen.ChatInput(
        messages=msgs, tools=tools, tool_choice=choice, thinking=bool(thinking), effort=effort, seed=seed
    )
    opts = body.get("stream_options") or {}
    return ParsedRequest(
        chat=chat,
        prompt_tokens=prompt,
        prompt_key=tokens.tokenize(key_text),
        max_tokens=max_tokens,
        stop=stop,
        stream=bool(body.get("stream", False)),
        include_usage=bool(opts.get("include_usage", False)),
        continuous_usage=bool(opts.get("include_usage", False) and opts.get("continuous_usage_stats", False)),
        named_tool=named,
        body=body,
    )


def deltas(toks: list[Token]) -> list[dict[str, Any]]:
    """Group one step's tokens into stream deltas (text kinds merge; each tool header is its own delta)."""
    out: list[dict[str, Any]] = []
    cur: dict[str, Any] | None = None
    for t in toks:
        if t.kind in ("reasoning", "content"):
            if cur is None or "tool_calls" in cur:
                cur = {}
                out.append(cur)
            cur[t.kind] = cur.get(t.kind, "") + t.text
        elif t.kind == "tool_head":
            cur = {
                "tool_calls": [
                    {"index": t.index, "id": t.call_id, "type": "function", "function": {"name": t.name}}
                ]
            }
            out.append(cur)
            cur = None
        elif t.kind == "tool_args":
            same = cur is not None and "tool_calls" in cur and cur["tool_calls"][0]["index"] == t.index
            if not same:
                cur = {"tool_calls": [{"index": t.index, "function": {"arguments": ""}}]}
                out.append(cur)
            assert cur is not None
            cur["tool_calls"][0]["function"]["arguments"] += t.text
    return out


class ChatAPI:
    """Routes and state of the HTTP API; `core` does the scheduling."""

    def __init__(
        self, core: EngineCore, model_path: str, schedule_info: dict[str, Any], max_images: int = MAX_IMAGES
    ) -> None:
        self.core = core
        self.max_images = max_images
        self.model_path = model_path
        self.schedule_info = schedule_info
        self.created = int(time.time())
        self.alive = True
        # answers under way, by request ID: the engine's request and its HTTP request
        self.open: dict[str, tuple[Request, web.Request]] = {}

    def app(self) -> web.Application:
        app = web.Application(client_max_size=64 * 1024 * 1024, middlewares=[note_arrival, starlette_errors])
        app.add_routes(
            [
                web.get("/health", self.health),
                web.get("/v1/models", self.models),
                web.get("/metrics", self.metrics),
                web.get("/version", self.version),
                web.get("/sim/schedule", self.schedule),
                web.post("/v1/chat/completions", self.chat),
            ]
        )
        return app

    async def health(self, _: web.Request) -> web.Response:
        return web.Response(status=200 if self.alive else 503)

    async def version(self, _: web.Request) -> web.Response:
        return web.json_response({"version": VLLM_VERSION})

    async def schedule(self, _: web.Request) -> web.Response:
        return web.json_response({"sim_only": True, **self.schedule_info})

    async def models(self, _: web.Request) -> web.Response:
        perm = {
            "id": "modelperm-" + uuid.uuid5(uuid.NAMESPACE_URL, self.core.model).hex,
            "object": "model_permission",
            "created": self.created,
            "allow_create_engine": False,
            "allow_sampling": True,
            "allow_logprobs": True,
            "allow_search_indices": False,
            "allow_view": True,
            "allow_fine_tuning": False,
            "organization": "*",
            "group": None,
            "is_blocking": False,
        }
        return web.json_response(
            {
                "object": "list",
                "data": [
                    {
                        "id": self.core.model,
                        "object": "model",
                        "created": self.created,
                        "owned_by": "vllm",
                        "root": self.model_path,
                        "parent": None,
                        "max_model_len": self.core.max_model_len,
                        "permission": [perm],
                    }
                ],
            }
        )

    async def metrics(self, _: web.Request) -> web.Response:
        c = self.core
        text = render(c.stats, c.model, len(c.running), len(c.waiting), c.kv_usage())
        return web.Response(
            text=text,
            content_type="text/plain",
            charset="utf-8",
            headers={"X-Content-Format": "text/plain; version=0.0.4"},
        )

    async def chat(self, request: web.Request) -> web.StreamResponse:
        arrival = request[ARRIVAL]  # the engine's clock for this request starts here
        if not self.alive:
            return ApiError("Engine is dead", 503, "ServiceUnavailableError").response()
        self.core.parsing += 1  # a burst's first step waits for the requests still being parsed
        try:
            try:
                body = await request.json()
            except (json.JSONDecodeError, UnicodeDecodeError) as exc:
                return ApiError(f"JSON decode error: {exc}").response()
            try:
                pr = parse(body, self.core.model, self.core.max_model_len, self.max_images)
            except ApiError as exc:
                return exc.response()
            plan = textgen.plan(pr.chat)
            out, finish, stop_reason = build_output(plan, pr.max_tokens, pr.stop)
            req = Request(
                rid="chatcmpl-" + uuid.uuid4().hex,
                prompt_tokens=pr.prompt_tokens,
                prompt_key=pr.prompt_key,
                out=out,
                finish_reason=finish,
                stop_reason=stop_reason,
                arrival=arrival,
            )
            self.core.submit(req)
        finally:
            self.core.parsing -= 1
        self.open[req.rid] = (req, request)
        try:
            if pr.stream:
                return await self._stream(request, pr, req)
            return await self._complete(pr, req)
        finally:
            self.open.pop(req.rid, None)
            self.core.abort(req)

    def _usage(self, pr: ParsedRequest, req: Request) -> dict[str, Any]:
        return {
            "prompt_tokens": pr.prompt_tokens,
            "total_tokens": pr.prompt_tokens + req.pos,
            "completion_tokens": req.pos,
            "completion_tokens_details": {"reasoning_tokens": req.reasoning_tokens},
        }

    def _finish_reason(self, pr: ParsedRequest, engine_reason: str, had_tools: bool) -> str:
        return "tool_calls" if had_tools and not pr.named_tool and engine_reason == "stop" else engine_reason

    async def _stream(self, request: web.Request, pr: ParsedRequest, req: Request) -> web.StreamResponse:
        resp = web.StreamResponse(
            headers={"Content-Type": "text/event-stream; charset=utf-8", "Cache-Control": "no-cache"}
        )
        await resp.prepare(request)
        created = int(time.time())
        base = {
            "id": req.rid,
            "object": "chat.completion.chunk",
            "created": created,
            "model": self.core.model,
        }

        def frame(obj: dict[str, Any] | str) -> str:
            data = obj if isinstance(obj, str) else json.dumps(obj, ensure_ascii=False, separators=(",", ":"))
            return f"data: {data}\n\n"

        def chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
            choice: dict[str, Any] = {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}
            if finish is not None:
                choice["stop_reason"] = req.stop_reason
            return {**base, "choices": [choice]}

        try:
            first_sent = False
            async for frames, due in self._pump(pr, req, chunk, base):
                data = "".join(map(frame, frames)).encode()
                await sleep_until(due)
                if req.first_token and not first_sent:  # the engine's TTFT is when the token left
                    first_sent = True
                    req.first_token = max(req.first_token, time.monotonic())
                await resp.write(data)
        except ConnectionResetError:  # the client went away; the caller aborts the request
            return resp
        if req.gone:                  # a stalled stream whose client went away: nothing more to send
            return resp
        await resp.write_eof()
        return resp

    async def _pump(
        self, pr: ParsedRequest, req: Request, chunk: Any, base: dict[str, Any]
    ) -> AsyncIterator[tuple[list[dict[str, Any] | str], float]]:
        """The request's SSE payloads, one list per engine step with the time it is due (one write each)."""
        role_sent, had_tools, due, sent = False, False, 0.0, 0

        def counted(c: dict[str, Any]) -> dict[str, Any]:
            if pr.continuous_usage:
                c["usage"] = {"prompt_tokens": pr.prompt_tokens, "total_tokens": pr.prompt_tokens + sent,
                              "completion_tokens": sent}
            return c

        while True:
            ev = await req.events.get()
            if ev[0] == "gone":       # its client closed the connection while the stream stalled
                return
            out: list[dict[str, Any] | str] = []
            if not role_sent:
                out.append(counted(chunk({"role": "assistant", "content": ""})))
                role_sent = True
            if ev[0] == "error":
                out.append({"error": ApiError(ev[1], 500, "InternalServerError").body()["error"]})
                break
            if ev[0] != "tokens":
                yield out, due
                continue
            _, toks, finish, due = ev
            sent += len(toks)
            parts = deltas(toks)
            had_tools = had_tools or any("tool_calls" in d for d in parts)
            reason = self._finish_reason(pr, finish, had_tools) if finish else None
            if not parts and reason:
                parts = [{}]
            out += [counted(chunk(d, reason if i == len(parts) - 1 else None)) for i, d in enumerate(parts)]
            if finish:
                break
            yield out, due
        if pr.include_usage and req.pos and not req.aborted:
            out.append({**base, "choices": [], "usage": self._usage(pr, req)})
        out.append("[DONE]")
        yield out, due

    async def _complete(self, pr: ParsedRequest, req: Request) -> web.Response:
        """Wait for the whole answer and return one chat.completion object."""
        finish = "stop"
        while True:
            ev = await req.events.get()
            if ev[0] == "gone":       # its client closed the connection while the answer stalled
                return web.Response(status=499)
            if ev[0] == "error":
                return ApiError(ev[1], 500, "InternalServerError").response()
            if ev[0] == "tokens" and ev[2]:
                finish = ev[2]
                await sleep_until(ev[3])
                break
        toks = req.out[: req.pos]
        content = "".join(t.text for t in toks if t.kind == "content")
        reasoning = "".join(t.text for t in toks if t.kind == "reasoning")
        calls: dict[int, dict[str, Any]] = {}
        for t in toks:
            if t.kind == "tool_head":
                calls[t.index] = {
                    "id": t.call_id,
                    "type": "function",
                    "function": {"name": t.name, "arguments": ""},
                }
            elif t.kind == "tool_args":
                calls[t.index]["function"]["arguments"] += t.text
        message: dict[str, Any] = {
            "role": "assistant",
            "content": content if content or not calls else None,
            "refusal": None,
            "annotations": None,
            "audio": None,
            "function_call": None,
            "tool_calls": [calls[i] for i in sorted(calls)],
            "reasoning": reasoning or None,
        }
        choice = {
            "index": 0,
            "message": message,
            "logprobs": None,
            "finish_reason": self._finish_reason(pr, finish, bool(calls)),
            "stop_reason": req.stop_reason,
        }
        return web.json_response(
            {
                "id": req.rid,
                "object": "chat.completion",
                "created": int(time.time()),
                "model": self.core.model,
                "choices": [choice],
                "usage": self._usage(pr, req),
                "prompt_logprobs": None,
            }
        )


_PHRASES = {s.value: s.phrase for s in HTTPStatus}


@web.middleware
async def starlette_errors(request: web.Request, handler: Any) -> web.StreamResponse:
    """An unknown path or method answers as vLLM's FastAPI server does: `{"detail":"Not Found"}`."""
    try:
        response: web.StreamResponse = await handler(request)
        return response
    except (web.HTTPNotFound, web.HTTPMethodNotAllowed) as exc:
        return web.json_response({"detail": _PHRASES.get(exc.status, exc.reason)}, status=exc.status)


class UvicornAccessLog(AbstractAccessLogger):
    """uvicorn's access log as vLLM's API server writes it, one line per HTTP request on stdout:
    `INFO:     127.0.0.1:43686 - "GET /health HTTP/1.1" 200 OK` (no process tag, no time stamp)."""

    def log(self, request: web.BaseRequest, response: web.StreamResponse, time: float) -> None:
        peer = request.transport.get_extra_info("peername") if request.transport else None
        who = f"{peer[0]}:{peer[1]}" if isinstance(peer, tuple) and len(peer) >= 2 else "-"
        phrase = _PHRASES.get(response.status, "")
        line = (f'INFO:     {who} - "{request.method} {request.path_qs} HTTP/{request.version.major}.'
                f'{request.version.minor}" {response.status} {phrase}').rstrip()
        sys.stdout.write(line + "\n")
        sys.stdout.flush()


async def start_site(api: ChatAPI, host: str, port: int) -> web.AppRunner:
    """Serve the API on host:port; returns the runner (call .cleanup() to stop)."""
    runner = web.AppRunner(api.app(), access_log_class=UvicornAccessLog, handle_signals=False,
                           shutdown_timeout=0.5)
    await runner.setup()
    site = web.TCPSite(runner, host, port, reuse_address=True)
    await site.start()
    return runner
