"""The recipe's `cluster.env`: read it without executing anything, build a config from it, write it back.

`launch/node.sh` sources cluster.env as shell code. The cockpit never does: `parse_env` accepts only
plain assignments (quoted or bare words and `NAME=( ... )` arrays) and refuses everything that a shell
would execute or expand. `env_for_rank` writes one rank's file with every value quoted by shlex.
"""

from __future__ import annotations

import ipaddress
import re
import shlex
from pathlib import Path
from typing import Any

from cockpit import constants
from cockpit.config import ClusterConfig, ConfigError, config_from_data
from cockpit.safetext import clip, neutralise

EnvValue = str | list[str]

# Variables of cluster.env in the order env_for_rank writes them.
ENV_VARS = (
    "NODE_IPS", "FABRIC_IFACE", "IB_HCA", "IB_GID_INDEX", "MODEL_PATH", "ENGRAM_PATH", "CACHE_PATH",
    "IMAGE", "CONTAINER_NAME", "API_PORT", "MASTER_PORT", "MAXLEN", "SEQS", "GMU", "SPEC_K",
    "MAX_BATCHED_TOKENS", "R37_USE_LOCAL_ENGRAM_EDGES",
)
REQUIRED_VARS = ("NODE_IPS", "FABRIC_IFACE", "IB_HCA", "MODEL_PATH", "ENGRAM_PATH", "CACHE_PATH")

# Where each variable lives in cluster.toml (host fields apply to every host on import).
_TOML_KEY = {
    "MODEL_PATH": "model.path", "ENGRAM_PATH": "paths.engram", "CACHE_PATH": "paths.cache",
    "IMAGE": "runtime.image_tag", "CONTAINER_NAME": "cluster.container_name",
    "API_PORT": "cluster.api_port", "MASTER_PORT": "cluster.coord_port", "MAXLEN": "serving.maxlen",
    "SEQS": "serving.seqs", "GMU": "serving.gmu", "SPEC_K": "serving.spec_k",
    "MAX_BATCHED_TOKENS": "serving.max_batched_tokens",
    "R37_USE_LOCAL_ENGRAM_EDGES": "serving.local_engram_edges",
}
_HOST_KEY = {"fabric_iface": "FABRIC_IFACE", "ib_hca": "IB_HCA", "gid_index": "IB_GID_INDEX",
             "fabric_ip": "NODE_IPS"}
_INT_VARS = ("IB_GID_INDEX", "API_PORT", "MASTER_PORT", "MAXLEN", "SEQS", "SPEC_K", "MAX_BATCHED_TOKENS")

_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_INT = re.compile(r"[0-9]+")
_FLOAT = re.compile(r"(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][-+]?[0-9]+)?")
_KEYWORDS = frozenset({"if", "then", "else", "elif", "fi", "for", "while", "until", "do", "done", "case",
                       "esac", "function", "select", "time", "in"})


class EnvFileError(ConfigError):
    """cluster.env problems as (line, key, reason); `problems` keeps ConfigError's (key, reason) view."""

    def __init__(self, path: Path | None, entries: list[tuple[int | None, str, str]]):
        self.entries = entries
        super().__init__(path, [(key, reason) for _, key, reason in entries], "env-invalid")

    def render(self) -> str:
        """One `FILE:LINE: KEY: REASON` line per problem, neutralised."""
        where = str(self.path) if self.path else "cluster.env"
        out = []
        for line, key, reason in self.entries:
            head = f"{where}:{line}" if line is not None else where
            out.append(neutralise(clip(f"{head}: {key}: {reason}" if key else f"{head}: {reason}", 2000)))
        return "\n".join(out)


class EnvValues(dict[str, EnvValue]):
    """Parsed assignments; `lines` maps each name to the line it was assigned on."""

    def __init__(self) -> None:
        super().__init__()
        self.lines: dict[str, int] = {}


class _Refused(Exception):
    def __init__(self, line: int, reason: str, key: str = ""):
        super().__init__(reason)
        self.line, self.reason, self.key = line, reason, key


# ---- reading ------------------------------------------------------------------------------------------


def _dollar_reason(nxt: str, nxt2: str) -> str:
    if nxt == "(":
        return ("arithmetic expansion $((...)) is not allowed" if nxt2 == "("
                else "command substitution $(...) is not allowed")
    if nxt == "{":
        return "variable expansion ${...} is not allowed"
    if nxt == "'":
        return "ANSI-C quoting $'...' is not supported; use single quotes"
    if nxt == '"':
        return 'locale quoting $"..." is not supported; use double quotes'
    if nxt == "[":
        return "arithmetic expansion $[...] is not allowed"
    if nxt and (nxt.isalnum() or nxt in "_@*#?$!-"):
        return f"variable expansion ${nxt}... is not allowed (values must be literal)"
    return "'$' must be quoted (single quotes, or \\$ inside double quotes)"


_OPERATOR_REASONS = {
    ";": "';' (command separator) is not allowed: one assignment per line",
    "&&": "'&&' (command list) is not allowed",
    "||": "'||' (command list) is not allowed",
    "&": "'&' (background job) is not allowed",
    "|": "'|' (pipe) is not allowed",
    "<": "'<' (redirection) is not allowed",
    ">": "'>' (redirection) is not allowed",
}


class _Reader:
    """A scanner over the whole text that understands just enough shell to read assignments."""

    def __init__(self, text: str):
        self.text = text
        self.i = 0
        self.line = 1
        self.in_array = False

    def peek(self, k: int = 0) -> str:
        j = self.i + k
        return self.text[j] if j < len(self.text) else ""

    def advance(self, n: int = 1) -> None:
        for _ in range(n):
            if self.i < len(self.text):
                if self.text[self.i] == "\n":
                    self.line += 1
                self.i += 1

    def skip_blanks(self) -> None:
        while self.peek() in (" ", "\t") and self.peek():
            self.advance()

    def skip_line(self) -> None:
        while self.peek() and self.peek() != "\n":
            self.advance()

    def recover(self) -> None:
        """After a refusal: skip the rest of the line, or of the array the refusal happened in."""
        if self.in_array:
            while self.peek() and self.peek() != ")":
                self.advance()
            self.advance()
            self.in_array = False
        self.skip_line()

    def refuse(self, reason: str, key: str = "", line: int | None = None) -> _Refused:
        return _Refused(self.line if line is None else line, reason, key)

    def operator_reason(self) -> str | None:
        two = self.peek() + self.peek(1)
        if two in _OPERATOR_REASONS:
            return _OPERATOR_REASONS[two]
        return _OPERATOR_REASONS.get(self.peek())

    # -- words --

    def word(self, *, in_array: bool) -> str:
        out: list[str] = []
        while True:
            c = self.peek()
            if c in ("", " ", "\t", "\n") or (in_array and c == ")"):
                return "".join(out)
            if c in ";&|<>":
                return "".join(out)
            if c == "'":
                out.append(self.single_quoted())
            elif c == '"':
                out.append(self.double_quoted())
            elif c == "\\":
                nxt = self.peek(1)
                if nxt == "\n":
                    raise self.refuse("line continuation (backslash at end of line) is not supported")
                if nxt == "":
                    raise self.refuse("backslash at end of file")
                if nxt == "\r" or _is_control(nxt):
                    raise self.refuse("escaped control character is not supported")
                out.append(nxt)
                self.advance(2)
            elif c == "$":
                raise self.refuse(_dollar_reason(self.peek(1), self.peek(2)))
            elif c == "`":
                raise self.refuse("command substitution `...` is not allowed")
            elif c == "\r":
                raise self.refuse("carriage return: the file has Windows line endings (convert it to LF)")
            elif _is_control(c):
                raise self.refuse(f"control character U+{ord(c):04X} is not allowed")
            elif c in "()":
                raise self.refuse(f"unquoted {c!r} is not allowed here (quote the value)")
            elif c in "*?[":
                raise self.refuse(f"unquoted {c!r} is a glob pattern (quote the value)")
            elif c in "{}":
                raise self.refuse(f"unquoted {c!r} (brace expansion or command group) is not allowed; "
                                  "quote the value")
            elif c == "~":
                raise self.refuse("unquoted '~' would be expanded to a home directory; quote it "
                                  "or write the full path")
            else:
                out.append(c)
                self.advance()

    def single_quoted(self) -> str:
        start = self.line
        self.advance()
        out: list[str] = []
        while True:
            c = self.peek()
            if c == "":
                raise self.refuse(f"unterminated single quote (opened on line {start})", line=start)
            self.advance()
            if c == "'":
                return "".join(out)
            if c == "\r":
                raise self.refuse("carriage return: the file has Windows line endings (convert it to LF)")
            out.append(c)

    def double_quoted(self) -> str:
        start = self.line
        self.advance()
        out: list[str] = []
        while True:
            c = self.peek()
            if c == "":
                raise self.refuse(f"unterminated double quote (opened on line {start})", line=start)
            if c == '"':
                self.advance()
                return "".join(out)
            if c == "\\":
                nxt = self.peek(1)
                if nxt in ('"', "\\", "$", "`"):
                    out.append(nxt)
                    self.advance(2)
                elif nxt == "\n":
                    self.advance(2)            # bash drops an escaped newline inside double quotes
                else:
                    out.append("\\")           # bash keeps any other backslash literally
                    self.advance()
            elif c == "$":
                raise self.refuse(_dollar_reason(self.peek(1), self.peek(2))
                                  + " inside double quotes (escape it as \\$ or use single quotes)")
            elif c == "`":
                raise self.refuse("command substitution `...` is not allowed inside double quotes")
            elif c == "\r":
                raise self.refuse("carriage return: the file has Windows line endings (convert it to LF)")
            else:
                out.append(c)
                self.advance()

    def array(self) -> list[str]:
        start = self.line
        self.advance()                         # '('
        items: list[str] = []
        while True:
            while self.peek() in (" ", "\t", "\n") and self.peek():
                self.advance()
            c = self.peek()
            if c == "":
                raise self.refuse(f"unterminated array (opened on line {start}): missing ')'", line=start)
            if c == ")":
                self.advance()
                return items
            if c == "#":
                self.skip_line()
                continue
            if c == "[":
                raise self.refuse("indexed array elements ([i]=value) are not supported")
            if c == "(":
                raise self.refuse("nested '(' inside an array is not allowed")
            reason = self.operator_reason()
            if reason:
                raise self.refuse(reason)
            items.append(self.word(in_array=True))

    # -- statements --

    def statement(self, values: EnvValues) -> None:
        line = self.line
        name = self.name()
        exported = name == "export" and self.peek() in (" ", "\t")
        if exported:
            self.skip_blanks()
            if self.peek() in ("", "\n", "#"):
                raise self.refuse("'export' without an assignment")
            name = self.name()
        if not name:
            raise self.refuse(self.not_assignment_reason())
        nxt = self.peek()
        if nxt != "=":
            if exported and nxt in ("", "\n", " ", "\t", "#"):
                raise self.refuse(f"'export {name}' without '=value' is not supported")
            raise self.refuse(self.command_reason(name, nxt))
        if name in values:
            raise self.refuse(f"assigned twice (first on line {values.lines[name]})", key=name)
        self.advance()
        value: EnvValue
        if self.peek() == "(":
            self.in_array = True
            value = self.array()
            self.in_array = False
        else:
            value = self.word(in_array=False)
        self.end_of_statement()
        values[name] = value
        values.lines[name] = line

    def name(self) -> str:
        m = _NAME.match(self.text, self.i)
        if not m:
            return ""
        self.advance(m.end() - self.i)
        return m.group()

    def not_assignment_reason(self) -> str:
        c = self.peek()
        if c == "." and self.peek(1) in (" ", "\t"):
            return "'.' (source) would run another file: only NAME=value assignments are allowed"
        if c == "$":
            return _dollar_reason(self.peek(1), self.peek(2))
        if c == "`":
            return "command substitution `...` is not allowed"
        if c == "(":
            return "a subshell '( ... )' is not allowed"
        if c in "{}":
            return "a command group '{ ... }' is not allowed"
        if c == "\r":
            return "carriage return: the file has Windows line endings (convert it to LF)"
        op = self.operator_reason()
        if op:
            return op
        m = re.compile(r"[^\s;&|<>]+").match(self.text, self.i)
        word = m.group() if m else c
        return f"{word!r} is not a NAME=value assignment (names start with a letter or '_')"

    def command_reason(self, name: str, nxt: str) -> str:
        if nxt == "+" and self.peek(1) == "=":
            return f"{name}+=... (append) is not supported"
        if nxt == "[":
            return f"{name}[...]= (array element assignment) is not supported"
        if nxt == "(":
            return f"function definition {name}() is not allowed"
        if name in ("source",):
            return "'source' would run another file: only NAME=value assignments are allowed"
        if name in _KEYWORDS:
            return f"shell keyword {name!r} is not allowed: only NAME=value assignments"
        rest = self.text[self.i:self.text.find("\n", self.i) if "\n" in self.text[self.i:] else None]
        if nxt in (" ", "\t") and rest.lstrip().startswith("="):
            return f"{name} =: spaces around '=' are not allowed in an assignment"
        return f"command {name!r} is not allowed: only NAME=value assignments"

    def end_of_statement(self) -> None:
        self.skip_blanks()
        c = self.peek()
        if c in ("", "\n"):
            return
        if c == "#":
            self.skip_line()
            return
        reason = self.operator_reason()
        if reason:
            raise self.refuse(reason)
        if c == "\r":
            raise self.refuse("carriage return: the file has Windows line endings (convert it to LF)")
        m = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(?:\+?=)").match(self.text, self.i)
        if m:
            raise self.refuse("only one assignment per line is allowed")
        raise self.refuse("a command after an assignment is not allowed (NAME=value cmd runs cmd)")


def _is_control(c: str) -> bool:
    return (ord(c) < 32 and c not in "\t\n") or ord(c) == 127


def parse_env(text: str, path: Path | str | None = None) -> EnvValues:
    """Assignments of a cluster.env, read without executing it; EnvFileError lists every refusal."""
    where = Path(path) if path is not None else None
    if "\x00" in text:
        line = text[: text.index("\x00")].count("\n") + 1
        raise EnvFileError(where, [(line, "", "NUL byte in file")])
    reader = _Reader(text)
    values = EnvValues()
    errors: list[tuple[int | None, str, str]] = []
    while reader.peek():
        reader.skip_blanks()
        c = reader.peek()
        if c == "\n":
            reader.advance()
            continue
        if c in ("#", ""):
            reader.skip_line()
            continue
        try:
            reader.statement(values)
        except _Refused as refused:
            errors.append((refused.line, refused.key, refused.reason))
            reader.recover()
    if errors:
        raise EnvFileError(where, errors)
    return values


# ---- building a config --------------------------------------------------------------------------------


def _scalar(values: dict[str, EnvValue], name: str, errors: list[tuple[str, str]]) -> str | None:
    value = values.get(name)
    if isinstance(value, list):
        hint = " (comma-separated for several HCAs)" if name == "IB_HCA" else ""
        errors.append((name, f"must be a single value, not an array{hint}"))
        return None
    return value


def _convert(name: str, text: str, errors: list[tuple[str, str]]) -> Any:
    if name in _INT_VARS:
        if _INT.fullmatch(text):
            return int(text)
        errors.append((name, f"{text!r} is not a whole number"))
    elif name == "GMU":
        if _FLOAT.fullmatch(text):
            return float(text)
        errors.append((name, f"{text!r} is not a number"))
    elif name == "R37_USE_LOCAL_ENGRAM_EDGES":
        if text in ("0", "1"):
            return text == "1"
        errors.append((name, f"{text!r} must be 0 or 1"))
    else:
        return text
    return None


def _set(data: dict[str, Any], dotted: str, value: Any) -> None:
    section, key = dotted.split(".")
    data.setdefault(section, {})[key] = value


def _env_key(key: str) -> tuple[str, str]:
    """Map a cluster.toml key path back to the env variable (and a 'rank N: ' prefix for NODE_IPS).

    Imported hosts are built in NODE_IPS order, so hosts[i] has rank i.
    """
    for var, dotted in _TOML_KEY.items():
        if key == dotted:
            return var, ""
    m = re.fullmatch(r"hosts\[(\d+)\]\.(\w+)(?:\[\d+\])?", key)
    if m and m[2] in _HOST_KEY:
        var = _HOST_KEY[m[2]]
        return var, (f"rank {m[1]}: " if var == "NODE_IPS" else "")
    return key, ""


def guess_repo(model_path: str) -> str:
    """cluster.env names no repository: the card's dealignai directory says dealignai, else standard."""
    return constants.DEALIGNAI_REPO if "dealignai" in model_path.lower() else constants.STANDARD_REPO


def config_from_env(values: dict[str, EnvValue], path: Path | str | None = None) -> ClusterConfig:
    """A full ClusterConfig from cluster.env values; SSH targets default to the fabric IPs."""
    where = Path(path) if path is not None else None
    lines = getattr(values, "lines", {})
    errors: list[tuple[str, str]] = []
    for name in values:
        if name not in ENV_VARS:
            errors.append((name, f"unknown variable (cluster.env understands {', '.join(ENV_VARS)})"))
    for name in REQUIRED_VARS:
        if name not in values:
            errors.append((name, "required variable is missing"))
    data: dict[str, Any] = {}
    ips: list[str] = []
    node_ips = values.get("NODE_IPS")
    if isinstance(node_ips, str):
        errors.append(("NODE_IPS", "must be a bash array: NODE_IPS=(ip0 ip1 ip2 ip3), ordered by rank"))
    elif isinstance(node_ips, list):
        if not node_ips:
            errors.append(("NODE_IPS", "is empty: at least one fabric IP is required"))
        for rank, ip in enumerate(node_ips):
            try:
                ips.append(str(ipaddress.ip_address(ip)))
            except ValueError:
                errors.append(("NODE_IPS", f"rank {rank}: {ip!r} is not an IPv4 or IPv6 address"))
    host_fields: dict[str, Any] = {}
    for name in ENV_VARS[1:]:
        if name not in values:
            continue
        text = _scalar(values, name, errors)
        if text is None:
            continue
        value = _convert(name, text, errors)
        if value is None:
            continue
        if name == "FABRIC_IFACE":
            host_fields["fabric_iface"] = value
        elif name == "IB_HCA":
            host_fields["ib_hca"] = value
        elif name == "IB_GID_INDEX":
            host_fields["gid_index"] = value
        else:
            _set(data, _TOML_KEY[name], value)
    if errors:
        raise EnvFileError(where, [(lines.get(k), k, r) for k, r in errors])
    if isinstance(values.get("MODEL_PATH"), str):
        _set(data, "model.repo", guess_repo(str(values["MODEL_PATH"])))
    data["hosts"] = [{"rank": rank, "ssh": ip, "fabric_ip": ip, **host_fields}
                     for rank, ip in enumerate(ips)]
    try:
        return config_from_data(data, where)
    except ConfigError as exc:
        mapped: list[tuple[int | None, str, str]] = []
        for key, reason in exc.problems:
            if re.fullmatch(r"hosts\[\d+\]\.ssh", key):
                continue                       # the SSH target is the fabric IP: reported there
            var, prefix = _env_key(key)
            entry = (lines.get(var), var, prefix + reason)
            if entry not in mapped:
                mapped.append(entry)
        raise EnvFileError(where, mapped) from None


# ---- writing ------------------------------------------------------------------------------------------


def env_values(cfg: ClusterConfig, rank: int) -> dict[str, EnvValue]:
    """The cluster.env values of one rank, in ENV_VARS order."""
    host = cfg.host(rank)
    return {
        "NODE_IPS": cfg.fabric_ips(),
        "FABRIC_IFACE": host.fabric_iface,
        "IB_HCA": ",".join(host.ib_hca),
        "IB_GID_INDEX": str(host.gid_index),
        "MODEL_PATH": cfg.model_path(rank),
        "ENGRAM_PATH": cfg.engram_path(rank),
        "CACHE_PATH": cfg.cache_path(rank),
        "IMAGE": cfg.runtime.image_tag,
        "CONTAINER_NAME": cfg.cluster.container_name,
        "API_PORT": str(cfg.cluster.api_port),
        "MASTER_PORT": str(cfg.cluster.coord_port),
        "MAXLEN": str(cfg.serving.maxlen),
        "SEQS": str(cfg.serving.seqs),
        "GMU": repr(cfg.serving.gmu),
        "SPEC_K": str(cfg.serving.spec_k),
        "MAX_BATCHED_TOKENS": str(cfg.serving.max_batched_tokens),
        "R37_USE_LOCAL_ENGRAM_EDGES": "1" if cfg.serving.local_engram_edges else "0",
    }


def env_for_rank(cfg: ClusterConfig, rank: int) -> str:
    """That rank's cluster.env text: a comment header, then one quoted assignment per variable."""
    lines = [
        f"# cluster.env for rank {rank} of {len(cfg.hosts)}, written by r37-cockpit from cluster.toml.",
        "# launch/node.sh sources this file as shell code; every value is quoted. NODE_IPS is ordered by",
        "# rank. Change cluster.toml and export again rather than editing this file.",
    ]
    for name, value in env_values(cfg, rank).items():
        if isinstance(value, list):
            lines.append(f"{name}=(" + " ".join(shlex.quote(v) for v in value) + ")")
        else:
            lines.append(f"{name}={shlex.quote(value)}")
    return "\n".join(lines) + "\n"
