"""The OpenSSH client command line of an interactive session on one host (or in its container), with the
cockpit's own settings: the same `~/.ssh/config` (`-F`), user, port, identity, timeouts and keepalive,
and host keys checked exactly as the cockpit checks them (the known_hosts files it resolved,
`StrictHostKeyChecking yes`, no key learnt from DNS, a command or the server). A ProxyJump comes from
that ssh config for both; its hop's settings were checked for safety by the policy.

Nothing here imports asyncssh at module level: the policy (which parses `~/.ssh/config` with asyncssh's
parser, as the connection does) is resolved only when a session is asked for.
"""

from __future__ import annotations

import math
import os
import shlex
import shutil
import signal
import subprocess
import threading
from collections.abc import Sequence
from dataclasses import dataclass

from cockpit.config import ClusterConfig, HostEntry, SSHSection

# The container's login: bash where the image has it, else sh.
CONTAINER_SHELL = ("sh", "-c", "command -v bash >/dev/null && exec bash || exec sh")


SSH_MISSING = ("the OpenSSH client `ssh` is not installed (Debian/Ubuntu: `apt install openssh-client`; "
               "Fedora/RHEL: `dnf install openssh-clients`)")


class ShellRefused(Exception):
    """No session: the cockpit itself would not connect to this host (the reason says why; `code` is its
    stable error code)."""

    def __init__(self, message: str, code: str):
        super().__init__(message)
        self.code = code


@dataclass(frozen=True, slots=True)
class KeyFiles:
    """Where host keys are checked: the user files and the global ones (empty: none), and the ssh config
    file read (None: none)."""

    user: tuple[str, ...]
    global_: tuple[str, ...] = ()
    ssh_config: str | None = None


def _option_path(path: str) -> str:
    """One path inside an `-o NAME=...` value: OpenSSH splits it on spaces (double quotes and backslash
    escapes group) and expands `%` tokens, so both are escaped."""
    path = path.replace("%", "%%")
    if any(c in path for c in ' \t"\\\''):
        return '"' + path.replace("\\", "\\\\").replace('"', '\\"') + '"'
    return path


def _seconds(value: float) -> str:
    """OpenSSH takes whole seconds; a fraction rounds up (0 stays 0: off)."""
    return str(math.ceil(value)) if value > 0 else "0"


def remote_line(container: str | None, command: Sequence[str], *, tty: bool) -> str | None:
    """The line the host's shell runs: `command` (quoted), or in `container` `docker exec` of it or of a
    login shell; None: the host's own login shell."""
    if container is None:
        return shlex.join(command) if command else None
    flags = "-it" if tty else "-i"
    return shlex.join(["docker", "exec", flags, container, *(command or CONTAINER_SHELL)])


def login_argv(entry: HostEntry, ssh: SSHSection, keys: KeyFiles, *, container: str | None = None,
               command: Sequence[str] = (), tty: bool = True) -> list[str]:
    """The `ssh` argv for `entry`: with `container`, into that container; with `command`, running it
    instead of a login shell; `tty` asks for a terminal (`-t`, docker `-it`), else none (`-T`, `-i`)."""
    if not keys.user:
        raise ValueError("no known_hosts file to check the host key against")
    known = " ".join(_option_path(f) for f in keys.user)
    global_known = " ".join(_option_path(f) for f in keys.global_) or "none"
    argv = ["ssh", "-F", keys.ssh_config or "none"]
    if entry.user:
        argv += ["-l", entry.user]
    if entry.port:
        argv += ["-p", str(entry.port)]
    if ssh.identity_file:  # OpenSSH expands `~` and `%` tokens in it: expanded here, `%` kept literal
        argv += ["-i", os.path.expanduser(ssh.identity_file).replace("%", "%%")]
    argv += [
        "-o", "StrictHostKeyChecking=yes",
        "-o", f"UserKnownHostsFile={known}",
        "-o", f"GlobalKnownHostsFile={global_known}",
        "-o", "KnownHostsCommand=none",
        "-o", "VerifyHostKeyDNS=no",
        "-o", "UpdateHostKeys=no",
        "-o", f"ConnectTimeout={_seconds(ssh.connect_timeout)}",
        "-o", f"ServerAliveInterval={_seconds(ssh.keepalive_interval)}",
        "-o", f"ServerAliveCountMax={ssh.keepalive_count_max}",
        "-t" if tty else "-T",
        "--", entry.ssh,
    ]
    line = remote_line(container, command, tty=tty)
    if line is not None:
        argv.append(line)
    return argv


def key_files(entry: HostEntry, ssh: SSHSection) -> KeyFiles:
    """The files the cockpit checks this host's key against (its own policy); ShellRefused when the
    cockpit would not connect (an ssh config that turns checking off, no known_hosts file)."""
    from cockpit.hosts.sshconfig import config_path, resolve
    policy = resolve(entry, ssh)
    if policy.unsafe:
        raise ShellRefused(f"rank {entry.rank}: {policy.unsafe}; the cockpit does not connect to it, so it "
                           "opens no shell there either", "ssh-config-unsafe")
    if not policy.existing:
        raise ShellRefused(f"rank {entry.rank}: no known_hosts file ({', '.join(policy.files)}) to check the "
                           f"host key against: verify the key, then `r37-cockpit hosts trust --rank "
                           f"{entry.rank} --fingerprint SHA256:…`", "known-hosts-missing")
    path = config_path()
    return KeyFiles(tuple(policy.files), tuple(f for f in policy.global_files if os.path.isfile(f)),
                    str(path) if path else None)


def shell_argv(config: ClusterConfig, rank: int, *, container: bool = False, command: Sequence[str] = (),
               tty: bool = True) -> list[str]:
    """The `ssh` argv of an interactive session on rank `rank` (KeyError: no such rank), or in its
    container (`[cluster] container_name`)."""
    entry = config.host(rank)
    return login_argv(entry, config.ssh, key_files(entry, config.ssh),
                      container=config.cluster.container_name if container else None,
                      command=command, tty=tty)


def shown(argv: Sequence[str]) -> str:
    """The argv as one line the operator can paste (what is printed and logged)."""
    return shlex.join(argv)


def ssh_client() -> str | None:
    """The OpenSSH client on PATH, or None."""
    return shutil.which("ssh")


def run_attached(argv: Sequence[str]) -> int:
    """Run `argv` on this terminal (stdio inherited) and return its exit status. Ctrl-C is the session's
    (ssh passes it on or ends), never this process's while it waits."""
    proc = subprocess.Popen(list(argv))
    main = threading.current_thread() is threading.main_thread()  # only there can a handler be set
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN) if main else None
    try:
        status = proc.wait()
    finally:
        if main:
            signal.signal(signal.SIGINT, previous)
    return 128 - status if status < 0 else status  # killed by a signal: as a shell reports it
