"""Per-rank followers of `docker logs -f -t`: `follow(host, ...)` runs
`docker logs -t [-f] [--since T] [--tail N] CONTAINER` on one long-lived SSH channel and yields
`LogLine`s (RFC3339Nano prefix parsed to ns, control characters neutralised) and `FollowEvent`s
(following, lost, resumed, ended, error). After a lost host it waits for the reconnect and resumes with
`--since` the last timestamp seen, dropping the lines it already yielded.
"""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from typing import Protocol

from cockpit.constants import CONTAINER_NAME
from cockpit.hosts.shell import ShellCommand, command
from cockpit.hosts.state import HostUnavailable
from cockpit.safetext import neutralise
from cockpit.telemetry.logline import LogLine, format_timestamp, parse_stamped

NO_CONTAINER = "No such container"
RETRY_START = 0.5   # s before following again after a lost host, doubling up to RETRY_MAX
RETRY_MAX = 5.0


@dataclass(frozen=True, slots=True)
class FollowEvent:
    """A change in one rank's follower: following, lost, resumed, waiting, ended, error."""

    rank: int
    state: str
    detail: str = ""
    at: float = 0.0


class Streamer(Protocol):
    """What `follow` needs of a host (`cockpit.hosts.Host` has it)."""

    rank: int

    def stream(self, cmd: ShellCommand) -> AsyncGenerator[str, None]: ...

    async def wait_connected(self, timeout: float | None = None) -> bool: ...


def logs_command(container: str = CONTAINER_NAME, *, follow: bool = True, since: str | None = None,
                 tail: int | None = None) -> ShellCommand:
    """`docker logs -t [-f] [--since T] [--tail N] CONTAINER 2>&1` (both streams on one channel)."""
    argv = ["docker", "logs", "-t"]
    if follow:
        argv.append("-f")
    if since:
        argv += ["--since", since]
    if tail is not None:
        argv += ["--tail", str(int(tail))]
    argv.append(container)
    return command(argv, merge_stderr=True)


class ResumePoint:
    """The last timestamp yielded and the texts seen at it, to drop what `--since` sends again."""

    __slots__ = ("texts", "ts")

    def __init__(self) -> None:
        self.ts = 0
        self.texts: Counter[str] = Counter()

    def note(self, ts: int, text: str) -> None:
        if ts != self.ts:
            self.ts = ts
            self.texts.clear()
        self.texts[text] += 1

    def since(self) -> str | None:
        return format_timestamp(self.ts) if self.ts else None

    def filter(self) -> _Replay:
        return _Replay(self.ts, Counter(self.texts))


class _Replay:
    """Drops, after a resume, lines older than the resume point and those already seen at it."""

    __slots__ = ("done", "seen", "ts")

    def __init__(self, ts: int, seen: Counter[str]):
        self.ts, self.seen, self.done = ts, seen, ts == 0

    def duplicate(self, ts: int, text: str) -> bool:
        if self.done:
            return False
        if ts < self.ts:
            return True
        if ts == self.ts and self.seen[text] > 0:
            self.seen[text] -= 1
            return True
        self.done = ts > self.ts
        return False


async def follow(host: Streamer, container: str = CONTAINER_NAME, *, follow: bool = True,
                 since: str | None = None, tail: int | None = None, resume: bool = True,
                 rejoin: float | Callable[[], Awaitable[object]] | None = None,
                 reconnect_timeout: float | None = None,
                 point: ResumePoint | None = None) -> AsyncIterator[LogLine | FollowEvent]:
    """One rank's container log as `LogLine`s, with `FollowEvent`s when its state changes.

    Ends when the container stops (`ended`) or does not exist (`error`), unless `rejoin` is set: then
    it looks again for a (re)started container, continuing after the last line: every `rejoin` seconds,
    or each time the awaitable that `rejoin()` returns is done (a caller that knows when a container
    came or changed, from the live model, asks docker only then).
    A lost host yields `lost`, then (with `resume`) waits for the reconnect and yields `resumed`.
    A caller that follows again later passes its own `point`: the new call continues after the last
    line the old one yielded, with none repeated.
    """
    rank = host.rank
    point = ResumePoint() if point is None else point
    first = point.ts == 0
    announced = ""
    retry_delay = RETRY_START
    while True:
        cmd = logs_command(container, follow=follow,
                           since=point.since() or since, tail=tail if first else None)
        replay = point.filter()
        got_lines = False
        problem = ""
        try:
            stream = host.stream(cmd)
            try:
                async for raw in stream:
                    parsed = parse_stamped(raw)
                    if parsed is None:
                        problem = problem or neutralise(raw).strip()
                        continue
                    ts, text = parsed
                    if replay.duplicate(ts, text):
                        continue
                    if not got_lines and announced not in ("following", "resumed"):
                        if announced == "lost":
                            announced = "resumed"
                            yield FollowEvent(rank, "resumed", point.since() or "", time.time())
                        else:
                            announced = "following"
                            yield FollowEvent(rank, "following", container, time.time())
                    retry_delay = RETRY_START
                    got_lines = True
                    point.note(ts, text)
                    yield LogLine(ts, rank, neutralise(text))
            finally:
                await stream.aclose()
        except HostUnavailable as exc:
            was_following = announced in ("following", "resumed")
            if announced not in ("lost", "waiting:host"):
                announced = "lost" if was_following else "waiting:host"
                yield FollowEvent(rank, "lost" if was_following else "waiting",
                                  str(exc) if was_following else "host not connected", time.time())
            if not resume:
                return
            # the host may not have noticed the loss yet (its keepalive is slower than a dead channel):
            # back off before asking again, so a retry never spins
            await asyncio.sleep(retry_delay)
            retry_delay = min(retry_delay * 2, RETRY_MAX)
            if not await host.wait_connected(reconnect_timeout):
                yield FollowEvent(rank, "error", "host did not come back", time.time())
                return
            first = first and point.ts == 0
            continue
        first = False
        if (problem and not got_lines and point.ts == 0) or NO_CONTAINER in problem:
            state, detail = "error", problem
        else:
            state, detail = "ended", "container stopped" if follow else "end of log"
        if rejoin is None or not follow:
            yield FollowEvent(rank, state, detail, time.time())
            return
        if announced != ("waiting:" + detail):
            announced = "waiting:" + detail
            yield FollowEvent(rank, "waiting", detail, time.time())
        await (asyncio.sleep(rejoin) if isinstance(rejoin, (int, float)) else rejoin())
