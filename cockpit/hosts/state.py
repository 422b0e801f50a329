"""Connection states of a host, and the records the fleet keeps."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from enum import StrEnum

LATENCY_EVERY = 5.0
"""Seconds between two measures of a connected host's command latency (`HostStatus.latency_ms`)."""


class HostState(StrEnum):
    CONNECTING = "connecting"
    CONNECTED = "connected"
    LOST = "lost"
    UNREACHABLE = "unreachable"
    TIMEOUT = "timeout"
    KEY_UNKNOWN = "host key unknown"
    KEY_CHANGED = "HOST KEY CHANGED"
    KEY_REVOKED = "host key revoked"
    KNOWN_HOSTS_MISSING = "known_hosts missing"
    SSH_CONFIG_UNSAFE = "ssh config unsafe"
    AUTH_FAILED = "auth failed"
    CLOSED = "closed"


# The stable error code (`cockpit.errorcodes`) of every state that is neither connected nor on its way.
STATE_CODES: dict[HostState, str] = {
    HostState.LOST: "host-lost",
    HostState.UNREACHABLE: "host-unreachable",
    HostState.TIMEOUT: "host-timeout",
    HostState.KEY_UNKNOWN: "host-key-unknown",
    HostState.KEY_CHANGED: "host-key-changed",
    HostState.KEY_REVOKED: "host-key-revoked",
    HostState.KNOWN_HOSTS_MISSING: "known-hosts-missing",
    HostState.SSH_CONFIG_UNSAFE: "ssh-config-unsafe",
    HostState.AUTH_FAILED: "auth-failed",
}
# A host in one of these states is down for the cockpit: nothing it runs there is known now.
DOWN_STATES = frozenset(STATE_CODES)
# The host key (or the settings that check it) refused the connection: the operator must act.
KEY_STATES = frozenset({HostState.KEY_UNKNOWN, HostState.KEY_CHANGED, HostState.KEY_REVOKED,
                        HostState.KNOWN_HOSTS_MISSING, HostState.SSH_CONFIG_UNSAFE})


@dataclass(frozen=True, slots=True)
class HostStatus:
    rank: int
    target: str
    state: HostState = HostState.CONNECTING
    latency_ms: float | None = None
    hostname: str | None = None
    fingerprint: str | None = None
    error: str | None = None
    remedy: str | None = None
    since: float = field(default_factory=time.time)
    known_fingerprints: tuple[str, ...] = ()  # a changed key: what known_hosts holds for the host
    known_hosts: str | None = None  # the known_hosts file the host key was checked against

    @property
    def connected(self) -> bool:
        return self.state is HostState.CONNECTED

    @property
    def code(self) -> str | None:
        """The stable error code of a host that is down (None while connected or connecting)."""
        return STATE_CODES.get(self.state)

    @property
    def down(self) -> bool:
        return self.state in DOWN_STATES


@dataclass(frozen=True, slots=True)
class Result:
    """What one command on one host did."""

    rank: int
    command: str
    exit_status: int | None
    stdout: str
    stderr: str
    duration: float
    truncated: bool = False  # output beyond the cap was dropped (the text ends with a mark saying so)

    @property
    def ok(self) -> bool:
        return self.exit_status == 0


@dataclass(frozen=True, slots=True)
class CommandRecord:
    """One line of the command log: every command the cockpit ran on a host."""

    rank: int
    command: str
    started: float
    duration: float | None = None
    exit_status: int | None = None
    note: str = ""      # "timeout", "lost", "stream" (a long-lived command: recorded when it starts), …
    origin: str = ""    # who asked: a command ("preflight"), a pane ("pane:Setup"), "watcher" (`origin`)

    @property
    def done(self) -> bool:
        """Finished (or a stream, recorded once when it starts): not the record of a run just begun."""
        return self.duration is not None or self.note == "stream"


class HostUnavailable(Exception):
    """The host is not connected (or was lost while the command ran)."""

    def __init__(self, rank: int, state: HostState, detail: str = ""):
        self.rank = rank
        self.state = state
        super().__init__(f"rank {rank}: {state.value}" + (f": {detail}" if detail else ""))


class CommandTimeout(Exception):
    def __init__(self, rank: int, command: str, timeout: float):
        self.rank = rank
        super().__init__(f"rank {rank}: `{command}` did not finish within {timeout:g} s")
