"""Host keys against known_hosts: read a server's key, tell unknown from changed from revoked, and add
one key the operator verified (appended, never rewritten; never fetched and trusted unseen)."""

from __future__ import annotations

import asyncio
import base64
import os
import socket
from dataclasses import dataclass
from enum import StrEnum

import asyncssh
from asyncssh.known_hosts import SSHKnownHosts, import_known_hosts

from cockpit.files import NotReadable, read_bounded
from cockpit.hosts.sshconfig import HostKeyPolicy


class KeyVerdict(StrEnum):
    TRUSTED = "trusted"
    UNKNOWN = "unknown"  # no entry for the host
    CHANGED = "changed"  # entries for the host, none of them this key: possible attack
    REVOKED = "revoked"  # this key is marked @revoked


@dataclass(frozen=True, slots=True)
class KeyCheck:
    verdict: KeyVerdict
    fingerprint: str  # SHA256 of the key the host offers
    known: tuple[str, ...] = ()  # SHA256 of the keys known_hosts holds for the host


def fingerprint(key: asyncssh.SSHKey) -> str:
    return key.get_fingerprint("sha256")


KNOWN_HOSTS_MAX = 16 << 20     # bytes one known_hosts file may have


def load(files: list[str]) -> SSHKnownHosts:
    """The entries of `files`, each read through the bounded reader: a regular file of at most 16 MiB (a FIFO
    never hangs the connect, a link to /dev/zero never fills memory). Raises OSError/ValueError when one
    cannot be read (NotReadable is given as a ValueError with the file's name and the reason)."""
    texts = []
    for path in files:
        try:
            texts.append(read_bounded(path, KNOWN_HOSTS_MAX).decode("utf-8", "replace"))
        except NotReadable as exc:
            raise ValueError(str(exc)) from None
    return import_known_hosts("\n".join(texts)) if texts else SSHKnownHosts()


async def peer_address(host: str, port: int) -> str:
    """The address `host` resolves to (known_hosts may name the host by address); '' when unknown."""
    try:
        infos = await asyncio.get_running_loop().getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except OSError:
        return ""
    return str(infos[0][4][0]) if infos else ""


def check(known: SSHKnownHosts, policy: HostKeyPolicy, addr: str, key: asyncssh.SSHKey) -> KeyCheck:
    """What known_hosts says about the key `key` offered for the host of `policy`."""
    trusted, ca_keys, revoked, *_ = known.match(policy.lookup, addr, policy.match_port)
    if policy.match_port is not None:
        # `match` retries without the port when no key matched with it, and then drops the revocations
        # that did match with it (`[host]:port` lines): read those too
        revoked = [*revoked, *known._match(policy.lookup, addr, policy.match_port)[2]]
    fp = fingerprint(key)
    if any(k.public_data == key.public_data for k in revoked):
        return KeyCheck(KeyVerdict.REVOKED, fp)
    if any(k.public_data == key.public_data for k in trusted):
        return KeyCheck(KeyVerdict.TRUSTED, fp)
    if trusted or ca_keys:
        known_fps = dict.fromkeys(fingerprint(k) for k in (*trusted, *ca_keys))  # host and addr: twice
        return KeyCheck(KeyVerdict.CHANGED, fp, tuple(known_fps))
    return KeyCheck(KeyVerdict.UNKNOWN, fp)


def trusted_algs(known: SSHKnownHosts, policy: HostKeyPolicy, addr: str) -> list[str]:
    """The key types known_hosts holds for the host: what the connection would ask the server for."""
    trusted, *_ = known.match(policy.lookup, addr, policy.match_port)
    algs: list[str] = []
    for key in trusted:
        algs += [a.decode() for a in key.sig_algorithms if a.decode() not in algs]
    return algs


async def server_key(policy: HostKeyPolicy, host: str, port: int | None, timeout: float,
                     algs: list[str] | None = None) -> asyncssh.SSHKey | None:
    """The host key `host` offers in the SSH handshake, read without trusting or authenticating
    (preferring the key types in `algs`, as the connection itself does); None if it cannot be read."""
    for choice in ([algs, None] if algs else [None]):
        try:
            key = await asyncio.wait_for(
                asyncssh.get_server_host_key(host, port or (), server_host_key_algs=choice or ()), timeout)
        except (OSError, TimeoutError, asyncssh.Error, ValueError):
            continue
        if key is not None:
            return key
    return None


def entry_line(policy: HostKeyPolicy, key: asyncssh.SSHKey) -> str:
    """The known_hosts line trusting `key` for the host of `policy` (no comment)."""
    data = base64.b64encode(key.public_data).decode()
    return f"{policy.pattern} {key.algorithm.decode()} {data}"


def append_line(path: str, line: str) -> None:
    """Append one line to the known_hosts file `path` (created 0600, its directory 0700, if missing);
    the existing lines are never rewritten."""
    parent = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(parent):
        os.makedirs(parent, mode=0o700)
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    try:
        size = os.fstat(fd).st_size
        prefix = ""
        if size:
            with open(path, "rb") as f:
                f.seek(size - 1)
                prefix = "" if f.read(1) == b"\n" else "\n"
        os.write(fd, (prefix + line.rstrip("\n") + "\n").encode())
    finally:
        os.close(fd)


class TrustRefused(Exception):
    """`hosts trust` will not add the key; `code` is its stable error code."""

    def __init__(self, message: str, code: str, remedy: str | None = None):
        super().__init__(message)
        self.code = code
        self.remedy = remedy


@dataclass(frozen=True, slots=True)
class TrustPlan:
    """The one line `hosts trust` would append, and where."""

    file: str
    line: str
    fingerprint: str
    creates: bool  # the file does not exist yet


def same_fingerprint(a: str, b: str) -> bool:
    def norm(fp: str) -> str:
        fp = fp.strip()
        return (fp if fp.startswith("SHA256:") else "SHA256:" + fp).rstrip("=")
    return norm(a) == norm(b)


async def plan_trust(policy: HostKeyPolicy, host: str, port: int | None, given: str,
                     timeout: float) -> TrustPlan | None:
    """The line trusting the key `host` offers, if its fingerprint is `given` and known_hosts holds
    neither another key for it nor a revocation; None when it is trusted already. Raises TrustRefused."""
    if policy.unsafe:
        raise TrustRefused(policy.unsafe, "ssh-config-unsafe")
    try:
        known = load(policy.existing)
    except (OSError, ValueError) as exc:
        raise TrustRefused(f"cannot read known_hosts: {exc}", "known-hosts-missing") from None
    addr = await peer_address(policy.hostname, policy.port)
    key = await server_key(policy, host, port, timeout, trusted_algs(known, policy, addr))
    if key is None:
        raise TrustRefused(f"could not read the host key of {policy.hostname}:{policy.port} "
                           f"within {timeout:g} s", "host-unreachable")
    found = check(known, policy, addr, key)
    if not same_fingerprint(found.fingerprint, given):
        raise TrustRefused(f"the host offers {found.fingerprint}, not {given}: nothing was written",
                           "fingerprint-mismatch",
                           "check the fingerprint with the host's administrator (on the host: "
                           "`ssh-keygen -lf /etc/ssh/ssh_host_ed25519_key.pub`); a different key may mean "
                           "someone is in the way")
    files = " ".join(policy.existing) or policy.write_file
    if found.verdict is KeyVerdict.CHANGED:
        raise TrustRefused(f"known_hosts ({files}) holds another key for {policy.pattern} "
                           f"({', '.join(found.known)}): refusing to add a second one",
                           "host-key-changed",
                           f"if the administrator confirms the key changed, remove the old line first: "
                           f"`ssh-keygen -R '{policy.pattern}' -f {policy.write_file}`")
    if found.verdict is KeyVerdict.REVOKED:
        raise TrustRefused(f"{found.fingerprint} is marked @revoked in known_hosts ({files})",
                           "host-key-revoked",
                           "the key was revoked on purpose: ask the host's administrator for its new key")
    if found.verdict is KeyVerdict.TRUSTED:
        return None
    return TrustPlan(policy.write_file, entry_line(policy, key), found.fingerprint,
                     not os.path.exists(policy.write_file))
