"""Rendezvous of the ranks over TCP: rank 0 listens on --master-addr:--master-port, workers connect.

Line protocol, one JSON object per line:

    worker -> head   {"op": "hello", "rank": R, "host": NAME}      first line on a connection
    head -> worker   {"op": "welcome", "world_size": W}             once all nnodes-1 workers said hello
    worker -> head   {"op": "ready"}                                 the worker finished graph capture
    worker -> head   {"op": "fail", "error": TEXT}                   the worker is about to exit on an error
    worker -> head   {"op": "hb"}                                    heartbeat, every second
    head -> worker   {"op": "hb"}                                    heartbeat, every second after welcome
    head -> worker   {"op": "tick", "tokens": N, "busy": F}          while serving, every 0.5 s: tokens
                                                                     processed since the last tick, GPU load;
                                                                     "idle": R added under tp-deadlock (the
                                                                     rank that never enters the collective)
A connection that closes, or stays silent for HEARTBEAT_TIMEOUT_S, means the peer died. A hello that
arrives after the head finished its init is held open and never answered (the relaunch race of the
recipe: a new worker joining an old head hangs).

`close()` on either side ends every connection and waits for its tasks, so a rank that shuts down
(SIGTERM) leaves no task for the event loop to cancel at exit: the workers see the head's connections
close, the way a real head's TCPStore goes away.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from collections.abc import Callable
from typing import Any

HEARTBEAT_S = 1.0
HEARTBEAT_TIMEOUT_S = 10.0
CLOSE_TIMEOUT_S = 2.0  # how long close() waits for connection handlers that saw their socket close


async def _send(writer: asyncio.StreamWriter, obj: dict[str, Any]) -> None:
    writer.write((json.dumps(obj) + "\n").encode())
    await writer.drain()


async def _recv(reader: asyncio.StreamReader) -> dict[str, Any] | None:
    line = await reader.readline()
    if not line:
        return None
    try:
        obj = json.loads(line)
    except ValueError:
        return {"op": "garbage"}
    return obj if isinstance(obj, dict) else {"op": "garbage"}


class Head:
    """Rank 0's side: accepts workers, tracks readiness, reports deaths on `failure`."""

    def __init__(self, nnodes: int, on_event: Callable[[str, int, str], None]) -> None:
        self.nnodes = nnodes
        self.on_event = on_event  # (kind, rank, text): joined / failed / died / late
        self.writers: dict[int, asyncio.StreamWriter] = {}
        self.ready: set[int] = set()
        self.errors: dict[int, str] = {}
        self.all_joined = asyncio.Event()
        self.all_ready = asyncio.Event()
        self.failure: asyncio.Future[tuple[int, str]] = asyncio.get_running_loop().create_future()
        self.welcomed = False
        self.closing = False
        self.server: asyncio.Server | None = None
        self._last_seen: dict[int, float] = {}
        self._tasks: list[asyncio.Task[None]] = []
        self._conns: dict[asyncio.Task[None], asyncio.StreamWriter] = {}  # every open connection

    async def start(self, addr: str, port: int) -> None:
        self.server = await asyncio.start_server(self._handle, addr, port, reuse_address=True)
        self._tasks.append(asyncio.create_task(self._watchdog()))

    def _fail(self, rank: int, text: str) -> None:
        if not self.failure.done() and not self.closing:
            self.failure.set_result((rank, text))

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        rank = -1
        task = asyncio.current_task()
        assert task is not None
        self._conns[task] = writer
        try:
            hello = await asyncio.wait_for(_recv(reader), 30)
            if not hello or hello.get("op") != "hello":
                return
            rank = int(hello.get("rank", -1))
            if self.welcomed or rank in self.writers or not 0 < rank < self.nnodes:
                self.on_event("late", rank, str(hello.get("host", "")))
                with contextlib.suppress(Exception):
                    while await reader.read(4096):
                        pass
                return
            self.writers[rank] = writer
            self._last_seen[rank] = time.monotonic()
            self.on_event("joined", rank, str(hello.get("host", "")))
            if len(self.writers) == self.nnodes - 1:
                self.all_joined.set()
            while True:
                msg = await _recv(reader)
                if msg is None:
                    break
                self._last_seen[rank] = time.monotonic()
                op = msg.get("op")
                if op == "ready":
                    self.ready.add(rank)
                    if len(self.ready) == self.nnodes - 1:
                        self.all_ready.set()
                elif op == "fail":
                    self.errors[rank] = str(msg.get("error", ""))
            self._fail(rank, self.errors.get(rank, "connection closed"))
        except (TimeoutError, ConnectionError, OSError, ValueError):
            if rank in self.writers:
                self._fail(rank, self.errors.get(rank, "connection reset"))
        except asyncio.CancelledError:
            # Only the loop's teardown cancels a handler (close() ends them by closing their sockets).
            # Python 3.11's start_server callback reports a cancelled handler with a CancelledError
            # traceback: end normally instead.
            pass
        finally:
            self._conns.pop(task, None)
            with contextlib.suppress(Exception):
                writer.close()

    async def _watchdog(self) -> None:
        while True:
            await asyncio.sleep(HEARTBEAT_S)
            if self.welcomed:
                for w in list(self.writers.values()):
                    with contextlib.suppress(ConnectionError, OSError, RuntimeError):
                        w.write(b'{"op": "hb"}\n')
            now = time.monotonic()
            for rank, seen in list(self._last_seen.items()):
                if now - seen > HEARTBEAT_TIMEOUT_S:
                    self._fail(rank, f"no heartbeat for {HEARTBEAT_TIMEOUT_S:.0f} s")

    async def welcome(self, world_size: int) -> None:
        self.welcomed = True
        for w in list(self.writers.values()):
            with contextlib.suppress(ConnectionError, OSError):
                await _send(w, {"op": "welcome", "world_size": world_size})

    def tick(self, tokens: int, busy: float, idle: int | None = None) -> None:
        msg = {"op": "tick", "tokens": tokens, "busy": round(busy, 3)}
        if idle is not None:
            msg["idle"] = idle
        for w in list(self.writers.values()):
            with contextlib.suppress(ConnectionError, OSError, RuntimeError):
                w.write((json.dumps(msg) + "\n").encode())

    async def close(self) -> None:
        """Stop listening, close every connection (joined, late or still saying hello) and wait for
        their handlers, which end on the closed socket."""
        self.closing = True
        for t in self._tasks:
            t.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        if self.server is not None:
            self.server.close()
        for w in list(self._conns.values()):
            with contextlib.suppress(Exception):
                w.close()
        if self._conns:
            await asyncio.wait(list(self._conns), timeout=CLOSE_TIMEOUT_S)


class WorkerLink:
    """A worker's connection to the head."""

    def __init__(self, rank: int, host: str) -> None:
        self.rank = rank
        self.host = host
        self.reader: asyncio.StreamReader | None = None
        self.writer: asyncio.StreamWriter | None = None
        self.lost = asyncio.Event()
        self.world_size = 0
        self.on_tick: Callable[[int, float, int | None], None] = lambda _t, _b, _i: None
        self._tasks: list[asyncio.Task[None]] = []

    async def try_join(self, addr: str, port: int) -> bool:
        """One attempt: connect, say hello and wait for the welcome (False if the head is not there)."""
        try:
            reader, writer = await asyncio.wait_for(asyncio.open_connection(addr, port), 3)
            self.reader, self.writer = reader, writer
            await _send(writer, {"op": "hello", "rank": self.rank, "host": self.host})
        except (TimeoutError, OSError):
            return False
        self._tasks.append(asyncio.create_task(self._heartbeat()))
        while True:
            msg = await _recv(reader)
            if msg is None:
                self._close()
                return False
            if msg.get("op") == "welcome":
                self.world_size = int(msg.get("world_size", 0))
                self._tasks.append(asyncio.create_task(self._read_loop()))
                return True

    async def _heartbeat(self) -> None:
        while self.writer is not None and not self.lost.is_set():
            try:
                await _send(self.writer, {"op": "hb"})
            except (ConnectionError, OSError, RuntimeError):
                return
            await asyncio.sleep(HEARTBEAT_S)

    async def _read_loop(self) -> None:
        assert self.reader is not None
        try:
            while True:
                msg = await asyncio.wait_for(_recv(self.reader), HEARTBEAT_TIMEOUT_S)
                if msg is None:
                    break
                if msg.get("op") == "tick":
                    idle = msg.get("idle")
                    self.on_tick(int(msg.get("tokens", 0)), float(msg.get("busy", 0.0)),
                                 idle if isinstance(idle, int) else None)
        except (TimeoutError, ConnectionError, OSError):
            pass
        self.lost.set()

    async def send(self, obj: dict[str, Any]) -> None:
        if self.writer is not None:
            with contextlib.suppress(ConnectionError, OSError, RuntimeError):
                await _send(self.writer, obj)

    def _close(self) -> list[asyncio.Task[None]]:
        """Cancel the link's tasks and close its socket; returns the tasks (to await)."""
        tasks, self._tasks = self._tasks, []
        for t in tasks:
            t.cancel()
        if self.writer is not None:
            with contextlib.suppress(Exception):
                self.writer.close()
        self.writer = None
        return tasks

    async def close(self) -> None:
        writer = self.writer
        await asyncio.gather(*self._close(), return_exceptions=True)
        if writer is not None:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(writer.wait_closed(), CLOSE_TIMEOUT_S)
