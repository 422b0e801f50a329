"""`r37-cockpit chat` (one streamed request, headless) and `r37-cockpit smoke` (the card's smoke test).

Both reach rank 0's API through an SSH local forward (only rank 0's connection is opened), or through
``--api-url`` (a gateway; then no cluster.toml is needed). The answer goes to stdout, thinking text to
stderr (labelled, dimmed on a terminal), so ``chat … > answer.txt`` keeps only the answer.

Neither waits forever: an answer with no first token within ``[engine] first_token_timeout_s`` (300 s), or
no token for ``idle_timeout_s`` (60 s) mid-answer, is given up on (``--timeout S`` sets both), its request
closed, and the error goes to stderr (and into ``--json``) with exit 1. ``--read-timeout S`` (``[engine]
read_timeout_s``, 600 s) bounds one read that gets no byte at all, where a deadline is off.

Through ``--api-url`` any OpenAI-compatible server will do: ``--api-key KEY`` (or ``OPENAI_API_KEY``) is
sent as ``Authorization: Bearer …`` and shown nowhere; ``--model`` names the model (default: the served
name, or the only one the gateway lists); a server without ``/health`` is ready when ``/v1/models``
answers; a stream without usage gets an *estimated* token count, said so wherever it shows.

What the model and the server say is shown neutralised (``cockpit.safetext``): terminal escapes in an
answer, its thinking, a tool call or an error message reach the terminal as visible symbols, never as
escapes; a stream that fails keeps and prints the part of the answer that arrived.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import replace
from typing import Any, TextIO

from cockpit.api import (
    ChatInputError,
    ChatSession,
    ChatSettings,
    ContentDelta,
    Finished,
    ReasoningDelta,
    SmokeStep,
    StreamError,
    ToolCall,
    load_tools,
)
from cockpit.api.apikey import ENV_VAR, parse_key
from cockpit.api.chat import EFFORT_LEVELS, check_temperature, check_top_p, parse_number
from cockpit.api.choose import ModelChoiceError, resolve_model
from cockpit.api.client import ApiClient
from cockpit.api.endpoint import ApiEndpoint, rank0_fleet_connected, smoke_through
from cockpit.api.errors import ApiError
from cockpit.api.smoke import MODEL_CHOICE, all_passed
from cockpit.api.status import ApiStatus
from cockpit.api.stream import ChatResult, StreamDeadlines, StreamStats, stats_parts
from cockpit.cli.commands import SUMMARY
from cockpit.cli.common import (
    EXIT_FAILURE,
    EXIT_USAGE,
    CliError,
    add_json,
    load,
    print_json,
    remedy,
    run_async_fast,
)
from cockpit.config import EngineSection
from cockpit.constants import SERVED_MODEL
from cockpit.errorcodes import code_for_api_kind
from cockpit.hosts import Fleet
from cockpit.safetext import neutralise_block, safe

EXIT_STREAM_FAILED = EXIT_FAILURE
EXIT_BAD_INPUT = EXIT_USAGE
EXIT_NOT_READY = EXIT_FAILURE   # the API does not answer: a failure found (the README's one table)


def _positive_seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected seconds, not {text!r}") from None
    if not value > 0 or value == float("inf"):
        raise argparse.ArgumentTypeError(f"expected a positive number of seconds, not {text}")
    return value


def _add_endpoint_args(p: argparse.ArgumentParser, what: str) -> None:
    engine = EngineSection()
    p.add_argument("--api-url", metavar="URL",
                   help="reach the API at URL (a gateway or any OpenAI-compatible server) instead of the SSH "
                        "tunnel to rank 0")
    p.add_argument("--api-key", type=parse_key, default=None, metavar="KEY",
                   help=f"API key sent as 'Authorization: Bearer KEY' (default: ${ENV_VAR}; prefer the "
                        "variable, a command line is visible to other users). Never shown or written")
    p.add_argument("--wait", type=float, default=0.0, metavar="S",
                   help="wait up to S seconds for the API to become ready (default: do not wait)")
    p.add_argument("--timeout", type=_positive_seconds, default=None, metavar="S",
                   help=f"give up on {what} when no first token came within S s of sending it, or no "
                        "token for S s mid-answer (exit 1; SSE comments and keep-alives do not count). "
                        "Default: cluster.toml [engine] first_token_timeout_s and idle_timeout_s "
                        f"({engine.first_token_timeout_s:g} and {engine.idle_timeout_s:g} s, 0 = none; "
                        "these defaults with --api-url). The SSH connection to rank 0 is awaited "
                        "ssh.connect_timeout + 2 s")
    p.add_argument("--read-timeout", type=_positive_seconds, default=None, metavar="S",
                   help="give up when one read gets no byte at all (not even a keep-alive) for S s; never "
                        "less than the deadlines + 1 s, so it matters where one is 0. Default: cluster.toml "
                        f"[engine] read_timeout_s ({engine.read_timeout_s:g} s)")
    add_json(p)


def _add_model_arg(p: argparse.ArgumentParser) -> None:
    p.add_argument("--model", metavar="NAME",
                   help=f"the model to ask (default: {SERVED_MODEL}; with --api-url, if the server does not "
                        "list that one, the only model it lists)")


def deadlines_for(args: argparse.Namespace, engine: EngineSection) -> StreamDeadlines:
    """``--timeout S`` for both deadlines, else the config's ``[engine]`` section."""
    if args.timeout is not None:
        return StreamDeadlines.both(args.timeout)
    return StreamDeadlines.from_seconds(engine.first_token_timeout_s, engine.idle_timeout_s)


def read_timeout_for(args: argparse.Namespace, engine: EngineSection) -> float:
    """``--read-timeout S``, else the config's ``[engine] read_timeout_s``."""
    return args.read_timeout if args.read_timeout is not None else engine.read_timeout_s


def _checked(check: Callable[[float], float], name: str) -> Callable[[str], float]:
    """An argparse type: a number that ``check`` (the API's own range rule) accepts."""
    def parse(text: str) -> float:
        try:
            return check(parse_number(text, name))
        except ChatInputError as exc:
            raise argparse.ArgumentTypeError(str(exc)) from None
    return parse


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive integer, not {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, not {value}")
    return value


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "chat", help=SUMMARY["chat"],
        description="Stream one answer from the deployed model to stdout (thinking text to stderr). "
                    "Defaults are the serving defaults: thinking on, effort xhigh, temperature 1.0, "
                    "top_p 0.95. Exit 0 on a finished answer, 1 if the stream failed or the API is not "
                    "ready (or the tunnel is down), 2 for bad input or a --model the server does not list.")
    p.add_argument("prompt", help="the user message")
    p.add_argument("--thinking", action=argparse.BooleanOptionalAction, default=True,
                   help="thinking mode (default: on)")
    p.add_argument("--effort", choices=sorted(EFFORT_LEVELS, key=EFFORT_LEVELS.__getitem__), default="xhigh",
                   help="reasoning effort with thinking on (default: xhigh)")
    p.add_argument("--temperature", type=_checked(check_temperature, "temperature"), default=1.0)
    p.add_argument("--top-p", type=_checked(check_top_p, "top_p"), default=0.95)
    p.add_argument("--max-tokens", type=_positive_int, default=None)
    p.add_argument("--system", metavar="TEXT", help="a system prompt")
    p.add_argument("--image", action="append", default=[], metavar="FILE",
                   help="attach a local image (PNG, JPEG, WebP, GIF; up to 4)")
    p.add_argument("--tools", metavar="FILE", help="JSON file of function tools the model may call")
    _add_model_arg(p)
    _add_endpoint_args(p, "the answer")
    p.set_defaults(func=run_chat)

    s = sub.add_parser(
        "smoke", help=SUMMARY["smoke"],
        description="/health, /v1/models, the card's request (two sentences about the ocean), a counting "
                    "check and one tool call; pass/fail per step with timings. Exit 1 if any step fails; "
                    "a request that misses its deadline (the engine may be hung) ends the run.")
    _add_model_arg(s)
    _add_endpoint_args(s, "a request")
    s.set_defaults(func=run_smoke_cmd)


# --- endpoint --------------------------------------------------------------------------------------


@asynccontextmanager
async def open_endpoint(args: argparse.Namespace) -> AsyncIterator[ApiEndpoint]:
    """The endpoint of ``--api-url``, or the tunnel through rank 0 (connecting only rank 0's host)."""
    if args.api_url:
        engine = EngineSection()
        async with ApiEndpoint(None, 0, api_url=args.api_url, read_timeout=read_timeout_for(args, engine),
                               deadlines=deadlines_for(args, engine), api_key=args.api_key) as endpoint:
            yield endpoint
        return
    _, config = load(args)
    fleet = Fleet(config)
    try:
        # not connected in time: check() reports the tunnel down
        await rank0_fleet_connected(fleet, config.ssh.connect_timeout + 2)
        async with ApiEndpoint(fleet, config.cluster.api_port,
                               stream_interval=config.ui.stream_frame_ms / 1000,
                               read_timeout=read_timeout_for(args, config.engine),
                               deadlines=deadlines_for(args, config.engine),
                               api_key=args.api_key) as endpoint:
            yield endpoint
    finally:
        await fleet.close()


async def ready_status(endpoint: ApiEndpoint, wait: float) -> ApiStatus:
    return await endpoint.wait_ready(wait) if wait > 0 else await endpoint.check()


async def pick_model(client: ApiClient, args: argparse.Namespace, status: ApiStatus) -> str:
    """The model to ask (see :mod:`cockpit.api.choose`); a choice the user must make is a CliError
    (exit 2), a server that lists nothing, or refuses the key, exit 1. Through the tunnel without
    ``--model`` the served name is sent unasked, as always; a list that cannot be read otherwise is
    said on stderr and the model asked unchecked."""
    try:
        return await resolve_model(client, status.models, args.model, default=SERVED_MODEL,
                                   gateway=bool(args.api_url))
    except ApiError as exc:
        if exc.kind == "unauthorized":
            raise CliError(f"{exc.message}\n  remedy: {exc.remedy}", EXIT_FAILURE,
                           code_for_api_kind(exc.kind)) from None
        model = args.model or SERVED_MODEL
        print(f"r37-cockpit: cannot list the models ({exc.kind}: {safe(exc.message)}); asking "
              f"{safe(model)} unchecked", file=sys.stderr)
        return str(model)
    except ModelChoiceError as exc:
        raise CliError(exc.message, EXIT_USAGE if exc.usage else EXIT_FAILURE,
                       "usage" if exc.usage else "api-http-error") from None


def _say_not_ready(args: argparse.Namespace, status: ApiStatus) -> None:
    print(f"r37-cockpit: API not ready ({status.state}): {safe(status.message)}", file=sys.stderr)
    if status.remedy:
        print(f"  remedy: {safe(remedy(args, status.remedy))}", file=sys.stderr)


# --- chat ------------------------------------------------------------------------------------------


def build_session(args: argparse.Namespace) -> ChatSession:
    """Check images and tools before anything is sent; bad input is a CliError (exit 2)."""
    try:
        tools = load_tools(args.tools) if args.tools else None
        settings = ChatSettings(thinking=args.thinking, reasoning_effort=args.effort,
                                temperature=args.temperature, top_p=args.top_p, max_tokens=args.max_tokens,
                                system=args.system)
        session = ChatSession(settings, tools)
        for path in args.image:
            session.attach_image(path)
        session.add_user(args.prompt)
        session.request()  # validates the settings
    except ChatInputError as exc:
        raise CliError(str(exc), EXIT_BAD_INPUT) from None
    return session


def tool_call_dict(call: ToolCall) -> dict[str, Any]:
    try:
        args: Any = call.arguments()
    except ValueError:
        args = None
    return {"id": call.id, "name": call.name, "arguments": args, "arguments_json": call.arguments_json}


def result_dict(result: ChatResult | None, stats: StreamStats | None, url: str,
                model: str | None = None) -> dict[str, Any]:
    """What ``chat --json`` prints for a finished (or partial) answer. Without usage from the server,
    ``usage`` is null and ``estimated`` holds the counted figures (``tokens_estimated`` true)."""
    usage = result.usage if result else None
    estimated = stats is not None and stats.tokens_estimated
    return {
        "api_url": url,
        "text": result.content if result else "",
        "reasoning": result.reasoning if result else "",
        "tool_calls": [tool_call_dict(c) for c in result.tool_calls] if result else [],
        "finish_reason": result.finish_reason if result else None,
        "usage": None if usage is None else {
            "prompt_tokens": usage.prompt_tokens, "completion_tokens": usage.completion_tokens,
            "total_tokens": usage.total_tokens, "reasoning_tokens": usage.reasoning_tokens},
        "ttft_s": stats.ttft_s if stats else None,
        "decode_tps": stats.decode_tps if stats else None,
        "total_s": stats.total_s if stats else None,
        "chunks": stats.chunks if stats else None,
        "tokens_estimated": estimated,
        "estimated": None if not estimated or stats is None else {
            "completion_tokens": stats.estimated_tokens, "decode_tps": stats.estimated_decode_tps,
            "method": "no usage from the server: one token per streamed text delta (an undercount when a "
                      "delta holds several)"},
        "model": result.model if result else None,
        "model_requested": model,
    }


def stats_line(result: ChatResult | None, stats: StreamStats | None, *, finished: bool = True) -> str:
    """`TTFT 0.31 s · 50.4 tok/s · 128 tokens · finish stop` (values that are unknown are left out; no
    finish reason for a stream that failed)."""
    return " · ".join(stats_parts(
        stats, (result.finish_reason or "?") if result and finished else None,
        completion_tokens=result.usage.completion_tokens if result and result.usage else None))


def format_tool_call(call: ToolCall) -> str:
    try:
        pretty = json.dumps(call.arguments(), indent=2, ensure_ascii=False)
    except ValueError:
        pretty = call.arguments_json
    return neutralise_block(f"tool call {call.name} (id {call.id}):\n{pretty}")


class _Printer:
    """Writes content to ``out`` and reasoning to ``err``, labelling each switch between the two."""

    def __init__(self, out: TextIO, err: TextIO):
        self.out, self.err = out, err
        self.dim = err.isatty()
        self.in_reasoning = False
        self.wrote_content = False

    def reasoning(self, text: str) -> None:
        if not self.in_reasoning:
            self.err.write(("\x1b[2m" if self.dim else "") + "thinking: ")
            self.in_reasoning = True
        self.err.write(neutralise_block(text))
        self.err.flush()

    def content(self, text: str) -> None:
        self._end_reasoning()
        self.out.write(neutralise_block(text))
        self.out.flush()
        self.wrote_content = True

    def _end_reasoning(self) -> None:
        if self.in_reasoning:
            self.err.write(("\x1b[0m" if self.dim else "") + "\n")
            self.err.flush()
            self.in_reasoning = False

    def finish(self) -> None:
        self._end_reasoning()
        if self.wrote_content:
            self.out.write("\n")
            self.out.flush()


async def chat_main(args: argparse.Namespace, session: ChatSession) -> int:
    async with open_endpoint(args) as endpoint:
        status = await ready_status(endpoint, args.wait)
        if not status.ok:
            if args.json:
                print_json({"api": status.to_dict(), "error": status.message})
            _say_not_ready(args, status)
            return EXIT_NOT_READY
        client = await endpoint.client()
        model = await pick_model(client, args, status)
        printer = None if args.json else _Printer(sys.stdout, sys.stderr)
        result: ChatResult | None = None
        error: StreamError | None = None
        async with client.chat_stream(session.request(model=model)) as stream:
            async for event in stream:
                if printer and isinstance(event, ReasoningDelta):
                    printer.reasoning(event.text)
                elif printer and isinstance(event, ContentDelta):
                    printer.content(event.text)
                elif isinstance(event, Finished):
                    result = event.result
                elif isinstance(event, StreamError):  # its remedy's commands carry --config if needed
                    error = replace(event, remedy=remedy(args, event.remedy))
                    result = event.partial
            stats = stream.stats
        if error is not None and error.partial is not None and error.partial.stats is not None:
            stats = error.partial.stats  # up to when it was given up on
    if args.json:
        out = result_dict(result, stats, client.base_url, model)
        if error:
            out["error"] = {"kind": error.kind, "code": code_for_api_kind(error.kind),
                            "message": error.message, "remedy": error.remedy}
        print_json(out)
    else:
        assert printer is not None
        printer.finish()
        for call in result.tool_calls if result else ():
            print(format_tool_call(call))
        line = stats_line(result, stats, finished=error is None)
        if line:
            print(line, file=sys.stderr)
    if error:  # on stderr with --json too (as "API not ready" is)
        print(f"r37-cockpit: stream failed ({error.kind}): {safe(error.message)}", file=sys.stderr)
        if error.remedy:
            print(f"  remedy: {safe(error.remedy)}", file=sys.stderr)
    return EXIT_STREAM_FAILED if error else 0


def run_chat(args: argparse.Namespace) -> int:
    session = build_session(args)
    return run_async_fast(chat_main(args, session))


# --- smoke -----------------------------------------------------------------------------------------


def step_dict(step: SmokeStep) -> dict[str, Any]:
    return {"name": step.name, "ok": step.ok, "detail": step.detail, "seconds": round(step.seconds, 4),
            "remedy": step.remedy, "kind": step.kind or None,
            "code": ("usage" if step.kind == MODEL_CHOICE else code_for_api_kind(step.kind)) if step.kind
            else None}


def _stopped_by(steps: list[SmokeStep]) -> SmokeStep | None:
    """The step that ended the run on a missed deadline, if one did."""
    return next((s for s in steps if s.missed_deadline), None)


async def smoke_main(args: argparse.Namespace) -> list[SmokeStep]:
    steps: list[SmokeStep] = []
    async with open_endpoint(args) as endpoint:
        if args.wait > 0:
            await endpoint.wait_ready(args.wait)
        async for step in smoke_through(endpoint, model=args.model):
            step = replace(step, remedy=remedy(args, step.remedy))  # its commands carry --config if needed
            steps.append(step)
            _print_step(step, args.json)
    return steps


def _print_step(step: SmokeStep, as_json: bool) -> None:
    if as_json:
        return
    mark = "PASS" if step.ok else "FAIL"
    print(f"{mark}  {step.name:<13} {step.seconds:7.3f} s  {safe(step.detail)}", flush=True)
    if not step.ok and step.remedy:
        print(f"      remedy: {safe(step.remedy)}", flush=True)


def run_smoke_cmd(args: argparse.Namespace) -> int:
    steps = run_async_fast(smoke_main(args))
    passed = all_passed(steps)
    stopped = _stopped_by(steps)
    if args.json:
        out: dict[str, Any] = {"passed": passed, "steps": [step_dict(s) for s in steps]}
        if stopped is not None:
            out["error"] = {"kind": stopped.kind, "code": code_for_api_kind(stopped.kind),
                            "message": f"{stopped.name}: {stopped.detail}", "remedy": stopped.remedy}
        print_json(out)
    else:
        print("smoke test " + ("passed" if passed else "FAILED"), flush=True)
    if stopped is not None:
        print(f"r37-cockpit: smoke test stopped ({stopped.kind}): {stopped.name}: {safe(stopped.detail)}",
              file=sys.stderr)
        if stopped.remedy:
            print(f"  remedy: {safe(stopped.remedy)}", file=sys.stderr)
    if any(s.kind == MODEL_CHOICE for s in steps):
        return EXIT_USAGE  # the command line must name (another) model
    return 0 if passed else 1
