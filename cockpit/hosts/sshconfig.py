"""Which known_hosts files check a host's key, resolved the way the cockpit will use them, and the SSH
settings that would turn the check off (refused, never obeyed).

asyncssh reads `~/.ssh/config` and, unless it is given `known_hosts=`, takes the files from
`UserKnownHostsFile`/`GlobalKnownHostsFile` there, where `UserKnownHostsFile none` means "validate
nothing". The cockpit therefore always resolves the files itself and passes them explicitly:
`[ssh] known_hosts` if set, else what `~/.ssh/config` says for the host, else `~/.ssh/known_hosts`.
The config is parsed with asyncssh's own parser (same `Host`/`Match` rules as the connection).
"""

from __future__ import annotations

import getpass
import os
from dataclasses import dataclass
from pathlib import Path
from typing import cast

from asyncssh.config import SSHClientConfig, SSHConfig

from cockpit.config import HostEntry, SSHSection

SSH_CONFIG = "~/.ssh/config"
DEFAULT_KNOWN_HOSTS = "~/.ssh/known_hosts"
DEFAULT_GLOBAL = ("/etc/ssh/ssh_known_hosts", "/etc/ssh/ssh_known_hosts2")
UNSAFE_STRICT = frozenset({"no", "off", "accept-new"})
NULL_FILE = "/dev/null"


class _ClientConfig(SSHClientConfig):
    """asyncssh's client config parser, also keeping `StrictHostKeyChecking` (asyncssh ignores it)."""

    _handlers = {**SSHClientConfig._handlers,
                 "stricthostkeychecking": ("StrictHostKeyChecking", SSHConfig._set_string)}


@dataclass(frozen=True, slots=True)
class HostKeyPolicy:
    """How one host's key is checked: against which files, under which name, or why it cannot be."""

    lookup: str  # the name known_hosts entries are matched against (HostKeyAlias, HostName or target)
    hostname: str  # where the connection goes (HostName or target)
    port: int
    files: tuple[str, ...]  # the user files: the first one is where `hosts trust` appends
    global_files: tuple[str, ...] = ()
    source: str = "[ssh] known_hosts"  # where `files` came from
    unsafe: str | None = None  # the setting that would turn host key checking off, when there is one

    @property
    def existing(self) -> list[str]:
        """The files that exist, user files first: what the key is checked against."""
        return [f for f in (*self.files, *self.global_files) if os.path.isfile(f)]

    @property
    def write_file(self) -> str:
        return self.files[0]

    @property
    def pattern(self) -> str:
        """The host field of a known_hosts line for this host (`[host]:port` off port 22)."""
        return self.lookup if self.port == 22 else f"[{self.lookup}]:{self.port}"

    @property
    def match_port(self) -> int | None:
        return None if self.port == 22 else self.port


def _expand(path: str, tokens: dict[str, str]) -> str:
    """`~` and the OpenSSH tokens a known_hosts path may use (%d %u %h %n %p %r %%)."""
    out, i = [], 0
    while i < len(path):
        if path[i] == "%" and i + 1 < len(path):
            out.append(tokens.get(path[i + 1], path[i:i + 2]))
            i += 2
        else:
            out.append(path[i])
            i += 1
    return os.path.expanduser("".join(out))


def config_path() -> Path | None:
    """`~/.ssh/config` if readable: the file asyncssh reads by default."""
    path = Path(SSH_CONFIG).expanduser()
    return path if os.access(path, os.R_OK) else None


def load_config(host: str, user: str | None, port: int | None) -> SSHClientConfig | None:
    """The user's ssh config as it applies to `host` (None when there is none); raises ValueError/OSError
    when it cannot be read."""
    path = config_path()
    if path is None:
        return None
    cfg = _ClientConfig.load(None, [path], False, False, False, _local_user(), user or (), host, port or ())
    return cast(SSHClientConfig, cfg)  # load() returns cls(...): asyncssh types it as the base class


def _local_user() -> str:
    try:
        return getpass.getuser()
    except (KeyError, OSError):
        return str(os.geteuid())


def unsafe_setting(cfg: SSHClientConfig | None, host: str) -> str | None:
    """The setting of `cfg` that would turn host key checking off for `host`, or None."""
    if cfg is None:
        return None
    where = f"{SSH_CONFIG} for {host}"
    user_files = cfg.get("UserKnownHostsFile")
    if user_files == []:
        return f"`UserKnownHostsFile none` in {where} would skip host key checking"
    if isinstance(user_files, list) and any(os.path.realpath(os.path.expanduser(f)) == NULL_FILE
                                            for f in user_files):
        return f"`UserKnownHostsFile {NULL_FILE}` in {where} would accept any host key"
    strict = cfg.get("StrictHostKeyChecking")
    if isinstance(strict, str) and strict.lower() in UNSAFE_STRICT:
        return f"`StrictHostKeyChecking {strict}` in {where} would accept unknown host keys"
    return None


def _jump_hosts(cfg: SSHClientConfig | None) -> list[tuple[str | None, str, int | None]]:
    """(user, host, port) of each `ProxyJump` hop (their keys are checked by their own settings)."""
    jump = cfg.get("ProxyJump") if cfg else None
    if not isinstance(jump, str) or jump.lower() == "none":
        return []
    hops = []
    for hop in jump.split(","):
        hop = hop.strip().removeprefix("ssh://")
        user, _, rest = hop.rpartition("@")
        host, port = rest, None
        if rest.count(":") == 1:
            host, _, p = rest.partition(":")
            port = int(p) if p.isdigit() else None
        hops.append((user or None, host, port))
    return hops


def resolve(entry: HostEntry, ssh: SSHSection) -> HostKeyPolicy:
    """The known_hosts files and lookup name for one host, or the reason they cannot be trusted."""
    host, port = entry.ssh, entry.port
    try:
        cfg = load_config(host, entry.user, port)
    except (OSError, ValueError) as exc:
        return HostKeyPolicy(host, host, port or 22, (_expand(DEFAULT_KNOWN_HOSTS, {}),),
                             unsafe=f"cannot read {SSH_CONFIG} to make sure it keeps host key checking on: "
                                    f"{exc}")
    hostname = str(cfg.get("Hostname", host)) if cfg else host
    alias = cfg.get("HostKeyAlias") if cfg else None
    cfg_port = cfg.get("Port") if cfg else None  # asyncssh parses Port to an int
    real_port = port or (cfg_port if isinstance(cfg_port, int) else None) or 22
    tokens = {"d": os.path.expanduser("~"), "u": _local_user(), "h": hostname, "n": host,
              "p": str(real_port), "r": str(entry.user or (cfg.get("User") if cfg else "") or ""), "%": "%"}
    lookup = str(alias) if alias else hostname
    unsafe = unsafe_setting(cfg, host)
    for juser, jhost, jport in _jump_hosts(cfg):
        if unsafe:
            break
        try:
            unsafe = unsafe_setting(load_config(jhost, juser, jport), f"{jhost} (ProxyJump of {host})")
        except (OSError, ValueError) as exc:
            unsafe = f"cannot read {SSH_CONFIG} for the ProxyJump host {jhost}: {exc}"
    if ssh.known_hosts:
        files: tuple[str, ...] = (os.path.expanduser(ssh.known_hosts),)
        if not unsafe and os.path.realpath(files[0]) == NULL_FILE:
            unsafe = f"[ssh] known_hosts = {NULL_FILE!r} would accept no host key knowingly"
        return HostKeyPolicy(lookup, hostname, real_port, files, unsafe=unsafe)
    user_files = cfg.get("UserKnownHostsFile") if cfg else None
    global_files = cfg.get("GlobalKnownHostsFile") if cfg else None
    if isinstance(user_files, list) and user_files:
        files, source = tuple(_expand(f, tokens) for f in user_files), f"UserKnownHostsFile in {SSH_CONFIG}"
    else:
        files, source = (_expand(DEFAULT_KNOWN_HOSTS, tokens),), "default"
    glob = (tuple(_expand(f, tokens) for f in global_files) if isinstance(global_files, list)
            else DEFAULT_GLOBAL)
    return HostKeyPolicy(lookup, hostname, real_port, files, glob, source, unsafe)
