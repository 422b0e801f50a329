"""The fleet: every host of the cluster, connected in parallel, with a bounded command log."""

from __future__ import annotations

import asyncio
import contextlib
from collections import deque
from collections.abc import Awaitable, Callable, Iterable

from cockpit.config import ClusterConfig
from cockpit.hosts.host import Host
from cockpit.hosts.shell import Cmd
from cockpit.hosts.state import CommandRecord, CommandTimeout, HostStatus, HostUnavailable, Result

COMMAND_LOG_CAP = 2000

# Called with every Fleet made in this process (the session's command log file listens to each).
_FLEET_WATCHERS: list[Callable[[Fleet], None]] = []


def watch_fleets(watcher: Callable[[Fleet], None]) -> Callable[[], None]:
    """Call `watcher` with every Fleet made from now on; returns the function that stops it."""
    _FLEET_WATCHERS.append(watcher)

    def stop() -> None:
        if watcher in _FLEET_WATCHERS:
            _FLEET_WATCHERS.remove(watcher)

    return stop


class Fleet:
    """One supervised connection per host; status changes go to every listener."""

    def __init__(self, config: ClusterConfig):
        self.config = config
        self.command_log: deque[CommandRecord] = deque(maxlen=COMMAND_LOG_CAP)
        self._listeners: list[Callable[[HostStatus], None]] = []
        self._command_listeners: list[Callable[[CommandRecord], None]] = []
        self.hosts: dict[int, Host] = {
            h.rank: Host(h, config.ssh, self._status_changed, self._recorded)
            for h in config.by_rank()
        }
        for watcher in list(_FLEET_WATCHERS):
            watcher(self)

    def subscribe(self, listener: Callable[[HostStatus], None]) -> None:
        self._listeners.append(listener)

    def on_command(self, listener: Callable[[CommandRecord], None]) -> Callable[[], None]:
        """Call `listener` with every command record (a run's start and its end, a stream's start);
        returns the function that stops it. A listener that raises never fails the command it records."""
        self._command_listeners.append(listener)

        def stop() -> None:
            if listener in self._command_listeners:
                self._command_listeners.remove(listener)

        return stop

    def _recorded(self, rec: CommandRecord) -> None:
        self.command_log.append(rec)
        for listener in list(self._command_listeners):
            with contextlib.suppress(Exception):
                listener(rec)

    def record_external(self, rank: int, line: str, started: float, duration: float | None,
                        status: int | None, *, note: str, origin: str) -> None:
        """Log a session the cockpit ran on a host outside its own connections (an interactive `ssh`):
        in the command log and to every command listener, like the commands it runs itself (through
        the host's own recording)."""
        self.hosts[rank]._record(CommandRecord(rank, line, started, duration, status, note=note,
                                               origin=origin))

    def _status_changed(self, status: HostStatus) -> None:
        for listener in list(self._listeners):
            listener(status)

    def __getitem__(self, rank: int) -> Host:
        return self.hosts[rank]

    @property
    def statuses(self) -> list[HostStatus]:
        return [h.status for h in self.hosts.values()]

    def start(self) -> None:
        for host in self.hosts.values():
            host.start()

    async def wait_connected(self, timeout: float) -> bool:
        results = await asyncio.gather(*(h.wait_connected(timeout) for h in self.hosts.values()))
        return all(results)

    async def close(self) -> None:
        await asyncio.gather(*(h.close() for h in self.hosts.values()))

    async def __aenter__(self) -> Fleet:
        self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def run_all(self, cmd: Cmd | Callable[[Host], Cmd], *, ranks: Iterable[int] | None = None,
                      timeout: float = 60.0) -> dict[int, Result | Exception]:
        """Run on several hosts at once; a host that is down or slow yields its exception, not a delay."""
        chosen = [self.hosts[r] for r in (ranks if ranks is not None else self.hosts)]

        async def one(host: Host) -> Result | Exception:
            try:
                return await host.run(cmd(host) if callable(cmd) else cmd, timeout=timeout)
            except (HostUnavailable, CommandTimeout) as exc:
                return exc

        results = await asyncio.gather(*(one(h) for h in chosen))
        return {h.rank: r for h, r in zip(chosen, results, strict=True)}

    async def each(self, fn: Callable[[Host], Awaitable[object]]) -> list[object]:
        return await asyncio.gather(*(fn(h) for h in self.hosts.values()), return_exceptions=True)
