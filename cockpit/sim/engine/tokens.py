"""A deterministic tokenizer stand-in: the engine's prompt and completion token accounting.

Rules (first match wins, scanning left to right; the pieces concatenate back to the text exactly):
an optional leading space plus up to 6 letters; an optional leading space plus up to 3 digits; an optional
leading space plus one other printable character; one newline; a run of other whitespace. English prose
comes out at about 1.35 tokens per word (about 4.5 characters per token), close to a real BPE tokenizer.
"""

from __future__ import annotations

import json
import re
from typing import Any

DESCRIPTION = (
    "pieces: ' '?letters{1,6} | ' '?digits{1,3} | ' '?one other character | newline | "
    "whitespace run; about 1.35 tokens per English word, about 4.5 characters per token; "
    "chat prompt = 3 + per message (4 + content tokens) + 64..1024 per image "
    "(ceil(w/28)*ceil(h/28)) + tokens of the tools JSON"
)

_PIECE = re.compile(r" ?[^\W\d_]{1,6}| ?\d{1,3}| ?[^\w\s]| ?_|\n|[^\S\n]+|.", re.DOTALL)

MESSAGE_OVERHEAD = 4
PROMPT_OVERHEAD = 3


def tokenize(text: str) -> list[str]:
    """Split text into token pieces; "".join(tokenize(t)) == t."""
    return _PIECE.findall(text)


def count(text: str) -> int:
    return len(tokenize(text))


def image_tokens(width: int, height: int) -> int:
    """Tokens one image costs in the prompt."""
    return min(1024, max(64, -(-width // 28) * -(-height // 28)))


def prompt_tokens(
    texts: list[str], image_sizes: list[tuple[int, int]], tools: list[dict[str, Any]] | None
) -> int:
    """Prompt tokens of a chat request: texts are the messages' text contents."""
    n = PROMPT_OVERHEAD + sum(MESSAGE_OVERHEAD + count(t) for t in texts)
    n += sum(image_tokens(w, h) for w, h in image_sizes)
    if tools:
        n += count(json.dumps(tools, separators=(",", ":")))
    return n
