"""The benchmark's pass/fail checks (vision 3, tools 4: a score of N/7) and its idle probe.

Every request is streamed at temperature 0 with thinking off, under stream deadlines and a total
timeout. A request that fails (HTTP error, timeout, broken stream) makes a failed check whose reason is
the error; nothing raises out of :func:`run_checks` or :func:`idle_probe`. Once a request missed a
deadline (the engine may be hung), the later ones are not sent and fail with that reason.

The forced-tool check passes only when exactly the named tool comes back: the card's server returns
``get_weather`` alongside the forced ``get_time``, which fails as "extra tool returned: get_weather".
"""

from __future__ import annotations

import asyncio
import json
import re
import secrets
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import asdict, dataclass, replace
from typing import Any, Literal

from cockpit.api.chat import ChatRequest, tool_result_message, user_message
from cockpit.api.client import ApiClient
from cockpit.api.errors import ApiError
from cockpit.api.stream import DEADLINE_KINDS, ChatResult, StreamDeadlines, ToolCall
from cockpit.bench import images
from cockpit.bench.images import COLOURS

Group = Literal["tools", "vision"]
Verdict = tuple[bool, str]

DEFAULT_DEADLINES = StreamDeadlines(first_token_s=120.0, idle_s=60.0)
"""Deadlines of a check's request when neither the caller nor the client sets any."""
REQUEST_TIMEOUT_S = 300.0
"""The longest one request may take, whole answer included."""
VISION_MAX_TOKENS = 200
TOOLS_MAX_TOKENS = 256
PROBE_IDLE_S = 45.0
CHARS_PER_TOKEN = 4.0
"""The estimate of tokens from text when the server sends no ``usage`` (English and code)."""
_SNIPPET = 160


@dataclass(slots=True)
class CheckRecord:
    """One check: its verdict and reason, the request body sent last and what came back."""

    name: str
    group: Group
    passed: bool
    reason: str
    request: dict[str, Any]
    response: dict[str, Any]

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(slots=True)
class ProbeRecord:
    """One idle-probe request: decode tok/s after a controlled idle of ``idle_s`` or back-to-back.

    ``estimated``: the server sent no usage, so ``completion_tokens`` was counted from the text.
    ``error``: why the request failed (then ``ttft_s`` and ``decode_tps`` are None).
    """

    name: str
    idle_s: float
    ttft_s: float | None
    decode_tps: float | None
    completion_tokens: int | None
    estimated: bool
    back_to_back: bool
    error: str = ""

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def score(records: Sequence[CheckRecord]) -> tuple[int, int]:
    """Checks passed and checks run."""
    return sum(r.passed for r in records), len(records)


# --- requests -------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Failure:
    kind: str
    message: str
    status: int | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"error": {"kind": self.kind, "message": self.message, "status": self.status}}


class _Asker:
    """Sends the checks' requests; remembers a missed deadline so that later requests are not sent."""

    def __init__(self, client: ApiClient, model: str, deadlines: StreamDeadlines | None,
                 timeout_s: float) -> None:
        self.client = client
        self.model = model
        self.deadlines = deadlines or client.deadlines or DEFAULT_DEADLINES
        self.timeout_s = timeout_s
        self.hung: str | None = None

    def request(self, messages: list[dict[str, Any]], max_tokens: int,
                tools: list[dict[str, Any]] | None = None,
                tool_choice: str | dict[str, Any] | None = None) -> ChatRequest:
        return ChatRequest(messages, model=self.model, thinking=False, reasoning_effort=None,
                           temperature=0.0, top_p=None, max_tokens=max_tokens, tools=tools,
                           tool_choice=tool_choice)

    async def send(self, request: ChatRequest) -> ChatResult | _Failure:
        if self.hung is not None:
            return _Failure("not_sent", f"not sent: an earlier request failed ({self.hung})")
        try:
            async with asyncio.timeout(self.timeout_s):
                return await self.client.chat_streamed(request, deadlines=self.deadlines)
        except ApiError as exc:
            if exc.kind in DEADLINE_KINDS:
                self.hung = exc.message
            return _Failure(exc.kind, exc.message, exc.status)
        except TimeoutError:
            self.hung = f"no complete answer within {self.timeout_s:g} s"
            return _Failure("timeout", self.hung)
        except Exception as exc:  # the contract: a failed check, never an exception
            return _Failure("error", f"{type(exc).__name__}: {exc}")

    async def check(self, name: str, group: Group, request: ChatRequest,
                    verdict: Callable[[ChatResult], Verdict]) -> CheckRecord:
        body = request.to_body(stream=True)
        outcome = await self.send(request)
        if isinstance(outcome, _Failure):
            return CheckRecord(name, group, False, outcome.message, body, outcome.to_dict())
        passed, reason = verdict(outcome)
        return CheckRecord(name, group, passed, reason, body, result_dict(outcome))


def result_dict(result: ChatResult) -> dict[str, Any]:
    """What a record keeps of an answer."""
    stats = result.stats
    return {
        "content": result.content,
        "reasoning": result.reasoning,
        "finish_reason": result.finish_reason,
        "tool_calls": [{"id": c.id, "name": c.name, "arguments": c.arguments_json}
                       for c in result.tool_calls],
        "usage": None if result.usage is None else asdict(result.usage),
        "ttft_s": None if stats is None else stats.ttft_s,
        "total_s": None if stats is None else stats.total_s,
    }


def _snippet(text: str) -> str:
    text = " ".join(text.split())
    return repr(text if len(text) <= _SNIPPET else text[:_SNIPPET] + "…")


# --- vision ---------------------------------------------------------------------------------------

_COLOUR_WORDS: dict[str, tuple[str, ...]] = {
    "red": ("red", "crimson", "scarlet"),
    "green": ("green",),
    "blue": ("blue",),
    "yellow": ("yellow",),
    "orange": ("orange",),
    "purple": ("purple", "violet"),
    "pink": ("pink",),
    "cyan": ("cyan", "teal", "turquoise"),
    "magenta": ("magenta",),
    "brown": ("brown",),
    "white": ("white",),
    "black": ("black",),
    "gray": ("gray", "grey"),
}
_COLOUR_RE = re.compile(
    r"\b(" + "|".join(w for words in _COLOUR_WORDS.values() for w in words) + r")\b", re.I)
_WORD_TO_COLOUR = {w: name for name, words in _COLOUR_WORDS.items() for w in words}
_NUMBERS = ("zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten")

STRIPES = ("red", "yellow", "green", "blue")
TWO_IMAGES = ("blue", "red")
GRID = ("red", "green", "blue", "yellow")  # top-left, top-right, bottom-left, bottom-right
_GRID_PLACES = ("top-left", "top-right", "bottom-left", "bottom-right")
_GRID_LABELS = tuple(
    re.compile(rf"\b(?:{v})[\s-]*{h}\b", re.I)
    for v, h in (("top|upper", "left"), ("top|upper", "right"), ("bottom|lower", "left"),
                 ("bottom|lower", "right"))
)
_IMAGE_LABELS = (
    re.compile(r"\b(?:first|1st|image\s*#?\s*1|image one)\b", re.I),
    re.compile(r"\b(?:second|2nd|image\s*#?\s*2|image two)\b", re.I),
)

STRIPES_PROMPT = ("How many vertical stripes does this image have, and what are their colours from left "
                  "to right? Answer in one sentence.")
TWO_IMAGES_PROMPT = ("Each of these two images is a single colour. Name the colour of each, in the form "
                     "'first: COLOUR, second: COLOUR'.")
GRID_PROMPT = ("This image is a 2x2 grid of coloured squares. Name the colour of each quadrant, in the "
               "form 'top-left: COLOUR, top-right: COLOUR, bottom-left: COLOUR, bottom-right: COLOUR'.")


def _colours_in(text: str) -> list[tuple[int, str]]:
    """Every colour named in ``text``: (position, canonical name), in order."""
    return [(m.start(), _WORD_TO_COLOUR[m.group(1).lower()]) for m in _COLOUR_RE.finditer(text)]


def _labelled(text: str, labels: Sequence[re.Pattern[str]]) -> list[str | None] | None:
    """The first colour named after each label (up to the next label), or None when no label is found."""
    found = [(m.start(), m.end(), i) for i, pat in enumerate(labels) if (m := pat.search(text))]
    if not found:
        return None
    found.sort()
    out: list[str | None] = [None] * len(labels)
    for k, (_start, end, i) in enumerate(found):
        stop = found[k + 1][0] if k + 1 < len(found) else len(text)
        named = _colours_in(text[end:stop])
        out[i] = named[0][1] if named else None
    return out


def check_stripes(result: ChatResult, expected: Sequence[str] = STRIPES) -> Verdict:
    """The count of stripes and their colours, in order from left to right."""
    text = result.content
    want = f"{len(expected)} stripes: {', '.join(expected)}"
    if not text.strip():
        return False, f"expected {want}; got an empty answer (finish_reason={result.finish_reason})"
    n = len(expected)
    if not re.search(rf"\b(?:{n}|{_NUMBERS[n]})\b", text, re.I):
        return False, f"expected {want}; the answer does not say {_NUMBERS[n]}: {_snippet(text)}"
    first: dict[str, int] = {}
    for pos, name in _colours_in(text):
        first.setdefault(name, pos)
    missing = [c for c in expected if c not in first]
    if missing:
        return False, f"expected {want}; {', '.join(missing)} not named: {_snippet(text)}"
    if sorted(expected, key=first.__getitem__) != list(expected):
        return False, f"expected {want}; named in another order: {_snippet(text)}"
    return True, f"{want}, as expected"


def check_two_images(result: ChatResult, expected: Sequence[str] = TWO_IMAGES) -> Verdict:
    """Each image's colour: after its label (first, second) or, without labels, in order of mention."""
    text = result.content
    want = f"first {expected[0]}, second {expected[1]}"
    if not text.strip():
        return False, f"expected {want}; got an empty answer (finish_reason={result.finish_reason})"
    got = _labelled(text, _IMAGE_LABELS)
    if got is None:
        order = list(dict.fromkeys(name for _pos, name in _colours_in(text)))
        got = [*order[:2], None, None][:2]
    if list(got) != list(expected):
        seen = ", ".join(f"{label} {c or 'not named'}"
                         for label, c in zip(("first", "second"), got, strict=True))
        return False, f"expected {want}; got {seen}: {_snippet(text)}"
    return True, f"{want}, as expected"


def check_grid(result: ChatResult, expected: Sequence[str] = GRID) -> Verdict:
    """Each quadrant's colour, named after its place (top-left …)."""
    text = result.content
    want = ", ".join(f"{p} {c}" for p, c in zip(_GRID_PLACES, expected, strict=True))
    if not text.strip():
        return False, f"expected {want}; got an empty answer (finish_reason={result.finish_reason})"
    got = _labelled(text, _GRID_LABELS)
    if got is None:
        return False, f"expected {want}; the answer names no quadrant: {_snippet(text)}"
    if list(got) != list(expected):
        seen = ", ".join(f"{p} {c or 'not named'}" for p, c in zip(_GRID_PLACES, got, strict=True))
        return False, f"expected {want}; got {seen}: {_snippet(text)}"
    return True, f"{want}, as expected"


def _vision_checks() -> list[tuple[str, str, list[bytes], Callable[[ChatResult], Verdict]]]:
    rgb = COLOURS.__getitem__
    top_left, top_right, bottom_left, bottom_right = (rgb(c) for c in GRID)
    return [
        ("stripes", STRIPES_PROMPT, [images.stripes([rgb(c) for c in STRIPES])], check_stripes),
        ("two_images", TWO_IMAGES_PROMPT, [images.solid(rgb(c)) for c in TWO_IMAGES], check_two_images),
        ("grid_2x2", GRID_PROMPT, [images.grid(top_left, top_right, bottom_left, bottom_right)], check_grid),
    ]


# --- tools ----------------------------------------------------------------------------------------


def _tool(name: str, description: str) -> dict[str, Any]:
    return {
        "type": "function",
        "function": {
            "name": name,
            "description": description,
            "parameters": {
                "type": "object",
                "properties": {"city": {"type": "string", "description": "City name"}},
                "required": ["city"],
            },
        },
    }


WEATHER_TOOL = _tool("get_weather", "Get the current weather for a city.")
TIME_TOOL = _tool("get_time", "Get the current local time in a city.")
TOOLS = [WEATHER_TOOL, TIME_TOOL]
FORCED = "get_time"

AUTO_CITY = "Tokyo"
AUTO_PROMPT = f"What is the weather in {AUTO_CITY} right now?"
ROUND_TRIP_CITY = "Berlin"
ROUND_TRIP_PROMPT = f"What is the weather in {ROUND_TRIP_CITY} right now?"
ROUND_TRIP_RESULT = {"city": ROUND_TRIP_CITY, "temperature_c": 17, "condition": "light rain"}
PARALLEL_CITIES = ("Paris", "London")
PARALLEL_PROMPT = f"What is the weather in {PARALLEL_CITIES[0]} and in {PARALLEL_CITIES[1]} right now?"
FORCED_PROMPT = "What time is it in Tokyo right now?"


def _names(calls: Sequence[ToolCall]) -> str:
    return ", ".join(c.name for c in calls) or "none"


def _names_city(call: ToolCall, city: str) -> Verdict:
    try:
        args = call.arguments()
    except ValueError as exc:
        return False, f"{call.name} arguments are not a JSON object: {call.arguments_json[:80]!r} ({exc})"
    if city.lower() not in json.dumps(args, ensure_ascii=False).lower():
        return False, f"{call.name} arguments do not name {city}: {call.arguments_json[:80]!r}"
    return True, f"{call.name}({call.arguments_json})"


def check_auto(result: ChatResult, city: str = AUTO_CITY) -> Verdict:
    """finish_reason ``tool_calls``, get_weather alone, its arguments naming the city."""
    calls = result.tool_calls
    if result.finish_reason != "tool_calls":
        return False, (f"finish_reason {result.finish_reason!r}, expected 'tool_calls' (tool calls: "
                       f"{_names(calls)}; content {_snippet(result.content)})")
    weather = [c for c in calls if c.name == "get_weather"]
    if not weather:
        return False, f"no get_weather call (tool calls: {_names(calls)})"
    if len(weather) != len(calls):
        return False, f"another tool called as well (tool calls: {_names(calls)})"
    results = [_names_city(c, city) for c in weather]
    good = [reason for ok, reason in results if ok]
    return (True, f"{good[0]}, finish_reason=tool_calls") if good else results[0]


def check_round_trip(result: ChatResult, tool_result: dict[str, Any] = ROUND_TRIP_RESULT) -> Verdict:
    """The answer after the tool result uses it (its temperature and condition)."""
    text = result.content
    if not text.strip():
        return False, (f"no answer after the tool result (finish_reason={result.finish_reason}, "
                       f"tool calls: {_names(result.tool_calls)})")
    wanted = [str(tool_result["temperature_c"]), str(tool_result["condition"]).split()[-1]]
    missing = [w for w in wanted if not re.search(rf"\b{re.escape(w)}\b", text, re.I)]
    if missing:
        return False, (f"the answer does not use the tool result ({', '.join(missing)} missing): "
                       f"{_snippet(text)}")
    return True, f"the answer uses the tool result ({', '.join(wanted)}): {_snippet(text)}"


def check_parallel(result: ChatResult, cities: Sequence[str] = PARALLEL_CITIES) -> Verdict:
    """One get_weather call per city, in one turn."""
    calls = result.tool_calls
    if result.finish_reason != "tool_calls":
        return False, (f"finish_reason {result.finish_reason!r}, expected 'tool_calls' (tool calls: "
                       f"{_names(calls)}; content {_snippet(result.content)})")
    if len(calls) != len(cities) or any(c.name != "get_weather" for c in calls):
        return False, f"expected {len(cities)} get_weather calls, got {len(calls)} ({_names(calls)})"
    missing = [city for city in cities if not any(_names_city(c, city)[0] for c in calls)]
    if missing:
        args = "; ".join(c.arguments_json[:60] for c in calls)
        return False, f"no call for {', '.join(missing)} (arguments: {args})"
    return True, f"{len(calls)} calls: " + ", ".join(f"{c.name}({c.arguments_json})" for c in calls)


def check_forced(result: ChatResult, forced: str = FORCED) -> Verdict:
    """Exactly the forced tool comes back, once, with JSON-object arguments."""
    calls = result.tool_calls
    extra = [c.name for c in calls if c.name != forced]
    if extra:
        return False, f"extra tool returned: {', '.join(dict.fromkeys(extra))}"
    if not calls:
        return False, f"forced tool {forced} not returned (content {_snippet(result.content)})"
    if len(calls) > 1:
        return False, f"{forced} returned {len(calls)} times, expected once"
    try:
        calls[0].arguments()
    except ValueError as exc:
        return False, f"{forced} arguments are not a JSON object: {calls[0].arguments_json[:80]!r} ({exc})"
    return True, f"only the forced tool: {forced}({calls[0].arguments_json})"


async def _round_trip(asker: _Asker) -> CheckRecord:
    """Ask, answer every tool call (get_weather with the fixed result), then judge the final answer."""
    user = user_message(ROUND_TRIP_PROMPT)
    first_request = asker.request([user], TOOLS_MAX_TOKENS, TOOLS, "auto")
    first = await asker.send(first_request)
    if isinstance(first, _Failure):
        return CheckRecord("tool_round_trip", "tools", False, f"first turn: {first.message}",
                           first_request.to_body(stream=True), first.to_dict())
    weather = [c for c in first.tool_calls if c.name == "get_weather"]
    if not weather:
        return CheckRecord("tool_round_trip", "tools", False,
                           f"first turn made no get_weather call (tool calls: {_names(first.tool_calls)}; "
                           f"content {_snippet(first.content)})",
                           first_request.to_body(stream=True), result_dict(first))
    assistant = {k: v for k, v in first.to_message().items() if k != "reasoning"}
    answers = [
        tool_result_message(c.id, ROUND_TRIP_RESULT if c.name == "get_weather" else {"error": "unavailable"})
        for c in first.tool_calls
    ]
    request = asker.request([user, assistant, *answers], TOOLS_MAX_TOKENS, TOOLS, "auto")
    return await asker.check("tool_round_trip", "tools", request, check_round_trip)


# --- entry points ---------------------------------------------------------------------------------


async def run_checks(client: ApiClient, model: str, *, vision: bool = True, tools: bool = True,
                     deadlines: StreamDeadlines | None = None,
                     timeout_s: float = REQUEST_TIMEOUT_S) -> list[CheckRecord]:
    """The vision checks (3) then the tool checks (4), in order; every outcome is a record.

    ``deadlines``: of every request (default the client's, else :data:`DEFAULT_DEADLINES`);
    ``timeout_s``: the longest one request may take.
    """
    asker = _Asker(client, model, deadlines, timeout_s)
    records: list[CheckRecord] = []
    if vision:
        for name, prompt, pngs, verdict in _vision_checks():
            message = user_message(prompt, [images.image_part(p) for p in pngs])
            records.append(await asker.check(name, "vision", asker.request([message], VISION_MAX_TOKENS),
                                             verdict))
    if tools:
        def ask(prompt: str, choice: str | dict[str, Any]) -> ChatRequest:
            return asker.request([user_message(prompt)], TOOLS_MAX_TOKENS, TOOLS, choice)

        records.append(await asker.check("tool_auto", "tools", ask(AUTO_PROMPT, "auto"), check_auto))
        records.append(await _round_trip(asker))
        records.append(await asker.check("tool_parallel", "tools", ask(PARALLEL_PROMPT, "auto"),
                                         check_parallel))
        forced = {"type": "function", "function": {"name": FORCED}}
        records.append(await asker.check("tool_forced", "tools", ask(FORCED_PROMPT, forced), check_forced))
    return records


PROBE_PROMPTS: tuple[tuple[str, str, int], ...] = (
    ("counting", "Count from 1 to 250, separated by commas. Output only the numbers.", 600),
    ("coding", "Write a Python function that merges two sorted lists of integers into one sorted list, "
               "with a docstring and an explanation of how it works.", 400),
)
"""The idle probe's prompts: name, text and output budget (the method's counting and coding budgets)."""


def estimate_tokens(result: ChatResult) -> int:
    """Completion tokens guessed from the text, for a server that sent no usage."""
    chars = len(result.content) + len(result.reasoning) + sum(
        len(c.name) + len(c.arguments_json) for c in result.tool_calls)
    return max(1, round(chars / CHARS_PER_TOKEN))


def _probe_record(name: str, idle_s: float, back_to_back: bool,
                  outcome: ChatResult | _Failure) -> ProbeRecord:
    if isinstance(outcome, _Failure):
        return ProbeRecord(name, idle_s, None, None, None, False, back_to_back, outcome.message)
    stats = outcome.stats
    if stats is None:
        return ProbeRecord(name, idle_s, None, None, None, False, back_to_back, "the answer has no timing")
    estimated = outcome.usage is None
    if estimated:
        stats = replace(stats, completion_tokens=estimate_tokens(outcome))
    return ProbeRecord(name, idle_s, stats.ttft_s, stats.decode_tps, stats.completion_tokens, estimated,
                       back_to_back)


async def idle_probe(client: ApiClient, model: str, idle_s: float = PROBE_IDLE_S,
                     sleep: Callable[[float], Awaitable[object]] = asyncio.sleep, *,
                     deadlines: StreamDeadlines | None = None,
                     timeout_s: float = REQUEST_TIMEOUT_S) -> list[ProbeRecord]:
    """Counting and coding, each right after ``idle_s`` s of idle, then both again back-to-back.

    The caller makes sure nothing else runs on the server meanwhile (the suite's idle gate); every
    request carries a fresh prefix, so none is answered from the prefix cache.
    """
    asker = _Asker(client, model, deadlines, timeout_s)
    records: list[ProbeRecord] = []
    for back_to_back in (False, True):
        for name, prompt, budget in PROBE_PROMPTS:
            if not back_to_back and asker.hung is None:
                await sleep(idle_s)
            text = f"Request {secrets.token_hex(4)}. {prompt}"
            outcome = await asker.send(asker.request([user_message(text)], budget))
            records.append(_probe_record(name, 0.0 if back_to_back else idle_s, back_to_back, outcome))
    return records
