"""The small part of Go's text/template that `docker ... --format` users write."""

from __future__ import annotations

import json
import re

_ACTION = re.compile(r"{{-?\s*(.*?)\s*-?}}")


def lookup(obj: object, path: str) -> object:
    if path in (".", ""):
        return obj
    for part in path.strip(".").split("."):
        obj = obj.get(part) if isinstance(obj, dict) else None
    return obj


def to_text(value: object) -> str:
    if value is None:
        return "<no value>"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, dict):
        return "map[" + " ".join(f"{k}:{to_text(v)}" for k, v in sorted(value.items())) + "]"
    if isinstance(value, list):
        return "[" + " ".join(to_text(v) for v in value) + "]"
    return str(value)


def _eval(expr: str, obj: object) -> str:
    words = re.findall(r'"[^"]*"|\S+', expr)
    if not words:
        return ""
    if words[0] == "json" and len(words) == 2:
        return json.dumps(lookup(obj, words[1]), separators=(",", ":"), ensure_ascii=False)
    if words[0] == "index" and len(words) == 3:
        container = lookup(obj, words[1])
        key = words[2].strip('"')
        return to_text(container.get(key) if isinstance(container, dict) else None)
    if words[0] in ("upper", "lower") and len(words) == 2:
        text = to_text(lookup(obj, words[1]))
        return text.upper() if words[0] == "upper" else text.lower()
    if len(words) == 1 and words[0].startswith("."):
        return to_text(lookup(obj, words[0]))
    raise ValueError(f'template: :1: function "{words[0]}" not defined')


def render(template: str, obj: object) -> str:
    """Render one object; literal `\\t` and `\\n` become tab and newline as docker does."""
    template = template.replace("\\t", "\t").replace("\\n", "\n")
    return _ACTION.sub(lambda m: _eval(m.group(1), obj), template)
