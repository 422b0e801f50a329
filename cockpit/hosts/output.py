"""A command's output read as bytes and bounded: whatever a host prints, memory stays capped and one
invalid UTF-8 byte never closes the connection (asyncssh's strict decoding would)."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from dataclasses import dataclass

import asyncssh

MAX_OUTPUT = 8 << 20  # bytes of stdout, and of stderr, one command keeps
MAX_LINE = 64 << 10  # bytes of one streamed line
DRAIN_FACTOR = 64  # after max_output * DRAIN_FACTOR bytes dropped, the command is stopped
CHUNK = 1 << 16
TRUNCATED = "… [truncated: {n} bytes not shown]"
LINE_CUT = " … [line cut at {n} bytes: the rest of it dropped]"
STOPPED = "… [the command was stopped after printing more than {n} bytes]"


def decode(data: bytes | bytearray) -> str:
    return bytes(data).decode("utf-8", "replace")


class _Capped:
    """One output stream: the first `cap` bytes kept, the rest counted and dropped."""

    def __init__(self, cap: int):
        self.cap = max(0, cap)
        self.data = bytearray()
        self.dropped = 0

    async def fill(self, reader: asyncssh.SSHReader[bytes], drain_limit: int) -> bool:
        """Read to EOF; True if more than `drain_limit` bytes were dropped (then reading stops)."""
        while True:
            chunk = await reader.read(CHUNK)
            if not chunk:
                return False
            room = self.cap - len(self.data)
            if room > 0:
                self.data += chunk[:room]
            self.dropped += max(0, len(chunk) - max(room, 0))
            if self.dropped > drain_limit:
                return True

    def text(self) -> str:
        text = decode(self.data)
        if self.dropped:
            sep = "" if not text or text.endswith("\n") else "\n"
            text += sep + TRUNCATED.format(n=self.dropped) + "\n"
        return text


@dataclass(frozen=True, slots=True)
class Collected:
    exit_status: int | None
    stdout: str
    stderr: str
    truncated: bool
    lost: bool  # the channel closed without an exit status or signal: the connection went


async def collect(conn: asyncssh.SSHClientConnection, line: str, input: str | None,
                  max_output: int) -> Collected:
    """Run `line` on its own channel, feeding `input`, keeping at most `max_output` bytes of each of
    stdout and stderr. Raises asyncssh.Error/OSError when the channel cannot be opened."""
    proc = await conn.create_process(line, encoding=None)
    out, err = _Capped(max_output), _Capped(max_output)
    limit = max(max_output, 1 << 20) * DRAIN_FACTOR

    async def feed() -> None:
        with contextlib.suppress(asyncssh.Error, OSError, BrokenPipeError):
            if input:
                proc.stdin.write(input.encode())
                await proc.stdin.drain()
            proc.stdin.write_eof()

    feeding = asyncio.ensure_future(feed())
    readers = {asyncio.ensure_future(out.fill(proc.stdout, limit)),
               asyncio.ensure_future(err.fill(proc.stderr, limit))}
    stopped = False
    try:
        pending = set(readers)
        while pending and not stopped:
            done, pending = await asyncio.wait(pending, return_when=asyncio.FIRST_COMPLETED)
            stopped = any(t.result() for t in done)
        if stopped:  # an endless flood: stop the command rather than drain it forever
            with contextlib.suppress(Exception):
                proc.send_signal("TERM")
            proc.close()
        await proc.wait_closed()
    finally:
        for task in (feeding, *readers):
            task.cancel()
        proc.close()
    stderr = err.text()
    if stopped:
        stderr += STOPPED.format(n=limit) + "\n"
        return Collected(None, out.text(), stderr, True, False)
    status, signal = proc.exit_status, proc.exit_signal
    lost = status is None and signal is None
    exit_status = status if status is not None and status >= 0 else None
    return Collected(exit_status, out.text(), stderr, bool(out.dropped or err.dropped), lost)


async def split_lines(reader: asyncssh.SSHReader[bytes], max_line: int) -> AsyncIterator[str]:
    """Decoded lines (without their newline) of `reader`; a line over `max_line` bytes is yielded cut,
    with a mark, as soon as it is that long, and the rest of it is dropped."""
    buf = bytearray()
    cutting = False  # inside an over-long line already yielded
    while True:
        chunk = await reader.read(CHUNK)
        if not chunk:
            break
        start = 0
        while start < len(chunk):
            nl = chunk.find(b"\n", start)
            end = nl if nl >= 0 else len(chunk)
            if not cutting:
                buf += chunk[start:min(end, start + max_line + 1 - len(buf))]
            if nl >= 0:
                if not cutting:
                    yield _line(buf, max_line)
                buf.clear()
                cutting = False
                start = nl + 1
                continue
            if not cutting and len(buf) > max_line:
                yield _line(buf, max_line)
                buf.clear()
                cutting = True
            break
    if buf and not cutting:
        yield _line(buf, max_line)


def _line(buf: bytearray, max_line: int) -> str:
    if len(buf) <= max_line:
        return decode(buf)
    return decode(buf[:max_line]) + LINE_CUT.format(n=max_line)
