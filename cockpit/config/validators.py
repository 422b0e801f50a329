"""The value rules of cluster.toml: every value that ends up on a host (paths, names, interface and HCA
names, ports, image references) is checked here, so the layers above can rely on it: no control
characters, no shell metacharacters, absolute paths. Each rule raises ValueError with a reason that
names the value; the `Annotated` types below attach them to the models' fields.
"""

from __future__ import annotations

import ipaddress
import math
import re
import unicodedata
from typing import Annotated, Any

from pydantic import AfterValidator

from cockpit import constants

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


def hca_list_rules(value: list[str]) -> list[str]:
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


def split_listen(value: str) -> tuple[str, int]:
    """`HOST:PORT` (`[V6]:PORT` for IPv6) as (host, port); ValueError with the reason when it is not."""
    host, sep, port = value.rpartition(":")
    if not sep or not host:
        raise ValueError(f"{shown(value)} is not HOST:PORT (e.g. 127.0.0.1:9337)")
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    if not port.isascii() or not port.isdigit() or not 0 < int(port) < 65536:
        raise ValueError(f"{shown(value)}: the port must be a number from 1 to 65535")
    try:
        host = str(ipaddress.ip_address(host))
    except ValueError:
        if not re.fullmatch(r"[A-Za-z0-9]([A-Za-z0-9.-]{0,252})", host):
            raise ValueError(f"{shown(value)}: {shown(host)} is not an IP address or host name") from None
    return host, int(port)


def listen_address(value: str) -> str:
    split_listen(value)
    return value


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
        raise ValueError(f"{shown(value)} is not a valid docker image reference "
                         f"(e.g. {constants.IMAGE_TAG})")
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


SSH_CIPHERS = ("aes128-gcm@openssh.com", "aes256-gcm@openssh.com", "chacha20-poly1305@openssh.com",
               "aes256-ctr", "aes192-ctr", "aes128-ctr")
"""The ciphers the cockpit offers, in its order of preference: AES-GCM first, because it costs the
cockpit's SSH client a fifth less CPU per packet than ChaCha20-Poly1305 (255-279 vs 316-321 µs per streamed
token through the tunnel, ``perf/stream.py --tunnel``); every OpenSSH since 6.5 has all six."""


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



def argv_list(value: list[str]) -> list[str]:
    """A command as an argv list: words without NUL bytes, the first one a program (never a shell line:
    no word is parsed by a shell). Empty: no command."""
    for word in value:
        if "\x00" in word:
            raise ValueError("a word holds a NUL byte")
    if value and (not value[0].strip() or value[0].startswith("-")):
        raise ValueError(f"{shown(value[0])} is not a program to run (give the program first)")
    return value


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
