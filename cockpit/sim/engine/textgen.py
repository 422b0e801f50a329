"""Deterministic answers: what the simulated model says, chosen from the prompt.

Recognised tasks: counting ("Count from 1 to N"), a needle question (the needle sentence is found in the
prompt and repeated), "Reply with the single word X", "Write N sentences about T", arithmetic, code and
JSON requests, image descriptions, tool calls (a city in the prompt -> get_weather, two cities -> two
parallel calls, a `role: tool` result -> an answer quoting it) and otherwise fluent-enough prose drawn from
a seed of the prompt. The same seed always gives the same text (temperature 0 seeds from the prompt).
"""

from __future__ import annotations

import json
import random
import re
from dataclasses import dataclass, field
from typing import Any

from cockpit.sim.engine import images as img
from cockpit.sim.engine import tokens

STOPWORDS = set(
    [
        "a",
        "an",
        "the",
        "and",
        "or",
        "but",
        "if",
        "then",
        "than",
        "of",
        "to",
        "in",
        "on",
        "at",
        "by",
        "for",
        "with",
        "about",
        "into",
        "from",
        "over",
        "under",
        "is",
        "are",
        "was",
        "were",
        "be",
        "been",
        "being",
        "do",
        "does",
        "did",
        "have",
        "has",
        "had",
        "i",
        "you",
        "he",
        "she",
        "it",
        "we",
        "they",
        "me",
        "my",
        "your",
        "our",
        "their",
        "this",
        "that",
        "these",
        "those",
        "what",
        "which",
        "who",
        "whom",
        "whose",
        "how",
        "why",
        "when",
        "where",
        "please",
        "write",
        "give",
        "tell",
        "explain",
        "describe",
        "make",
        "list",
        "can",
        "could",
        "would",
        "should",
        "will",
        "shall",
        "may",
        "might",
        "must",
        "not",
        "no",
        "yes",
        "some",
        "any",
        "each",
        "every",
        "all",
        "more",
        "most",
        "less",
        "few",
        "many",
        "much",
        "very",
        "just",
        "only",
        "also",
        "so",
        "such",
        "as",
        "like",
        "use",
        "using",
        "one",
        "two",
        "three",
        "four",
        "five",
        "six",
        "seven",
        "eight",
        "nine",
        "ten",
        "words",
        "word",
        "sentence",
        "sentences",
        "paragraph",
        "short",
        "brief",
        "detailed",
        "answer",
        "reply",
        "question",
        "following",
        "below",
        "above",
    ]
)

CITIES = [
    "Paris",
    "London",
    "Tokyo",
    "Berlin",
    "Madrid",
    "Rome",
    "New York",
    "San Francisco",
    "Los Angeles",
    "Chicago",
    "Boston",
    "Seattle",
    "Sydney",
    "Melbourne",
    "Toronto",
    "Vancouver",
    "Beijing",
    "Shanghai",
    "Hong Kong",
    "Singapore",
    "Seoul",
    "Mumbai",
    "Delhi",
    "Dubai",
    "Cairo",
    "Moscow",
    "Istanbul",
    "Amsterdam",
    "Vienna",
    "Prague",
    "Lisbon",
    "Dublin",
    "Stockholm",
    "Oslo",
    "Copenhagen",
    "Helsinki",
    "Zurich",
    "Munich",
    "Barcelona",
    "Athens",
    "Warsaw",
    "Budapest",
    "Mexico City",
    "Buenos Aires",
    "Rio de Janeiro",
    "Sao Paulo",
    "Lima",
    "Bogota",
    "Nairobi",
    "Lagos",
    "Johannesburg",
    "Cape Town",
    "Bangkok",
    "Jakarta",
    "Manila",
    "Hanoi",
    "Taipei",
    "Osaka",
    "Kyoto",
    "Austin",
    "Denver",
    "Miami",
]

ADJ = [
    "quiet",
    "steady",
    "bright",
    "patient",
    "careful",
    "vast",
    "simple",
    "subtle",
    "clear",
    "gentle",
    "practical",
    "remarkable",
    "familiar",
    "distant",
    "sturdy",
    "curious",
    "modest",
    "lively",
]
NOUN = [
    "pattern",
    "idea",
    "question",
    "detail",
    "process",
    "system",
    "journey",
    "balance",
    "signal",
    "structure",
    "moment",
    "practice",
    "landscape",
    "method",
    "result",
    "habit",
    "design",
    "story",
]
VERB = [
    "shapes",
    "reveals",
    "supports",
    "connects",
    "changes",
    "explains",
    "follows",
    "guides",
    "reflects",
    "strengthens",
    "rewards",
    "invites",
    "sustains",
    "clarifies",
]
TEMPLATES = [
    "{topic} is a {adj} {noun} that {verb} the way people think about everyday choices.",
    "In many ways, {topic} {verb} a {adj} {noun} that is easy to overlook.",
    "A {adj} look at {topic} shows how each {noun} {verb} the next one.",
    "Over time, the {noun} behind {topic} becomes more {adj} and easier to follow.",
    "People who study {topic} often notice a {adj} {noun} in the details.",
    "Even a small {noun} in {topic} {verb} the larger picture in a {adj} way.",
    "What makes {topic} interesting is the {adj} {noun} that sits underneath it.",
    "When the {noun} is {adj}, {topic} {verb} more than anyone expected.",
    "It helps to treat {topic} as a {adj} {noun} rather than a fixed rule.",
    "Each step in {topic} {verb} a {noun} that feels both {adj} and new.",
]
OCEAN = [
    "The ocean covers more than seventy percent of the Earth's surface and holds most of its water.",
    "Its depths are home to countless creatures, many of which have never been seen by humans.",
    "Waves and currents carry heat around the planet and shape the weather on every continent.",
    "Standing on the shore, it is easy to feel both small and calm in front of the endless blue.",
]


@dataclass
class ToolCall:
    name: str
    arguments: str
    id: str


@dataclass
class Plan:
    """What the model will output, before token accounting."""

    content: str = ""
    category: str = "prose"
    reasoning: str = ""
    tool_calls: list[ToolCall] = field(default_factory=list)


@dataclass
class ChatInput:
    """The parts of a chat request that decide the answer."""

    messages: list[dict[str, Any]]  # role, text, images (decoded), tool_calls (assistant)
    tools: list[dict[str, Any]] = field(default_factory=list)
    tool_choice: Any = "auto"
    thinking: bool = True
    effort: int = 75
    seed: int = 0


def _rng(seed: int, salt: str) -> random.Random:
    return random.Random(f"{seed}:{salt}")


def _number(word: str) -> int | None:
    if word.isdigit():
        return int(word)
    return img.NUMBER_WORDS.index(word.lower()) if word.lower() in img.NUMBER_WORDS else None


def topic_of(text: str) -> str:
    m = re.search(r"\babout (?:the |a |an )?([\w\s'-]{2,40}?)[.?!,\n]", text + ".", re.I)
    if m:
        return m.group(1).strip().lower()
    words = [w for w in re.findall(r"[A-Za-z][A-Za-z'-]+", text) if w.lower() not in STOPWORDS]
    words.sort(key=len, reverse=True)
    return " ".join(w.lower() for w in words[:2]) or "this subject"


def prose(topic: str, seed: int, target_tokens: int = 0, sentences: int = 0) -> str:
    """Deterministic sentences about a topic: `sentences` of them, or enough for target_tokens."""
    rng = _rng(seed, "prose:" + topic)
    out: list[str] = []
    n_tok = 0
    while (sentences and len(out) < sentences) or (not sentences and n_tok < target_tokens):
        t = rng.choice(TEMPLATES).format(
            topic=topic, adj=rng.choice(ADJ), noun=rng.choice(NOUN), verb=rng.choice(VERB)
        )
        sep = "\n\n" if out and len(out) % 5 == 0 else " "
        piece = (sep if out else "") + t[0].upper() + t[1:]
        out.append(piece)
        n_tok += tokens.count(piece)
    return "".join(out)


def counting(text: str) -> str | None:
    m = re.search(r"\bcount (?:from (-?\d+) )?(?:up )?to (\d+)", text, re.I)
    if not m:
        return None
    start, end = int(m.group(1) or 1), int(m.group(2))
    end = min(end, start + 20000)
    sep = "\n" if re.search(r"one per line|each on (?:a|its own) line", text, re.I) else ", "
    return sep.join(str(i) for i in range(start, end + 1))


def needle(text: str) -> str | None:
    key = r"(?:secret|magic|hidden|special|password|passphrase|passcode)"
    if not re.search(rf"\b{key}\b[^?]*\?|\?[^?]*\b{key}\b|\bwhat\b[^.]*\b{key}\b", text, re.I):
        return None
    hits = re.findall(
        rf"((?:The|the|A|a|My|my|Our|our)?[^.?!\n]*\b{key}\b[^.?!\n]*?\b(?:is|was)\b\s+[^.?!\n]+)[.!\n]", text
    )
    hits = [h.strip() for h in hits if not re.search(r"\bwhat\b", h, re.I)]
    if not hits:
        return None
    sentence = hits[-1]
    return sentence[0].upper() + sentence[1:] + "."


def single_word(text: str) -> str | None:
    m = re.search(
        r"\b(?:reply|respond|answer)(?: only)? with (?:only |just )?(?:the |a |one )?(?:single |one )?"
        r"word[:\s]+[\"'“]?([\w-]+)",
        text,
        re.I,
    )
    return m.group(1) if m else None


def n_sentences(text: str, seed: int) -> str | None:
    m = re.search(
        r"\b(?:write|give me|in) (\w+) sentences? (?:about|on) (?:the |a |an )?([^.?!\n]+)", text, re.I
    )
    if not m:
        return None
    n = _number(m.group(1)) or (1 if m.group(1).lower() in ("a", "one") else None)
    if not n:
        return None
    topic = m.group(2).strip().lower()
    if topic == "ocean":
        return " ".join(OCEAN[i % len(OCEAN)] for i in range(n))
    return prose(topic, seed, sentences=n)


def arithmetic(text: str) -> str | None:
    m = re.search(r"(-?\d+(?:\.\d+)?)\s*([-+*/x×÷]|plus|minus|times|divided by)\s*(-?\d+(?:\.\d+)?)", text)
    if not m:
        return None
    a, op, b = float(m.group(1)), m.group(2), float(m.group(3))
    sym = {"plus": "+", "minus": "-", "times": "*", "x": "*", "×": "*", "÷": "/", "divided by": "/"}.get(
        op, op
    )
    if sym == "/" and b == 0:
        return "Division by zero is undefined, so there is no answer."
    val = {"+": a + b, "-": a - b, "*": a * b, "/": a / b if b else 0.0}[sym]

    def fmt(v: float) -> str:
        return str(int(v)) if float(v).is_integer() else f"{v:.6g}"

    return (
        f"{fmt(a)} {sym} {fmt(b)} = {fmt(val)}.\n\nTo check it, apply the operation step by step: "
        f"starting from {fmt(a)} and applying {sym} {fmt(b)} gives {fmt(val)}. The answer is **{fmt(val)}**."
    )


LANGS = {
    "python": "python",
    "javascript": "javascript",
    "typescript": "typescript",
    "rust": "rust",
    "go": "go",
    "sql": "sql",
    "bash": "bash",
    "c++": "cpp",
    "java": "java",
}


def code(text: str, seed: int, target_tokens: int) -> str | None:
    if not re.search(
        r"\b(code|function|implement|script|class|algorithm|program|python|javascript|rust|sql|"
        r"refactor|bug|unit tests?)\b",
        text,
        re.I,
    ):
        return None
    skip = STOPWORDS | set(LANGS) | {"function", "code", "script", "implement", "program", "class", "returns"}
    words = [w.lower() for w in re.findall(r"[A-Za-z]+", text) if w.lower() not in skip and len(w) > 3]
    name = "_".join(words[:3]) or "solve"
    name = re.sub(r"[^a-z_]", "", name)[:40] or "solve"
    rng = _rng(seed, "code:" + name)
    lines = [
        f"Here is an implementation of `{name}`:",
        "",
        "```python",
        f"def {name}(items: list[int]) -> list[int]:",
        f'    """Return the {rng.choice(ADJ)} subset of items, in order."""',
        "    result: list[int] = []",
        "    for index, value in enumerate(items):",
        "        if value % 2 == index % 2:",
        "            result.append(value)",
        "    return result",
        "",
    ]
    k = 0
    while tokens.count("\n".join(lines)) < target_tokens:
        k += 1
        helper = f"{rng.choice(NOUN)}_{k}"
        lines += [
            f"def {helper}(values: list[int], limit: int = {rng.randint(2, 64)}) -> int:",
            f'    """Sum the values below limit ({rng.choice(ADJ)} helper {k})."""',
            "    total = 0",
            "    for value in values:",
            "        if value < limit:",
            "            total += value",
            "    return total",
            "",
        ]
    lines += ["```", "", f"The function `{name}` walks the list once, so it runs in linear time."]
    return "\n".join(lines)


def json_answer(text: str, seed: int) -> str | None:
    if not re.search(r"\bjson\b", text, re.I):
        return None
    rng = _rng(seed, "json")
    topic = topic_of(text)
    items = [
        {
            "id": i + 1,
            "name": f"{rng.choice(ADJ)} {rng.choice(NOUN)}",
            "score": rng.randint(1, 100),
            "tags": [rng.choice(ADJ), rng.choice(NOUN)],
        }
        for i in range(6)
    ]
    return "```json\n" + json.dumps({"topic": topic, "count": len(items), "items": items}, indent=2) + "\n```"


def target_length(text: str, seed: int) -> int:
    """Natural length (tokens) of a free-form answer."""
    m = re.search(r"\b(\d+)[- ]words?\b", text)
    if m:
        return int(int(m.group(1)) * 1.25)
    if re.search(r"\b(one|a single) sentence\b", text, re.I):
        return 25
    if re.search(r"\b(short|brief|briefly|concise)\b", text, re.I):
        return 80
    if re.search(r"\bparagraph\b", text, re.I):
        return 140
    return 480 + _rng(seed, "len").randint(0, 320)


def find_cities(text: str) -> list[str]:
    found: list[tuple[int, str]] = []
    for c in CITIES:
        m = re.search(rf"\b{re.escape(c)}\b", text)
        if m:
            found.append((m.start(), c))
    if not found:
        for m in re.finditer(r"\bin ([A-Z][a-z]+(?: [A-Z][a-z]+)?)", text):
            found.append((m.start(1), m.group(1)))
    return [c for _, c in sorted(found)]


def _tool_names(tools: list[dict[str, Any]]) -> list[str]:
    return [t.get("function", {}).get("name", "") for t in tools]


def _args_for(tool: dict[str, Any], city: str) -> str:
    props = tool.get("function", {}).get("parameters", {}).get("properties", {}) or {}
    key = next((k for k in ("city", "location", "place", "timezone", "query") if k in props), None)
    if key is None:
        key = next((k for k, v in props.items() if v.get("type", "string") == "string"), "city")
    return json.dumps({key: city})


def _call_id(seed: int, i: int) -> str:
    return "chatcmpl-tool-" + f"{_rng(seed, f'tool{i}').getrandbits(128):032x}"


def _pick_tool(tools: list[dict[str, Any]], text: str) -> dict[str, Any] | None:
    low = text.lower()
    best, best_score = None, 0
    for t in tools:
        fn = t.get("function", {})
        words = set(re.findall(r"[a-z]+", (fn.get("name", "") + " " + fn.get("description", "")).lower()))
        score = sum(1 for w in words if len(w) > 3 and w not in STOPWORDS and w in low)
        if fn.get("name") == "get_weather" and re.search(r"weather|temperature|forecast|rain|sunny", low):
            score += 5
        if score > best_score:
            best, best_score = t, score
    return best


def tool_plan(inp: ChatInput, text: str) -> Plan | None:
    """Tool calls (or an answer from a tool result) when tools are offered; None for plain text."""
    if not inp.tools or inp.tool_choice == "none":
        return None
    by_name = {t.get("function", {}).get("name"): t for t in inp.tools}
    last = inp.messages[-1] if inp.messages else {}
    if last.get("role") == "tool":
        results = [m for m in inp.messages if m.get("role") == "tool"]
        parts = []
        for r in results:
            body = r.get("text", "")
            try:
                data = json.loads(body)
                body = (
                    ", ".join(f"{k}: {v}" for k, v in data.items()) if isinstance(data, dict) else str(data)
                )
            except ValueError:
                pass
            parts.append(body)
        return Plan(content="Based on the tool result, " + "; ".join(parts) + ".", category="prose")
    cities = find_cities(text) or ["Paris"]
    if isinstance(inp.tool_choice, dict):
        forced = inp.tool_choice.get("function", {}).get("name", "")
        calls = []
        # The R37 build's quirk (recipe card): get_weather comes back alongside the forced get_time.
        if forced != "get_weather" and "get_weather" in by_name:
            calls.append(ToolCall("get_weather", _args_for(by_name["get_weather"], cities[0]), ""))
        calls.append(ToolCall(forced, _args_for(by_name.get(forced, {}), cities[0]), ""))
    else:
        tool = _pick_tool(inp.tools, text)
        if tool is None and inp.tool_choice == "required":
            tool = inp.tools[0]
        if tool is None:
            return None
        name = tool["function"]["name"]
        targets = find_cities(text) or cities[:1]
        calls = [ToolCall(name, _args_for(tool, c), "") for c in targets[:4]]
    for i, c in enumerate(calls):
        c.id = _call_id(inp.seed, i)
    return Plan(tool_calls=calls, category="code")


def user_text(inp: ChatInput) -> str:
    users = [m for m in inp.messages if m.get("role") == "user"]
    return users[-1].get("text", "") if users else ""


def content_plan(inp: ChatInput) -> Plan:
    """The answer (content or tool calls) for a chat input."""
    text = user_text(inp)
    whole = "\n".join(m.get("text", "") for m in inp.messages if m.get("role") in ("user", "system"))
    plan = tool_plan(inp, text)
    if plan is not None:
        return plan
    pics = [p for m in inp.messages if m.get("role") == "user" for p in m.get("images", [])]
    if pics:
        return Plan(content=img.describe(pics), category="prose")
    for fn, cat in ((counting, "counting"), (single_word, "prose")):
        answer = fn(text)
        if answer is not None:
            return Plan(content=answer, category=cat)
    found = needle(whole) if needle(text) is not None or re.search(r"\?", text) else None
    if found:
        return Plan(content=found, category="prose")
    answer = n_sentences(text, inp.seed)
    if answer:
        return Plan(content=answer, category="prose")
    target = target_length(text, inp.seed)
    answer = code(text, inp.seed, min(target, 420))
    if answer:
        return Plan(content=answer, category="code")
    answer = json_answer(text, inp.seed)
    if answer:
        return Plan(content=answer, category="code")
    answer = arithmetic(text)
    if answer:
        return Plan(content=answer, category="prose")
    return Plan(content=prose(topic_of(text), inp.seed, target_tokens=target), category="prose")


def reasoning_text(inp: ChatInput, plan: Plan) -> str:
    """Thinking text whose length scales with the effort (about 20 + 3 * effort tokens)."""
    text = user_text(inp)
    head = text.strip().splitlines()[-1][:120] if text.strip() else "the conversation"
    first = f'The user asks: "{head}". '
    if plan.tool_calls:
        names = ", ".join(f"{c.name}({c.arguments})" for c in plan.tool_calls)
        first += f"I should call {names} to answer this. "
    else:
        first += "Let me work out a clear and correct answer before replying. "
    target = 20 + 3 * inp.effort
    rest = prose("the request", inp.seed ^ 0x5EED, target_tokens=max(0, target - tokens.count(first)))
    return first + rest


def plan(inp: ChatInput) -> Plan:
    """The full output plan: reasoning (when thinking is on) then content or tool calls."""
    p = content_plan(inp)
    if inp.thinking:
        p.reasoning = reasoning_text(inp, p)
    return p
