"""Connection states of a host, and the records the fleet keeps."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from enum import StrEnum


class HostState(StrEnum):
    CONNECTING = "connecting"
    CONNECTED = "connected"
    LOST = "lost"
    UNREACHABLE = "unreachable"
    KEY_REFUSED = "host key not trusted"
    AUTH_FAILED = "auth failed"
    CLOSED = "closed"


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

    @property
    def connected(self) -> bool:
        return self.state is HostState.CONNECTED


@dataclass(frozen=True, slots=True)
class Result:
    """What one command on one host did."""

    rank: int
    command: str
    exit_status: int | None
    stdout: str
    stderr: str
    duration: float

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
    note: str = ""


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
