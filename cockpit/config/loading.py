"""Reading cluster.toml: capped, non-blocking file reads, TOML parsing and validation with every problem
named by key and reason (ConfigError), and discovery (`--config`, then `cockpit.locations.config_search`).
"""

from __future__ import annotations

import difflib
import os
import re
import tomllib
import typing
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ValidationError

from cockpit.config.errors import ConfigError
from cockpit.config.models import ClusterConfig
from cockpit.config.validators import shown
from cockpit.files import NotReadable, read_bounded
from cockpit.locations import config_search


def _loc(loc: tuple[str | int, ...]) -> str:
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out


_TYPE_WORDS = {
    "int_type": "an integer", "float_type": "a number", "string_type": "a string",
    "bool_type": "true or false", "list_type": "an array", "model_type": "a table",
    "dict_type": "a table", "model_attributes_type": "a table",
}


def _kind(value: object) -> str:
    if isinstance(value, bool):
        return f"boolean {str(value).lower()}"
    if isinstance(value, int):
        return f"integer {value}" if abs(value) < 10**30 else "an integer too large for any key"

    if isinstance(value, float):
        return f"float {value!r}"
    if isinstance(value, str):
        return f"string {shown(value)}"
    if isinstance(value, dict):
        return "a table"
    if isinstance(value, list):
        return "an array"
    return type(value).__name__


def _fields_at(loc: tuple[str | int, ...]) -> list[str]:
    """Allowed keys of the table at `loc` (for 'did you mean')."""
    model: Any = ClusterConfig
    for part in loc:
        if isinstance(part, int):
            continue
        field = model.model_fields.get(part)
        if field is None:
            return []
        ann = field.annotation
        args = typing.get_args(ann)
        model = args[0] if typing.get_origin(ann) is list and args else ann
        if not (isinstance(model, type) and issubclass(model, BaseModel)):
            return []
    return list(model.model_fields)


def _reason(err: Any) -> str:
    kind = err["type"]
    if kind == "missing":
        return "required key is missing"
    if kind == "extra_forbidden":
        allowed = _fields_at(err["loc"][:-1])
        close = difflib.get_close_matches(str(err["loc"][-1]), allowed, n=1)
        hint = f" (did you mean {close[0]!r}?)" if close else (
            f" (allowed: {', '.join(allowed)})" if allowed else "")
        return f"unknown key{hint}"
    if kind == "value_error":
        return str(err["ctx"]["error"])
    if kind in _TYPE_WORDS:
        extra = " of tables ([[hosts]])" if err["loc"] == ("hosts",) else ""
        return f"expected {_TYPE_WORDS[kind]}{extra}, got {_kind(err['input'])}"
    return str(err["msg"])


def problems_from(exc: ValidationError) -> list[tuple[str, str]]:
    """(key path, human reason) for every error pydantic reported."""
    out: list[tuple[str, str]] = []
    for err in exc.errors():
        if err["type"] == "cluster_problems":
            out.extend(err["ctx"]["problems"])
        else:
            out.append((_loc(err["loc"]), _reason(err)))
    return out


_TOML_AT = re.compile(r"^(?P<msg>.*?)\s*\(at line (?P<line>\d+), column (?P<col>\d+)\)$")


def _toml_problem(exc: tomllib.TOMLDecodeError) -> str:
    text = str(exc)
    m = _TOML_AT.match(text)
    if m:
        return f"TOML syntax error at line {m['line']}, column {m['col']}: {m['msg']}"
    return f"TOML syntax error: {text}"


# ---- loading ------------------------------------------------------------------------------------------


def config_from_data(data: dict[str, Any], path: Path | None = None) -> ClusterConfig:
    """Validate already-parsed TOML data; ConfigError lists every problem."""
    try:
        return ClusterConfig.model_validate(data)
    except ValidationError as exc:
        raise ConfigError(path, problems_from(exc)) from None
    except RecursionError:
        raise ConfigError(path, [("", "tables or arrays are nested too deeply")]) from None


def parse_config(text: str, path: Path | None = None) -> ClusterConfig:
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(path, [("", _toml_problem(exc))]) from None
    except RecursionError:
        raise ConfigError(path, [("", "TOML tables or arrays are nested too deeply")]) from None
    except ValueError as exc:   # an integer of more than 4300 digits
        raise ConfigError(path, [("", f"TOML value cannot be read: {shown(str(exc), 200)}")]) from None
    return config_from_data(data, path)


MAX_FILE_BYTES = 1 << 20
"""A cluster.toml or cluster.env is a few KB: anything over 1 MiB is refused before it is parsed."""


def _read_capped(path: Path, what: str) -> bytes:
    """The bytes of a regular file of at most MAX_FILE_BYTES (a FIFO or device is never waited on)."""
    try:
        return read_bounded(path, MAX_FILE_BYTES)
    except NotReadable as exc:
        if exc.kind == "too-large":
            raise ConfigError(path, [("", f"is larger than {MAX_FILE_BYTES >> 20} MiB: not a {what}")]
                              ) from None
        raise ConfigError(path, [("", f"is not a regular file (a device, FIFO or socket), not a {what}")]
                          ) from None


def read_text_file(path: Path, what: str = "file") -> str:
    """UTF-8 text of a file, or ConfigError with one clear problem."""
    try:
        raw = _read_capped(path, what)
    except FileNotFoundError:
        raise ConfigError(path, [("", f"{what} not found")], "config-missing") from None
    except IsADirectoryError:
        raise ConfigError(path, [("", f"is a directory, not a {what}")]) from None
    except PermissionError:
        raise ConfigError(path, [("", f"permission denied reading the {what}")]) from None
    except OSError as exc:
        raise ConfigError(path, [("", f"cannot read the {what}: {exc.strerror or exc}")]) from None
    except ValueError:                       # a NUL byte in the path
        raise ConfigError(path, [("", f"the {what}'s path contains a NUL byte")]) from None
    try:
        return raw.decode("utf-8")

    except UnicodeDecodeError as exc:
        line = raw[: exc.start].count(b"\n") + 1
        raise ConfigError(path, [("", f"not UTF-8 text (byte 0x{raw[exc.start]:02x} on line {line})")]
                          ) from None


def load_config(path: Path) -> ClusterConfig:
    path = Path(path)
    return parse_config(read_text_file(path), path)


def discover_config(explicit: str | os.PathLike[str] | None = None) -> Path:
    """--config, then ./cluster.toml, then $XDG_CONFIG_HOME/r37-cockpit/cluster.toml (`config_search`)."""
    if explicit:
        return Path(explicit)
    search = config_search()
    for candidate in search:
        if candidate.is_file():
            return candidate
    raise ConfigError(None, [("", "no cluster.toml: pass --config PATH, or put one in ./cluster.toml or "
                                  f"{search[-1]}; `r37-cockpit demo` runs on a simulated cluster")],
                      "config-missing")
