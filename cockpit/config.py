"""cluster.toml: pydantic models of the deployment, loading with clear errors, discovery, dumping.

Every value that ends up on a host (paths, names, interface and HCA names, ports) is validated here,
so the layers above can rely on it: no control characters, no shell metacharacters, absolute paths.
"""

from __future__ import annotations

import difflib
import ipaddress
import math
import os
import re
import stat
import tomllib
import typing
import unicodedata
from pathlib import Path
from typing import Annotated, Any

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    ValidationError,
    model_validator,
)
from pydantic_core import PydanticCustomError

from cockpit import constants as C
from cockpit.locations import config_search
from cockpit.safetext import clip, neutralise

# ---- value rules --------------------------------------------------------------------------------------

SHELL_META = frozenset("$`\\;|&<>(){}*?[]'\"")
_CONTROL_NAMES = {"\n": "a newline", "\r": "a carriage return", "\t": "a tab", "\x00": "a NUL byte"}
_HCA = re.compile(r"[A-Za-z0-9_]{1,63}")
_CONTAINER = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{1,127}")
_HOSTNAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9._-]{0,252}")
_LOGIN = re.compile(r"[A-Za-z_][A-Za-z0-9._-]{0,31}")
_REPO_PART = re.compile(r"[A-Za-z0-9](?:[A-Za-z0-9._-]{0,94}[A-Za-z0-9])?")
_REF = re.compile(r"[A-Za-z0-9._/-]{1,255}")
_HEX40 = re.compile(r"[0-9a-fA-F]{40}")
_HEX64 = re.compile(r"[0-9a-fA-F]{64}")
_CLUSTER_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9 _.-]{0,63}")
# Docker image reference (distribution/reference grammar): [domain[:port]/]path[/path...][:tag][@digest]
_DOMAIN_PART = r"(?:[a-zA-Z0-9]|[a-zA-Z0-9][a-zA-Z0-9-]*[a-zA-Z0-9])"
_PATH_PART = r"[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*"
_IMAGE_REF = re.compile(
    rf"(?:{_DOMAIN_PART}(?:\.{_DOMAIN_PART})*(?::[0-9]+)?/)?{_PATH_PART}(?:/{_PATH_PART})*"
    r"(?::[\w][\w.-]{0,127})?(?:@sha256:[0-9a-f]{64})?"
)


_BIDI = frozenset("\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069")
_LINE_SEPS = {"\u2028": "a line separator (U+2028)", "\u2029": "a paragraph separator (U+2029)",
              "\x85": "a next-line control (U+0085)"}
SYSTEM_ROOTS = ("/", "/bin", "/boot", "/dev", "/etc", "/lib", "/lib32", "/lib64", "/libx32", "/proc",
                "/root", "/run", "/sbin", "/sys", "/usr", "/var")
"""Directories no model, Engram or cache path may be (a bind mount of one hands the container the host)."""
NEVER_INSIDE = ("/boot", "/dev", "/etc", "/proc", "/sys")
"""System trees no such path may lie inside either."""


def _unsafe_char(ch: str) -> str | None:
    """Why `ch` may not appear in a path or name (None if it may): controls, bidi, invisible characters."""
    o = ord(ch)
    if o < 32 or 0x7F <= o <= 0x9F:
        return _LINE_SEPS.get(ch) or _CONTROL_NAMES.get(ch, f"a control character (U+{o:04X})")
    if ch in _LINE_SEPS:
        return _LINE_SEPS[ch]
    if ch in _BIDI:
        return f"a bidirectional override or isolate (U+{o:04X}), which makes text display reordered"
    if o > 0x7F and unicodedata.category(ch) in ("Cf", "Cs", "Zl", "Zp"):
        return f"an invisible format character (U+{o:04X})"
    return None


def _control_char(value: str) -> str | None:
    if value.isascii() and value.isprintable():
        return None
    for ch in value:
        bad = _unsafe_char(ch)
        if bad:
            return bad
    return None


def shown(value: str, limit: int = 120) -> str:
    """`value` quoted for a message: repr (escapes every control), cut with a mark if long."""
    if len(value) <= limit:
        return repr(value)
    return f"{value[:limit]!r}… ({len(value)} characters)"


def _no_control(value: str) -> str:
    bad = _control_char(value)
    if bad:
        raise ValueError(f"{shown(value)} contains {bad}")
    return value


def _host_safe(value: str, what: str = "value") -> str:
    """Reject what a host's shell (or the recipe's scripts) could misread: control chars, metacharacters."""
    if not value:
        raise ValueError(f"{what} is empty")
    _no_control(value)
    metas = sorted(set(value) & SHELL_META)
    if metas:
        listed = " ".join(metas)
        plural = "s" if len(metas) > 1 else ""
        raise ValueError(f"{shown(value)} contains shell metacharacter{plural} {listed}")
    return value


def _path_parts(value: str) -> None:
    if len(value.encode()) > 4095:
        raise ValueError(f"path is longer than 4095 bytes ({len(value.encode())})")
    for part in value.split("/"):
        if part == "..":
            raise ValueError(f"{shown(value)} contains a '..' component")
        if len(part.encode()) > 255:
            raise ValueError(f"{shown(value)} has a component longer than 255 bytes")


def _no_whitespace(value: str) -> None:
    """Host paths hold no whitespace: cluster.env is sourced by bash on the hosts and the recipe's scripts
    (not the cockpit's) would split an unquoted `$MODEL_PATH`; a trailing space is also invisible."""
    for ch in value:
        if ch.isspace() or unicodedata.category(ch) == "Zs":
            what = "a space" if ch == " " else f"whitespace (U+{ord(ch):04X})"
            raise ValueError(f"{shown(value)} contains {what}: host paths may not hold whitespace "
                             "(the recipe's scripts on the hosts would split the path)")


def host_path(value: str) -> str:
    """An absolute path on a host: no whitespace, controls, bidi or shell metacharacters."""
    _host_safe(value, "path")
    _no_whitespace(value)
    if not value.startswith("/"):
        raise ValueError(f"{shown(value)} is not an absolute path (it must start with '/')")
    _path_parts(value)
    return value


def normal_path(value: str) -> str:
    """`value` with repeated and trailing slashes and '.' components removed ('/srv//a/./' -> '/srv/a')."""
    parts = [p for p in value.split("/") if p not in ("", ".")]
    return "/" + "/".join(parts)


def mount_path(value: str) -> str:
    """An absolute host path that is bind-mounted into the container (docker -v SRC:DST splits on ':').

    Never a system directory: mounting `/`, `/usr` or `/etc` read-write would hand the container the host.
    """
    host_path(value)
    if ":" in value:
        raise ValueError(f"{shown(value)} contains ':', which docker -v cannot mount")
    norm = normal_path(value)
    if norm in SYSTEM_ROOTS:
        raise ValueError(f"{shown(value)} is a system directory ({norm}); use a directory of its own, "
                         "e.g. /srv/models/NAME")
    inside = next((r for r in NEVER_INSIDE if norm.startswith(r + "/")), None)
    if inside:
        raise ValueError(f"{shown(value)} lies inside the system directory {inside}")
    return value


def recipe_dir_path(value: str) -> str:
    """Absolute, or relative to the SSH login's home directory."""
    _host_safe(value, "path")
    _no_whitespace(value)
    if value.startswith("~"):
        raise ValueError(f"{shown(value)}: write it relative to the login's home (e.g. 'r37-recipe'), "
                         "'~' is not expanded")
    if value.startswith("-"):
        raise ValueError(f"{shown(value)} must not start with '-' (it would be read as an option)")
    if normal_path(value) in SYSTEM_ROOTS and value.startswith("/"):
        raise ValueError(f"{shown(value)} is a system directory; the recipe needs a directory of its own")
    _path_parts(value)
    return value


def repo_relative_path(value: str) -> str:
    """A path inside a Hugging Face repository."""
    _host_safe(value, "path")
    _no_whitespace(value)
    if value.startswith(("/", "-", "~")):
        raise ValueError(f"{shown(value)} must be relative to the repository root")
    _path_parts(value)
    return value


def local_path(value: str) -> str:
    """A path on the admin box (may start with '~'; spaces allowed: it never reaches a shell)."""
    if not value:
        raise ValueError("path is empty")
    _no_control(value)
    if len(value.encode()) > 4095:
        raise ValueError(f"path is longer than 4095 bytes ({len(value.encode())})")
    return value


_IFNAME = re.compile(r"[A-Za-z0-9_.@-]{1,15}")


def interface_name(value: str) -> str:
    """A Linux netdev name (1-15 of letters, digits, '_', '.', '@', '-'; not '.'/'..'), never an option.

    ':' is refused too: Linux refuses it in a name (`eth0:1` is an address label, not an interface).
    """
    if not value:
        raise ValueError("interface name is empty")
    if value.startswith("-"):
        raise ValueError(f"{shown(value)} is not a valid network interface name: it starts with '-' and "
                         "would be read as a command option")
    if not _IFNAME.fullmatch(value) or value in (".", ".."):
        raise ValueError(f"{shown(value)} is not a valid network interface name (1-15 characters of "
                         "letters, digits, '_', '.', '@', '-'; no '/', ':', whitespace or shell "
                         "metacharacters)")
    return value


def hca_name(value: str) -> str:
    """An RDMA device name (rocep1s0f1, mlx5_0): letters, digits and '_', so never an option."""
    if value.startswith("-"):
        raise ValueError(f"{shown(value)} is not a valid RDMA device name: it starts with '-' and would "
                         "be read as a command option")
    if not _HCA.fullmatch(value):
        raise ValueError(f"{shown(value)} is not a valid RDMA device name (1-63 letters, digits and '_', "
                         "e.g. rocep1s0f0 or mlx5_0)")
    return value


def hca_list(value: Any) -> Any:
    """`ib_hca` may be written as one string (optionally comma-separated) or a list."""
    if isinstance(value, str):
        return [part.strip() for part in value.split(",")]
    return value


def _hca_list_rules(value: list[str]) -> list[str]:
    if not value:
        raise ValueError("at least one HCA is required")
    dupes = sorted({v for v in value if value.count(v) > 1})
    if dupes:
        raise ValueError(f"HCA {dupes[0]!r} is listed twice")
    return value


def ip_text(value: str) -> str:
    """A valid IPv4 or IPv6 address, normalised (no scope id)."""
    try:
        addr = ipaddress.ip_address(value)
    except ValueError:
        raise ValueError(f"{shown(value)} is not an IPv4 or IPv6 address") from None
    if isinstance(addr, ipaddress.IPv6Address) and addr.scope_id:
        raise ValueError(f"{shown(value)}: scoped IPv6 addresses are not supported")
    return str(addr)


def ssh_target(value: str) -> str:
    """A hostname, an IP address or an ssh_config alias; user and port go in their own keys."""
    if not value:
        raise ValueError("SSH target is empty")
    try:
        return str(ipaddress.ip_address(value))
    except ValueError:
        pass
    if "@" in value:
        raise ValueError(f"{shown(value)}: put the login name in 'user', not in 'ssh'")
    if ":" in value or value.startswith("["):
        raise ValueError(f"{shown(value)}: put the port in 'port', not in 'ssh'")
    if value.startswith("-"):
        raise ValueError(f"{shown(value)} must not start with '-'")
    if not _HOSTNAME.fullmatch(value):
        raise ValueError(f"{shown(value)} is not a hostname, IP address or ssh_config alias")
    return value


def login_name(value: str) -> str:
    if not _LOGIN.fullmatch(value):
        raise ValueError(f"{shown(value)} is not a valid login name (letters, digits, '.', '_', '-'; "
                         "starting with a letter or '_'; at most 32 characters)")
    return value


def container_name_text(value: str) -> str:
    if not _CONTAINER.fullmatch(value):
        raise ValueError(f"{shown(value)} is not a valid docker container name (letters, digits, '_', '.', "
                         "'-'; starting with a letter or digit; 2-128 characters)")
    return value


def image_ref(value: str) -> str:
    if len(value) > 255 or not _IMAGE_REF.fullmatch(value):
        raise ValueError(f"{shown(value)} is not a valid docker image reference (e.g. {C.IMAGE_TAG})")
    return value


def repo_id(value: str) -> str:
    owner, sep, name = value.partition("/")
    ok = (sep and _REPO_PART.fullmatch(owner) and _REPO_PART.fullmatch(name)
          and "--" not in value and ".." not in value)
    if not ok:
        raise ValueError(f"{shown(value)} is not a Hugging Face repository id 'owner/name'")
    return value


def revision_text(value: str) -> str:
    """A 40-hex commit or a ref name that is safe on a command line."""
    if _HEX40.fullmatch(value):
        return value.lower()
    ok = (_REF.fullmatch(value) and not value.startswith(("-", "/", "."))
          and not value.endswith(("/", ".", ".lock")) and ".." not in value and "//" not in value
          and "/." not in value)
    if not ok:
        raise ValueError(f"{shown(value)} is not a 40-hex commit or a safe ref name "
                         "(letters, digits, '.', '_', '-', '/')")
    return value


def sha256_hex(value: str) -> str:
    if not _HEX64.fullmatch(value):
        raise ValueError(f"{shown(value)} is not a sha256 digest (64 hex digits)")
    return value.lower()


def image_id_text(value: str) -> str:
    if not (value.startswith("sha256:") and _HEX64.fullmatch(value[7:])):
        raise ValueError(f"{shown(value)} is not a docker image ID ('sha256:' and 64 hex digits)")
    return value.lower()


def cluster_name(value: str) -> str:
    if not _CLUSTER_NAME.fullmatch(value):
        raise ValueError(f"{shown(value)} is not a valid cluster name (letters, digits, space, '_', '.', "
                         "'-'; at most 64 characters)")
    return value


def int_range(lo: int, hi: int | None, what: str) -> AfterValidator:
    def check(value: int) -> int:
        if value < lo or (hi is not None and value > hi):
            span = f"{lo}..{hi}" if hi is not None else f">= {lo}"
            raise ValueError(f"{what} {value} is out of range ({span})")
        return value
    return AfterValidator(check)


def float_range(lo: float, hi: float | None, what: str, *, lo_open: bool = True) -> AfterValidator:
    def check(value: float) -> float:
        low_ok = value > lo if lo_open else value >= lo
        if not math.isfinite(value) or not low_ok or (hi is not None and value > hi):
            span = (f"{'(' if lo_open else '['}{lo:g}, {hi:g}]" if hi is not None
                    else f"{'>' if lo_open else '>='} {lo:g}")
            raise ValueError(f"{what} {value!r} is out of range {span}")
        return value
    return AfterValidator(check)


Port = Annotated[int, int_range(1, 65535, "port")]
Positive = Annotated[int, int_range(1, 2**63 - 1, "value")]  # int64: what the programs on the hosts read
HostPath = Annotated[str, AfterValidator(host_path)]
MountPath = Annotated[str, AfterValidator(mount_path)]
RecipeDir = Annotated[str, AfterValidator(recipe_dir_path)]
LocalPath = Annotated[str, AfterValidator(local_path)]
Seconds = Annotated[float, float_range(0, None, "seconds")]

# ---- models -------------------------------------------------------------------------------------------


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)


class ClusterSection(Strict):
    name: Annotated[str, AfterValidator(cluster_name)] = "r37"
    container_name: Annotated[str, AfterValidator(container_name_text)] = C.CONTAINER_NAME
    api_port: Port = C.API_PORT
    coord_port: Port = C.COORD_PORT


class ModelSection(Strict):
    repo: Annotated[str, AfterValidator(repo_id)] = C.DEALIGNAI_REPO
    revision: Annotated[str, AfterValidator(revision_text)] | None = None
    path: MountPath = "/srv/models/DeepSeek-V4.1-Flash-dealignai"
    shared_readonly: bool = False


class RuntimeSection(Strict):
    recipe_repo: Annotated[str, AfterValidator(repo_id)] = C.RECIPE_REPO
    image_tag: Annotated[str, AfterValidator(image_ref)] = C.IMAGE_TAG
    image_id: Annotated[str, AfterValidator(image_id_text)] = C.IMAGE_ID
    archive: Annotated[str, AfterValidator(repo_relative_path)] = C.RUNTIME_ARCHIVE
    sha256: Annotated[str, AfterValidator(sha256_hex)] = C.ARCHIVE_SHA256
    size_bytes: Positive = C.ARCHIVE_SIZE


class ServingSection(Strict):
    maxlen: Positive = C.MAXLEN
    seqs: Positive = C.SEQS
    gmu: Annotated[float, float_range(0.0, 1.0, "gmu")] = C.GMU
    spec_k: Annotated[int, int_range(0, None, "spec_k")] = C.SPEC_K
    max_batched_tokens: Positive = 4096
    local_engram_edges: bool = True


class PathsSection(Strict):
    engram: MountPath = "/srv/engram-local/DeepSeek-V4.1-Flash"
    cache: MountPath = "/srv/cache"
    recipe_dir: RecipeDir = "r37-recipe"


class BudgetSection(Strict):
    checkpoint_bytes: Positive = C.CHECKPOINT_BUDGET
    engram_bytes: Positive = C.ENGRAM_BUDGET
    runtime_bytes: Positive = C.RUNTIME_BUDGET
    min_mem_available_bytes: Positive = C.MIN_MEM_AVAILABLE


SSH_CIPHERS = ("aes128-gcm@openssh.com", "aes256-gcm@openssh.com", "chacha20-poly1305@openssh.com",
               "aes256-ctr", "aes192-ctr", "aes128-ctr")
"""The ciphers the cockpit offers, in its order of preference: AES-GCM first, because it costs the
cockpit's SSH client a fifth less CPU per packet than ChaCha20-Poly1305 (255-279 vs 316-321 µs per streamed
token through the tunnel, ``bench/perf/stream.py --tunnel``); every OpenSSH since 6.5 has all six."""


def cipher_list(value: list[str]) -> list[str]:
    """A non-empty list of known SSH ciphers, each once (the order is the preference)."""
    if not value:
        raise ValueError("at least one cipher is needed; known: " + ", ".join(SSH_CIPHERS))
    for name in value:
        if name not in SSH_CIPHERS:
            raise ValueError(f"{shown(name)} is not a cipher the cockpit offers; known: "
                             + ", ".join(SSH_CIPHERS))
    if len(set(value)) != len(value):
        raise ValueError("a cipher is listed twice")
    return value


class SSHSection(Strict):
    known_hosts: LocalPath | None = None
    identity_file: LocalPath | None = None
    connect_timeout: Seconds = 10.0
    keepalive_interval: Annotated[float, float_range(0, None, "seconds", lo_open=False)] = 2.0
    keepalive_count_max: Positive = 3
    ciphers: Annotated[list[str], AfterValidator(cipher_list)] = Field(
        default_factory=lambda: list(SSH_CIPHERS))


_BINDING_ID = re.compile(r"[A-Za-z0-9_.-]{1,64}")
_KEYS = re.compile(r"[A-Za-z0-9_+-]{1,32}(?:,[A-Za-z0-9_+-]{1,32})*")
_THEME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]{0,63}")


def keymap_rules(value: dict[str, str]) -> dict[str, str]:
    """Binding id -> Textual key(s), e.g. {"quit": "ctrl+q", "help": "question_mark,f1"}."""
    for binding, keys in value.items():
        if not _BINDING_ID.fullmatch(binding):
            raise ValueError(f"{shown(binding)} is not a binding id (letters, digits, '_', '.', '-')")
        if not _KEYS.fullmatch(keys):
            raise ValueError(f"{binding}: {shown(keys)} is not a key or comma-separated keys (e.g. 'ctrl+q')")
    return value


def theme_name(value: str) -> str:
    if not _THEME.fullmatch(value):
        raise ValueError(f"{shown(value)} is not a theme name (letters, digits, '_', '-')")
    return value


class UISection(Strict):
    theme: Annotated[str, AfterValidator(theme_name)] | None = None
    keymap: Annotated[dict[str, str], AfterValidator(keymap_rules)] = Field(default_factory=dict)
    log_buffer_lines: Annotated[int, int_range(1000, 10_000_000, "log buffer lines")] = 200_000
    # After an answer's first token its socket is read (and the answer redrawn) once per frame: every
    # wakeup costs the client more than the bytes it brings. 0 = read every piece as it arrives.
    stream_frame_ms: Annotated[int, int_range(0, 2000, "stream frame ms")] = C.STREAM_FRAME_MS


class EngineSection(Strict):
    """How the cockpit judges a serving engine and how long it waits for one."""

    # hung: /metrics shows requests running while vllm:generation_tokens_total stays flat this long
    hang_after_s: Seconds = 90.0
    # chat and smoke: seconds to the first token (prefill of a long prompt counts), then between tokens
    first_token_timeout_s: Seconds = 300.0
    idle_timeout_s: Seconds = 60.0
    # chat and smoke: seconds one read may wait for any byte at all (never less than a deadline + 1 s)
    read_timeout_s: Annotated[float, float_range(1, None, "seconds")] = 600.0


class HostEntry(Strict):
    rank: Annotated[int, int_range(0, None, "rank")]
    ssh: Annotated[str, AfterValidator(ssh_target)]
    user: Annotated[str, AfterValidator(login_name)] | None = None
    port: Port | None = None
    fabric_ip: Annotated[str, AfterValidator(ip_text)]
    fabric_iface: Annotated[str, AfterValidator(interface_name)]
    ib_hca: Annotated[list[Annotated[str, AfterValidator(hca_name)]],
                      BeforeValidator(hca_list), AfterValidator(_hca_list_rules)]
    gid_index: Annotated[int, int_range(0, 255, "gid_index")] = 3
    model_path: MountPath | None = None
    engram_path: MountPath | None = None
    cache_path: MountPath | None = None
    recipe_dir: RecipeDir | None = None

    @property
    def target(self) -> str:
        """`user@host:port` as the operator would type it (user and port only when set)."""
        where = self.ssh if self.port is None else f"{self.ssh}:{self.port}"
        return f"{self.user}@{where}" if self.user else where


class ClusterConfig(Strict):
    cluster: ClusterSection = Field(default_factory=ClusterSection)
    model: ModelSection = Field(default_factory=ModelSection)
    runtime: RuntimeSection = Field(default_factory=RuntimeSection)
    serving: ServingSection = Field(default_factory=ServingSection)
    paths: PathsSection = Field(default_factory=PathsSection)
    budget: BudgetSection = Field(default_factory=BudgetSection)
    ssh: SSHSection = Field(default_factory=SSHSection)
    ui: UISection = Field(default_factory=UISection)
    engine: EngineSection = Field(default_factory=EngineSection)
    hosts: list[HostEntry]

    @model_validator(mode="after")
    def _cross_checks(self) -> ClusterConfig:
        problems = cross_problems(self)
        if problems:
            raise PydanticCustomError("cluster_problems", "{summary}",
                                      {"summary": "; ".join(f"{k}: {r}" for k, r in problems),
                                       "problems": problems})
        return self

    def host(self, rank: int) -> HostEntry:
        for h in self.hosts:
            if h.rank == rank:
                return h
        raise KeyError(f"no host has rank {rank} (ranks: {sorted(self.ranks)})")

    @property
    def ranks(self) -> list[int]:
        return [h.rank for h in self.hosts]

    def by_rank(self) -> list[HostEntry]:
        """Hosts ordered by rank."""
        return sorted(self.hosts, key=lambda h: h.rank)

    def fabric_ips(self) -> list[str]:
        """Fabric IPs ordered by rank (the recipe's NODE_IPS)."""
        return [h.fabric_ip for h in self.by_rank()]

    def model_path(self, rank: int) -> str:
        return self.host(rank).model_path or self.model.path

    def engram_path(self, rank: int) -> str:
        return self.host(rank).engram_path or self.paths.engram

    def cache_path(self, rank: int) -> str:
        return self.host(rank).cache_path or self.paths.cache

    def recipe_dir(self, rank: int) -> str:
        return self.host(rank).recipe_dir or self.paths.recipe_dir


MAX_HOSTS = 256


def cross_problems(cfg: ClusterConfig) -> list[tuple[str, str]]:
    """Rules across keys: ranks 0..N-1 once each, unique fabric IPs and SSH targets, distinct ports."""
    problems: list[tuple[str, str]] = []
    n = len(cfg.hosts)
    if n == 0:
        return [("hosts", "at least one [[hosts]] entry is required")]
    if n > MAX_HOSTS:
        return [("hosts", f"{n} hosts: the cockpit drives at most {MAX_HOSTS}")]
    seen_rank: dict[int, int] = {}
    for i, h in enumerate(cfg.hosts):
        if h.rank >= n:
            problems.append((f"hosts[{i}].rank", f"rank {h.rank} is out of range: "
                                                  f"{n} host{'s' if n > 1 else ''} need ranks 0..{n - 1}"))
        elif h.rank in seen_rank:
            problems.append((f"hosts[{i}].rank",
                             f"rank {h.rank} is used twice (also by hosts[{seen_rank[h.rank]}])"))
        else:
            seen_rank[h.rank] = i
    for missing in sorted(set(range(n)) - set(seen_rank)):
        problems.append(("hosts", f"no host has rank {missing} "
                                  f"({n} hosts need ranks 0..{n - 1}, each exactly once)"))
    ips: dict[ipaddress.IPv4Address | ipaddress.IPv6Address, int] = {}
    targets: dict[tuple[str, int | None], int] = {}
    for i, h in enumerate(cfg.hosts):
        ip = ipaddress.ip_address(h.fabric_ip)
        if ip in ips:
            problems.append((f"hosts[{i}].fabric_ip",
                             f"{h.fabric_ip!r} is also the fabric IP of rank {cfg.hosts[ips[ip]].rank}"))
        else:
            ips[ip] = i
        key = (h.ssh, h.port)
        if key in targets:
            problems.append((f"hosts[{i}].ssh", f"{h.ssh!r} is also the SSH target of rank "
                                                f"{cfg.hosts[targets[key]].rank} (one host per rank)"))
        else:
            targets[key] = i
    problems += path_problems(cfg)
    if cfg.cluster.api_port == cfg.cluster.coord_port:
        problems.append(("cluster.coord_port", f"the coordination port {cfg.cluster.coord_port} is the "
                                               "same as the API port; they must differ"))
    return problems


def _path_keys(cfg: ClusterConfig, i: int, host: HostEntry) -> list[tuple[str, str]]:
    """(key that sets it, path) of the model, Engram and cache directory of hosts[i]."""
    return [
        (f"hosts[{i}].model_path" if host.model_path else "model.path", cfg.model_path(host.rank)),
        (f"hosts[{i}].engram_path" if host.engram_path else "paths.engram", cfg.engram_path(host.rank)),
        (f"hosts[{i}].cache_path" if host.cache_path else "paths.cache", cfg.cache_path(host.rank)),
    ]


def path_problems(cfg: ClusterConfig) -> list[tuple[str, str]]:
    """Model, Engram and cache directories of one host are three separate trees: none equal to another
    or inside another (the Engram overlay would be written into the checkpoint, the cache into either)."""
    problems: list[tuple[str, str]] = []
    seen: set[tuple[str, str]] = set()
    for i, host in enumerate(cfg.hosts):
        entries = _path_keys(cfg, i, host)
        for a in range(len(entries)):
            for b in range(a + 1, len(entries)):
                (key_a, path_a), (key_b, path_b) = entries[a], entries[b]
                na, nb = normal_path(path_a), normal_path(path_b)
                if na == nb:
                    why = f"{shown(path_b)} is the same directory as {key_a} ({shown(path_a)})"
                elif nb.startswith(na + "/"):
                    why = f"{shown(path_b)} lies inside {key_a} ({shown(path_a)})"
                elif na.startswith(nb + "/"):
                    why = f"{shown(path_b)} contains {key_a} ({shown(path_a)})"
                else:
                    continue
                if (key_a, key_b) not in seen:
                    seen.add((key_a, key_b))
                    problems.append((key_b, why + "; model, Engram and cache directories must be "
                                            "separate trees"))
    return problems


# ---- errors -------------------------------------------------------------------------------------------


class ConfigError(Exception):
    """A config that cannot be used; `problems` are (key path, reason) pairs."""

    def __init__(self, path: Path | None, problems: list[tuple[str, str]], code: str = "config-invalid"):
        self.path = path
        self.problems = problems
        self.code = code  # stable error code (cockpit.errorcodes): config-invalid, config-missing, …
        super().__init__(self.render())

    def render(self) -> str:
        """One `FILE: KEY: REASON` line per problem, neutralised (a key or path may hold escapes)."""
        where = str(self.path) if self.path else "<config>"
        return "\n".join(neutralise(clip(f"{where}: {key}: {reason}" if key else f"{where}: {reason}", 2000))
                         for key, reason in self.problems)

    def as_json(self) -> dict[str, Any]:
        return {"ok": False, "path": str(self.path) if self.path else None,
                "problems": [{"key": k, "reason": r} for k, r in self.problems]}


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
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    with os.fdopen(fd, "rb") as fh:
        st = os.fstat(fh.fileno())
        if stat.S_ISDIR(st.st_mode):
            raise IsADirectoryError(str(path))
        if not stat.S_ISREG(st.st_mode):
            raise ConfigError(path, [("", f"is not a regular file (a device, FIFO or socket), not a {what}")])
        raw = fh.read(MAX_FILE_BYTES + 1)
    if len(raw) > MAX_FILE_BYTES:
        raise ConfigError(path, [("", f"is larger than {MAX_FILE_BYTES >> 20} MiB: not a {what}")])
    return raw


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


# ---- dumping ------------------------------------------------------------------------------------------

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
