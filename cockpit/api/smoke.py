"""The recipe card's step-7 smoke test, plus counting and tool checks, as a stream of step results.

Health and model list are hard gates: the first failure there ends the run (with its remedy). The
request checks after them each report pass or fail, except that a request that missed a deadline (no
first token, no token mid-answer: the engine may be hung) ends the run too, so a hung engine fails the
smoke test within one deadline. ``/health`` and ``/v1/models`` must be answered whole within the client's
``health_timeout``; the requests are bound by its :class:`~cockpit.api.stream.StreamDeadlines`.

A server without ``/health`` (404) passes the health step when ``/v1/models`` answers 200. The model is
chosen by :func:`~cockpit.api.choose.choose_model`; a choice the command line must make (several models
listed, or ``--model`` not among them) fails the models step with kind :data:`MODEL_CHOICE`.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, replace
from typing import Any

from cockpit.api.chat import ChatRequest
from cockpit.api.choose import ModelChoiceError, choose_model, listing
from cockpit.api.client import ApiClient
from cockpit.api.errors import ApiError
from cockpit.api.readiness import look
from cockpit.api.stream import DEADLINE_KINDS, ChatResult
from cockpit.constants import SERVED_MODEL

MODEL_CHOICE = "model_choice"
"""A failed step's kind when the user must name (another) model with ``--model``."""
CARD_PROMPT = "Write two sentences about the ocean."
COUNT_PROMPT = "Count from 1 to 30, separated by commas. Output only the numbers."
WEATHER_CITY = "Paris"
WEATHER_PROMPT = f"What is the weather in {WEATHER_CITY} right now? Use the get_weather tool."
WEATHER_TOOL: dict[str, Any] = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Get the current weather for a city.",
        "parameters": {
            "type": "object",
            "properties": {"city": {"type": "string", "description": "City name"}},
            "required": ["city"],
        },
    },
}


@dataclass(frozen=True, slots=True)
class SmokeStep:
    """One check: ``ok`` and a one-line ``detail``; ``remedy`` when it failed, and ``kind`` when it
    failed on an API error (its :data:`~cockpit.api.stream.ErrorKind`)."""

    name: str
    ok: bool
    detail: str
    seconds: float
    remedy: str = ""
    kind: str = ""

    @property
    def missed_deadline(self) -> bool:
        """True if the engine gave no token in time (the run stops here)."""
        return self.kind in DEADLINE_KINDS


def _numbers(text: str) -> list[int]:
    return [int(n) for n in re.findall(r"\d+", text)]


def check_card_answer(result: ChatResult) -> tuple[bool, str]:
    """The card's request: non-empty visible text and usage."""
    if not result.content.strip():
        return False, f"empty content (finish_reason={result.finish_reason})"
    if result.usage is None or result.usage.completion_tokens < 1:
        return False, "no usage in the response (the server reports no token count)"
    return True, (
        f"{result.usage.completion_tokens} tokens, finish_reason={result.finish_reason}: "
        f"{result.content.strip()[:80]!r}"
    )


def check_counting(result: ChatResult) -> tuple[bool, str]:
    """The answer starts 1, 2, 3, 4, 5 and contains 30."""
    nums = _numbers(result.content)
    if nums[:5] != [1, 2, 3, 4, 5]:
        return False, f"answer does not start with 1..5: {result.content.strip()[:80]!r}"
    if 30 not in nums:
        return (
            False,
            f"answer does not reach 30 (last number {nums[-1]}, finish_reason={result.finish_reason})",
        )
    tps = result.stats.decode_tps if result.stats else None
    if tps:
        return True, f"1..30 counted, {tps:.1f} tok/s decode"
    est = result.stats.estimated_decode_tps if result.stats else None
    return True, "1..30 counted" + (f", ~{est:.1f} tok/s decode (estimated: no usage)" if est else "")


def check_tool_call(result: ChatResult, city: str = WEATHER_CITY) -> tuple[bool, str]:
    """finish_reason ``tool_calls`` and a get_weather call whose arguments name the city."""
    calls = [c for c in result.tool_calls if c.name == "get_weather"]
    if not calls:
        names = ", ".join(c.name for c in result.tool_calls) or "none"
        return False, f"no get_weather call (tool calls: {names}; content {result.content.strip()[:60]!r})"
    try:
        args = calls[0].arguments()
    except (ValueError, json.JSONDecodeError) as exc:
        return False, f"arguments are not a JSON object: {calls[0].arguments_json[:80]!r} ({exc})"
    if city.lower() not in json.dumps(args).lower():
        return False, f"arguments do not name {city}: {calls[0].arguments_json[:80]!r}"
    if result.finish_reason != "tool_calls":
        return False, f"finish_reason is {result.finish_reason!r}, expected 'tool_calls'"
    return True, f"get_weather({calls[0].arguments_json}), finish_reason=tool_calls"


async def run_smoke(client: ApiClient, *, model: str | None = None, gateway: bool = False
                    ) -> AsyncIterator[SmokeStep]:
    """Yield the steps in order: health, models, card request, counting, tool call.

    ``model``: the one asked for (``--model``); else the served name, or with ``gateway`` (``--api-url``)
    the only model listed.
    """
    t0 = time.perf_counter()
    health = await look(client)
    yield SmokeStep("health", health.ok, health.message, time.perf_counter() - t0, health.remedy,
                    "" if health.ok else health.state)
    if not health.ok:
        return

    t0 = time.perf_counter()
    try:
        ids = [m.id for m in await client.models()]
    except ApiError as exc:
        yield SmokeStep("models", False, exc.message, time.perf_counter() - t0, exc.remedy, exc.kind)
        return
    try:
        chosen = choose_model(ids, model, default=SERVED_MODEL, gateway=gateway)
    except ModelChoiceError as exc:
        yield SmokeStep("models", False, exc.message, time.perf_counter() - t0,
                        "Name the model with --model NAME." if exc.usage else "",
                        MODEL_CHOICE if exc.usage else "")
        return
    found = chosen in ids
    detail = (f"serves {chosen}" if found
              else f"{chosen} not listed (served: {listing(ids) or 'none'})")
    remedy = (
        "" if found else "Set the served model name in cluster.toml to what the engine serves, or relaunch."
    )
    yield SmokeStep("models", found, detail, time.perf_counter() - t0, remedy)
    if not found:
        return

    def ask(prompt: str, max_tokens: int, **extra: Any) -> ChatRequest:
        """Deterministic, thinking off: visible text within a small budget, as the card's smoke test."""
        return ChatRequest(
            [{"role": "user", "content": prompt}],
            model=chosen,
            thinking=False,
            max_tokens=max_tokens,
            temperature=0,
            top_p=None,
            **extra,
        )

    Check = tuple[str, Callable[[], Awaitable[ChatResult]], Callable[[ChatResult], tuple[bool, str]]]
    checks: list[Check] = [
        ("card request", lambda: client.chat(ask(CARD_PROMPT, 128)), check_card_answer),
        ("counting", lambda: client.chat_streamed(ask(COUNT_PROMPT, 200)), check_counting),
        (
            "tool call",
            lambda: client.chat_streamed(ask(WEATHER_PROMPT, 256, tools=[WEATHER_TOOL], tool_choice="auto")),
            check_tool_call,
        ),
    ]
    for name, call, check in checks:
        t0 = time.perf_counter()
        try:
            result = await call()
        except ApiError as exc:
            step = SmokeStep(name, False, exc.message, time.perf_counter() - t0, exc.remedy, exc.kind)
            if step.missed_deadline:  # hung: every later request would wait its deadline out too
                yield replace(step, detail=f"{exc.message}; later checks not run")
                return
            yield step
            continue
        ok, detail = check(result)
        remedy = "" if ok else "The engine answered but wrongly: check the checkpoint and rank 0's log."
        # Until the answer's last bytes arrived (a streamed answer is read in frames: the client may
        # have got to them a frame later).
        t_end = result.stats.t_end if result.stats is not None else time.perf_counter()
        yield SmokeStep(name, ok, detail, t_end - t0, remedy)


def all_passed(steps: list[SmokeStep]) -> bool:
    """True if the run completed all five steps and each passed."""
    return len(steps) == 5 and all(s.ok for s in steps)
