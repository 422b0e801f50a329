"""One host: one asyncssh connection, kept alive and reconnected; run, stream, port-forward."""

from __future__ import annotations

import asyncio
import contextlib
import os
import socket
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import replace

import asyncssh

from cockpit.config import HostEntry, SSHSection
from cockpit.hosts.shell import Cmd, as_command
from cockpit.hosts.state import (
    CommandRecord,
    CommandTimeout,
    HostState,
    HostStatus,
    HostUnavailable,
    Result,
)

BACKOFF_START = 1.0
BACKOFF_MAX = 8.0
KEY_RETRY = 15.0
LATENCY_EVERY = 5.0
CLOSE_ATTEMPTS = 5  # cancellations a closing host's supervisor gets ...
CLOSE_WAIT = 1.0  # ... each waited for this long (s)


def _expand(path: str | None) -> str | None:
    return os.path.expanduser(path) if path else None


class Host:
    """A supervised SSH connection to one rank's host."""

    def __init__(self, entry: HostEntry, ssh: SSHSection,
                 on_status: Callable[[HostStatus], None] | None = None,
                 on_command: Callable[[CommandRecord], None] | None = None):
        self.entry = entry
        self.rank = entry.rank
        self.ssh = ssh
        self.target = entry.target
        self.status = HostStatus(rank=self.rank, target=self.target)
        self._on_status = on_status
        self._on_command = on_command
        self._conn: asyncssh.SSHClientConnection | None = None
        self._connected = asyncio.Event()
        self._closing = False
        self._task: asyncio.Task[None] | None = None
        self._forwards: dict[tuple[str, int], int] = {}
        self._listeners: dict[tuple[str, int], asyncssh.SSHListener] = {}

    # ---- lifecycle ---------------------------------------------------------------------------------

    def start(self) -> None:
        if self._task is None:
            self._task = asyncio.create_task(self._supervise(), name=f"host-{self.rank}")

    async def close(self) -> None:
        self._closing = True
        task = self._task
        if task:
            # Cancel until it ends: on Python 3.11 `asyncio.wait_for` can swallow a cancellation that
            # lands as its inner call completes (gh-86296), which once kept a finished command alive.
            for _ in range(CLOSE_ATTEMPTS):
                if task.done():
                    break
                task.cancel()
                await asyncio.wait({task}, timeout=CLOSE_WAIT)
            if task.done() and not task.cancelled():
                task.exception()  # retrieved: a supervisor that failed while closing is not news
        if self._conn:
            self._conn.close()
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self._conn.wait_closed(), 2)
        self._set(state=HostState.CLOSED)

    async def wait_connected(self, timeout: float | None = None) -> bool:
        try:
            await asyncio.wait_for(self._connected.wait(), timeout)
        except TimeoutError:
            return False
        return True

    def _set(self, **changes: object) -> None:
        if "state" in changes and changes["state"] != self.status.state:
            changes.setdefault("since", time.time())
        self.status = replace(self.status, **changes)  # type: ignore[arg-type]
        if self._on_status:
            self._on_status(self.status)

    def _connect_options(self) -> dict[str, object]:
        opts: dict[str, object] = {
            "connect_timeout": self.ssh.connect_timeout,
            "login_timeout": self.ssh.connect_timeout,
            "keepalive_interval": self.ssh.keepalive_interval,
            "keepalive_count_max": self.ssh.keepalive_count_max,
            "encryption_algs": list(self.ssh.ciphers),  # [ssh] ciphers: AES-GCM first, cheaper per packet
        }
        if self.entry.user:
            opts["username"] = self.entry.user
        if self.entry.port:
            opts["port"] = self.entry.port
        if self.ssh.known_hosts:
            opts["known_hosts"] = _expand(self.ssh.known_hosts)
        if self.ssh.identity_file:
            opts["client_keys"] = [_expand(self.ssh.identity_file)]
        return opts

    async def _fingerprint(self) -> str | None:
        """Read the server's host key without authenticating, to show the operator what was refused."""
        try:
            key = await asyncio.wait_for(
                asyncssh.get_server_host_key(self.entry.ssh, self.entry.port or ()),
                self.ssh.connect_timeout)
        except Exception:  # a fingerprint is best effort
            return None
        return key.get_fingerprint("sha256") if key else None

    async def _supervise(self) -> None:
        delay = BACKOFF_START
        ever_connected = False
        while not self._closing:
            try:
                conn = await asyncssh.connect(self.entry.ssh, **self._connect_options())
            except asyncssh.HostKeyNotVerifiable as exc:
                fp = await self._fingerprint()
                kh = self.ssh.known_hosts or "~/.ssh/known_hosts"
                port = f"-p {self.entry.port} " if self.entry.port else ""
                self._set(state=HostState.KEY_REFUSED, fingerprint=fp, error=str(exc),
                          remedy=(f"verify {fp or 'the key'} with the host's administrator, then add it: "
                                  f"ssh-keyscan {port}{self.entry.ssh} >> {kh}"))
                await asyncio.sleep(KEY_RETRY)
                continue
            except asyncssh.PermissionDenied as exc:
                self._set(state=HostState.AUTH_FAILED, error=str(exc) or "permission denied",
                          remedy="check the user, IdentityFile and ssh-agent for this host")
                await asyncio.sleep(KEY_RETRY)
                continue
            except (OSError, TimeoutError, asyncssh.Error) as exc:
                self._set(state=HostState.LOST if ever_connected else HostState.UNREACHABLE,
                          error=describe_connect_error(exc, self.entry.ssh, self.ssh.connect_timeout),
                          remedy=f"check that {self.entry.ssh} is up and sshd answers; "
                                 f"retrying in {delay:g} s")
                await asyncio.sleep(delay)
                delay = min(delay * 2, BACKOFF_MAX)
                continue
            delay = BACKOFF_START
            ever_connected = True
            self._conn = conn
            key = conn.get_server_host_key()
            fingerprint = key.get_fingerprint("sha256") if key else None
            hostname, latency = None, None
            with contextlib.suppress(Exception):
                t0 = time.perf_counter()
                res = await asyncio.wait_for(conn.run("hostname", check=False),
                                             self.ssh.connect_timeout)
                latency = (time.perf_counter() - t0) * 1000
                hostname = str(res.stdout or "").strip() or None
            await self._restore_forwards(conn)
            self._set(state=HostState.CONNECTED, hostname=hostname, fingerprint=fingerprint,
                      error=None, remedy=None, latency_ms=latency)
            self._connected.set()
            try:
                await self._watch(conn)
            finally:
                self._connected.clear()
                self._conn = None
                self._listeners.clear()
                conn.close()
            if not self._closing:
                self._set(state=HostState.LOST, error="connection lost (no keepalive answer)",
                          remedy="waiting for the host to come back; reconnecting with backoff")

    async def _watch(self, conn: asyncssh.SSHClientConnection) -> None:
        """Wait until the connection closes, measuring latency every few seconds."""
        closed = asyncio.ensure_future(conn.wait_closed())
        try:
            while not self._closing:
                done, _ = await asyncio.wait({closed}, timeout=LATENCY_EVERY)
                if done:
                    return
                t0 = time.perf_counter()
                try:
                    await asyncio.wait_for(conn.run("true", check=False), LATENCY_EVERY)
                except (TimeoutError, asyncssh.Error, OSError):
                    continue
                self._set(latency_ms=(time.perf_counter() - t0) * 1000)
        finally:
            closed.cancel()

    async def _restore_forwards(self, conn: asyncssh.SSHClientConnection) -> None:
        for (rhost, rport), lport in list(self._forwards.items()):
            try:
                listener = await conn.forward_local_port("127.0.0.1", lport, rhost, rport)
            except OSError:
                listener = await conn.forward_local_port("127.0.0.1", 0, rhost, rport)
                self._forwards[(rhost, rport)] = listener.get_port()
            self._listeners[(rhost, rport)] = listener

    def _require(self) -> asyncssh.SSHClientConnection:
        if self._conn is None:
            raise HostUnavailable(self.rank, self.status.state, self.status.error or "")
        return self._conn

    def _record(self, rec: CommandRecord) -> None:
        if self._on_command:
            self._on_command(rec)

    # ---- commands ----------------------------------------------------------------------------------

    async def run(self, cmd: Cmd, *, timeout: float | None = 60.0, input: str | None = None) -> Result:
        """Run one command on its own channel; a non-zero exit is a Result, not an exception."""
        line = as_command(cmd).line
        conn = self._require()
        started = time.time()
        t0 = time.perf_counter()
        self._record(CommandRecord(self.rank, line, started))
        try:
            proc = await asyncio.wait_for(conn.run(line, check=False, input=input), timeout)
        except TimeoutError:
            self._record(CommandRecord(self.rank, line, started, time.perf_counter() - t0, None, "timeout"))
            raise CommandTimeout(self.rank, line, timeout or 0) from None
        except (asyncssh.Error, OSError) as exc:
            self._record(CommandRecord(self.rank, line, started, time.perf_counter() - t0, None, "lost"))
            raise HostUnavailable(self.rank, HostState.LOST, str(exc)) from None
        duration = time.perf_counter() - t0
        if proc.exit_status is None and proc.exit_signal is None:
            # the channel closed without saying how the command ended: the link went, not the command
            self._record(CommandRecord(self.rank, line, started, duration, None, "lost"))
            raise HostUnavailable(self.rank, HostState.LOST, "the channel closed before the command's exit "
                                                             "status arrived (connection lost?)")
        status = proc.exit_status if proc.exit_status is not None and proc.exit_status >= 0 else None
        self._record(CommandRecord(self.rank, line, started, duration, status))
        return Result(self.rank, line, status, _text(proc.stdout), _text(proc.stderr), duration)

    async def stream(self, cmd: Cmd, *, merge_stderr: bool = True) -> AsyncIterator[str]:
        """Lines of a long-lived command; ends when it exits; raises HostUnavailable if the host is lost.

        Closing the iterator (or cancelling its consumer) signals and closes the remote process.
        """
        line = as_command(cmd).line
        conn = self._require()
        self._record(CommandRecord(self.rank, line, time.time(), note="stream"))
        stderr = asyncssh.STDOUT if merge_stderr else asyncssh.DEVNULL
        try:
            proc = await conn.create_process(line, stderr=stderr, encoding="utf-8", errors="replace")
        except (asyncssh.Error, OSError) as exc:
            raise HostUnavailable(self.rank, HostState.LOST, str(exc)) from None
        try:
            async for out in proc.stdout:
                if not out:  # EOF
                    break
                yield out.rstrip("\n")
            if self._conn is not conn:
                raise HostUnavailable(self.rank, HostState.LOST, "connection lost during stream")
        except (asyncssh.Error, OSError) as exc:
            raise HostUnavailable(self.rank, HostState.LOST, str(exc)) from None
        finally:
            with contextlib.suppress(Exception):
                proc.send_signal("TERM")
            proc.close()

    async def forward_local(self, remote_host: str, remote_port: int) -> int:
        """A local port on 127.0.0.1 forwarded to remote_host:remote_port as seen from this host.

        The forward is re-established on the same local port after a reconnect.
        """
        key = (remote_host, int(remote_port))
        if key in self._listeners:
            return self._forwards[key]
        conn = self._require()
        try:
            listener = await conn.forward_local_port("127.0.0.1", self._forwards.get(key, 0), *key)
        except (asyncssh.Error, OSError) as exc:
            raise HostUnavailable(self.rank, self.status.state, f"port forward failed: {exc}") from None
        self._listeners[key] = listener
        self._forwards[key] = listener.get_port()
        return self._forwards[key]


def describe_connect_error(exc: BaseException, host: str, timeout: float) -> str:
    """One human sentence for a failed connection attempt."""
    if isinstance(exc, socket.gaierror):
        return f"cannot resolve {host!r} (check ~/.ssh/config, /etc/hosts or DNS)"
    if isinstance(exc, ConnectionRefusedError):
        return "connection refused (is sshd running on the host?)"
    if isinstance(exc, TimeoutError | asyncio.TimeoutError):
        return f"no answer within {timeout:g} s (host down or network path broken)"
    if isinstance(exc, asyncssh.DisconnectError):
        return f"disconnected by the host: {exc.reason}"
    return str(exc) or type(exc).__name__


def _text(value: object) -> str:
    if value is None:
        return ""
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    return str(value)
