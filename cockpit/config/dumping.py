"""Writing cluster.toml: `dump_config` gives the TOML text of a config (every key, None omitted), so that
`parse_config(dump_config(c)) == c`.
"""

from __future__ import annotations

import math
import re

from pydantic import BaseModel

from cockpit.config.models import ClusterConfig

_TOML_ESCAPES = {"\\": "\\\\", '"': '\\"', "\b": "\\b", "\t": "\\t", "\n": "\\n", "\f": "\\f",
                 "\r": "\\r"}


def toml_string(value: str) -> str:
    out = []
    for ch in value:
        if ch in _TOML_ESCAPES:
            out.append(_TOML_ESCAPES[ch])
        elif ord(ch) < 32 or ord(ch) == 127:
            out.append(f"\\u{ord(ch):04x}")
        else:
            out.append(ch)
    return '"' + "".join(out) + '"'


def toml_value(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return f"{value:_}" if abs(value) >= 100_000 else str(value)
    if isinstance(value, float):
        if not math.isfinite(value):
            raise ValueError(f"cannot write {value!r} to TOML")
        return repr(value)
    if isinstance(value, str):
        return toml_string(value)
    if isinstance(value, list):
        return "[" + ", ".join(toml_value(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{toml_key(k)} = {toml_value(v)}" for k, v in value.items()) + "}"
    raise TypeError(f"cannot write {type(value).__name__} to TOML")


def toml_key(key: str) -> str:
    return key if re.fullmatch(r"[A-Za-z0-9_-]+", key) else toml_string(key)


def _table_lines(model: BaseModel, header: str) -> list[str]:
    """`[header]` with the model's scalar keys, then a `[header.key]` sub-table for each dict value."""
    lines = [header]
    subtables: list[str] = []
    name = header.strip("[]")
    for key in type(model).model_fields:
        value = getattr(model, key)
        if value is None:
            continue
        if isinstance(value, dict):
            subtables += ["", f"[{name}.{toml_key(key)}]"]
            subtables += [f"{toml_key(k)} = {toml_value(v)}" for k, v in value.items()]
        else:
            lines.append(f"{key} = {toml_value(value)}")
    return lines + subtables


def dump_config(cfg: ClusterConfig, header: str | None = None) -> str:
    """cluster.toml text of `cfg` (every key written, None omitted); parse_config(dump_config(c)) == c."""
    lines: list[str] = []
    if header:
        lines += [f"# {line}".rstrip() for line in header.splitlines()]
        lines.append("")
    for name in ClusterConfig.model_fields:
        if name == "hosts":
            continue
        lines += [*_table_lines(getattr(cfg, name), f"[{name}]"), ""]
    for host in cfg.hosts:
        lines += [*_table_lines(host, "[[hosts]]"), ""]
    return "\n".join(lines)
