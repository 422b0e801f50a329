"""`[alerts] command`: an argv run on the admin box with one alert as JSON on stdin, on every alert raised
or cleared.

`AlertNotifier.observe(alerts)` compares the active alerts with the last set it saw and queues one event
per alert raised or cleared; it never blocks and never waits for a command. One task delivers the queue in
order: at most `max_per_minute` commands start in any 60 s (the rest wait in the queue), the queue holds
at most `queue` events (a flood drops the oldest; the next event delivered says how many in `dropped`),
each command gets `timeout_s` and is then killed with its whole process group. The command's environment
holds only PATH, HOME, LANG, LC_ALL and TZ (no API key or token of the cockpit's environment), and every
text field is passed through `cockpit.redact.scrub_secrets`. Its exit status and stderr are kept for the
last few runs (`history`); a failing command never fails the cockpit.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import time
from collections import deque
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

from cockpit.config.models import AlertsSection
from cockpit.redact import scrub_secrets
from cockpit.telemetry.cluster_stats import Alert

KEPT_ENV = ("PATH", "HOME", "LANG", "LC_ALL", "TZ")
STDERR_KEEP = 2000      # bytes of a command's stderr kept in its record
HISTORY = 20            # runs remembered


@dataclass(frozen=True)
class Delivery:
    """One run of the alert command."""

    event: str               # raised | cleared
    kind: str
    rank: int | None
    started: float
    duration: float
    exit_status: int | None  # None: killed at its timeout, or it could not start
    error: str = ""


def event_payload(event: str, alert: Alert, cluster: str, at: float, dropped: int) -> dict[str, object]:
    return {"event": event, "cluster": cluster, "kind": alert.kind, "rank": alert.rank,
            "severity": alert.severity, "message": scrub_secrets(alert.message),
            "remedy": scrub_secrets(alert.remedy), "since": alert.since, "at": at, "dropped": dropped}


def clean_env(environ: dict[str, str] | None = None) -> dict[str, str]:
    src = os.environ if environ is None else environ
    return {k: src[k] for k in KEPT_ENV if k in src}


class AlertNotifier:
    """Turns alert changes into runs of `argv` (see the module doc)."""

    def __init__(self, argv: Sequence[str], cluster: str, *, timeout_s: float = 10.0,
                 max_per_minute: int = 12, queue: int = 100,
                 clock: Callable[[], float] = time.time) -> None:
        if not argv:
            raise ValueError("empty alert command")
        self.argv = list(argv)
        self.cluster = cluster
        self.timeout_s = timeout_s
        self.max_per_minute = max_per_minute
        self.clock = clock
        self._queue: deque[dict[str, object]] = deque(maxlen=queue)
        self._known: dict[tuple[str, int | None], Alert] = {}
        self._wake = asyncio.Event()
        self._starts: deque[float] = deque()
        self.dropped = 0           # events dropped since the last delivery
        self.dropped_total = 0
        self.history: deque[Delivery] = deque(maxlen=HISTORY)
        self._task: asyncio.Task[None] | None = None

    # ---- the producer side: never blocks ----------------------------------------------------------------

    def observe(self, alerts: Iterable[Alert]) -> int:
        """Queue an event for every alert raised or cleared since the last call; returns how many."""
        now = self.clock()
        current = {a.key: a for a in alerts}
        events = [("raised", a) for k, a in current.items() if k not in self._known]
        events += [("cleared", a) for k, a in self._known.items() if k not in current]
        self._known = current
        for name, alert in events:
            if len(self._queue) == self._queue.maxlen:
                self.dropped += 1
                self.dropped_total += 1
            self._queue.append(event_payload(name, alert, self.cluster, now, 0))
        if events:
            self._wake.set()
        return len(events)

    @property
    def pending(self) -> int:
        return len(self._queue)

    # ---- the delivering task ----------------------------------------------------------------------------

    def start(self) -> None:
        if self._task is None:
            self._task = asyncio.create_task(self._deliver_loop(), name="alert-command")

    async def close(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._task
            self._task = None

    async def drain(self, timeout: float) -> bool:
        """Wait until the queue is empty and no command runs (False: timed out)."""
        deadline = time.monotonic() + timeout
        while self._queue or self._running:
            if time.monotonic() >= deadline:
                return False
            await asyncio.sleep(0.05)
        return True

    _running = False

    async def _deliver_loop(self) -> None:
        while True:
            if not self._queue:
                self._wake.clear()
                await self._wake.wait()
                continue
            await self._wait_for_budget()
            payload = self._queue.popleft()
            payload["dropped"], self.dropped = self.dropped, 0
            self._running = True
            try:
                self.history.append(await self._run(payload))
            finally:
                self._running = False

    async def _wait_for_budget(self) -> None:
        while True:
            now = time.monotonic()
            while self._starts and now - self._starts[0] >= 60.0:
                self._starts.popleft()
            if len(self._starts) < self.max_per_minute:
                self._starts.append(now)
                return
            await asyncio.sleep(60.0 - (now - self._starts[0]) + 0.01)

    async def _run(self, payload: dict[str, object]) -> Delivery:
        started, t0 = time.time(), time.monotonic()
        kind, rank, event = str(payload["kind"]), payload["rank"], str(payload["event"])
        rank_i = rank if isinstance(rank, int) else None
        data = (json.dumps(payload) + "\n").encode()
        try:
            proc = await asyncio.create_subprocess_exec(
                *self.argv, stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.DEVNULL,
                stderr=asyncio.subprocess.PIPE, env=clean_env(), start_new_session=True)
        except OSError as exc:
            return Delivery(event, kind, rank_i, started, time.monotonic() - t0, None,
                            f"cannot start {self.argv[0]}: {exc.strerror or exc}")
        try:
            _, err = await asyncio.wait_for(proc.communicate(data), self.timeout_s)
        except TimeoutError:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(proc.pid, signal.SIGKILL)
            with contextlib.suppress(Exception):
                await asyncio.wait_for(proc.wait(), 5)
            return Delivery(event, kind, rank_i, started, time.monotonic() - t0, None,
                            f"killed after its {self.timeout_s:g} s timeout")
        except (BrokenPipeError, ConnectionResetError):
            err = b""
            await proc.wait()
        text = err[:STDERR_KEEP].decode("utf-8", "replace").strip()
        return Delivery(event, kind, rank_i, started, time.monotonic() - t0, proc.returncode,
                        text if proc.returncode else "")


def notifier_for(cfg: AlertsSection, cluster: str) -> AlertNotifier | None:
    """The notifier of `[alerts]` (None when no command is set)."""
    if not cfg.command:
        return None
    return AlertNotifier(cfg.command, cluster, timeout_s=cfg.timeout_s, max_per_minute=cfg.max_per_minute,
                         queue=cfg.queue)
