"""One host: one asyncssh connection, kept alive and reconnected; run, stream, port-forward."""

from __future__ import annotations

import asyncio
import contextlib
import os
import socket
import time
from collections.abc import AsyncGenerator, Callable
from dataclasses import replace

import asyncssh

from cockpit.config import HostEntry, SSHSection
from cockpit.hosts import known_hosts as kh
from cockpit.hosts import origin
from cockpit.hosts.output import MAX_LINE, MAX_OUTPUT, collect, split_lines
from cockpit.hosts.shell import Cmd, as_command
from cockpit.hosts.sshconfig import HostKeyPolicy, resolve
from cockpit.hosts.state import (
    LATENCY_EVERY,
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
CLOSE_ATTEMPTS = 5  # cancellations a closing host's supervisor gets ...
CLOSE_WAIT = 1.0  # ... each waited for this long (s)
HOSTNAME_MAX = 4096  # bytes of `hostname` output kept


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

    def _connect_options(self, known: kh.SSHKnownHosts) -> dict[str, object]:
        """asyncssh options: always the known_hosts the policy resolved (asyncssh's own fallback to
        `UserKnownHostsFile` from ~/.ssh/config, where `none` validates nothing, is never used)."""
        opts: dict[str, object] = {
            "known_hosts": known,
            "utf8_decode_errors": "replace",  # a banner or disconnect reason in bad UTF-8 is not fatal
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
        if self.ssh.identity_file:
            opts["client_keys"] = [os.path.expanduser(self.ssh.identity_file)]
        return opts

    def _refuse(self, state: HostState, **changes: object) -> None:
        changes.setdefault("known_fingerprints", ())
        changes.setdefault("known_hosts", None)
        changes.setdefault("latency_ms", None)
        self._set(state=state, **changes)

    async def _server_key(self, policy: HostKeyPolicy, algs: list[str] | None = None) -> object:
        return await kh.server_key(policy, self.entry.ssh, self.entry.port, self.ssh.connect_timeout, algs)

    def _trust_remedy(self, fp: str | None) -> str:
        if fp is None:
            return ("the host key could not be read; once the host answers, verify its fingerprint with "
                    "the host's administrator and add it with `r37-cockpit hosts trust --rank "
                    f"{self.rank} --fingerprint SHA256:…`")
        return (f"verify {fp} with the host's administrator (on the host: `ssh-keygen -lf "
                f"/etc/ssh/ssh_host_ed25519_key.pub`), then `r37-cockpit hosts trust --rank {self.rank} "
                f"--fingerprint {fp}`")

    async def _policy(self) -> tuple[HostKeyPolicy, kh.SSHKnownHosts] | None:
        """The known_hosts to check this host against; None (and a refused state) when there is none."""
        policy = resolve(self.entry, self.ssh)
        if policy.unsafe:
            self._refuse(HostState.SSH_CONFIG_UNSAFE, error=policy.unsafe + "; the cockpit does not connect",
                         remedy="remove that setting, or scope its Host block so it does not match this "
                                "host; the cockpit never turns host key checking off")
            return None
        files = policy.existing
        if not files:
            key = await self._server_key(policy)
            fp = kh.fingerprint(key) if key is not None else None  # type: ignore[arg-type]
            self._refuse(HostState.KNOWN_HOSTS_MISSING, fingerprint=fp, known_hosts=policy.write_file,
                         error=f"no known_hosts file: {', '.join(policy.files)} does not exist, so there is "
                               "nothing to check the host key against",
                         remedy=self._trust_remedy(fp) + f" (it creates {policy.write_file}), or set "
                                "[ssh] known_hosts in cluster.toml")
            return None
        try:
            known = kh.load(files)
        except (OSError, ValueError) as exc:
            self._refuse(HostState.KNOWN_HOSTS_MISSING, known_hosts=files[0],
                         error=f"cannot read known_hosts ({', '.join(files)}): {exc}",
                         remedy="fix or replace the file named; the cockpit connects only to verified keys")
            return None
        return policy, known

    async def _key_refused(self, policy: HostKeyPolicy, known: kh.SSHKnownHosts, exc: Exception) -> None:
        """Tell a changed key from an unknown or a revoked one, with the fingerprints involved."""
        files = ", ".join(policy.existing)
        addr = await kh.peer_address(policy.hostname, policy.port)
        key = await self._server_key(policy, kh.trusted_algs(known, policy, addr))
        if key is None:
            trusted, *_ = known.match(policy.lookup, addr, policy.match_port)
            verdict = kh.KeyVerdict.CHANGED if trusted else kh.KeyVerdict.UNKNOWN
            found = kh.KeyCheck(verdict, "", tuple(dict.fromkeys(kh.fingerprint(k) for k in trusted)))
        else:
            found = kh.check(known, policy, addr, key)  # type: ignore[arg-type]
        fp = found.fingerprint or None
        where = policy.pattern
        if found.verdict is kh.KeyVerdict.REVOKED:
            self._refuse(HostState.KEY_REVOKED, fingerprint=fp, known_hosts=files,
                         error=f"{where} offers the key {fp}, which known_hosts ({files}) marks @revoked",
                         remedy="do not connect: the key was revoked on purpose; ask the host's "
                                "administrator for the host's new key")
        elif found.verdict is kh.KeyVerdict.CHANGED:
            self._refuse(HostState.KEY_CHANGED, fingerprint=fp, known_fingerprints=found.known,
                         known_hosts=files,
                         error=f"HOST KEY CHANGED for {where}: known_hosts ({files}) holds "
                               f"{', '.join(found.known)}, the host now offers {fp or 'another key'}: "
                               "someone may be intercepting the connection",
                         remedy="do not connect: ask the host's administrator whether its key changed; if "
                                f"it did, remove the old line (`ssh-keygen -R '{where}' -f "
                                f"{policy.write_file}`), then verify and trust the new key "
                                f"(`r37-cockpit hosts trust --rank {self.rank} --fingerprint "
                                f"{fp or 'SHA256:…'}`)")
        elif found.verdict is kh.KeyVerdict.UNKNOWN:
            self._refuse(HostState.KEY_UNKNOWN, fingerprint=fp, known_hosts=files,
                         error=f"the host key {fp or ''} of {where} is in no known_hosts file ({files})",
                         remedy=self._trust_remedy(fp))
        else:  # the key is known after all (the file changed meanwhile): say what asyncssh said
            self._refuse(HostState.KEY_UNKNOWN, fingerprint=fp, known_hosts=files, error=str(exc),
                         remedy="retrying")

    async def _supervise(self) -> None:
        delay = BACKOFF_START
        ever_connected = False
        while not self._closing:
            checked = await self._policy()
            if checked is None:
                await asyncio.sleep(KEY_RETRY)
                continue
            policy, known = checked
            try:
                conn = await asyncssh.connect(self.entry.ssh, **self._connect_options(known))
            except asyncssh.HostKeyNotVerifiable as exc:
                await self._key_refused(policy, known, exc)
                await asyncio.sleep(KEY_RETRY)
                continue
            except asyncssh.PermissionDenied as exc:
                self._refuse(HostState.AUTH_FAILED, error=str(exc) or "permission denied",
                             remedy="check the user, IdentityFile and ssh-agent for this host")
                await asyncio.sleep(KEY_RETRY)
                continue
            except (OSError, TimeoutError, asyncssh.Error, ValueError) as exc:
                state = (HostState.LOST if ever_connected else
                         HostState.TIMEOUT if isinstance(exc, TimeoutError) else HostState.UNREACHABLE)
                said = describe_connect_error(exc, self.entry.ssh, self.ssh.connect_timeout)
                self._refuse(state, error=said,
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
                res = await asyncio.wait_for(collect(conn, "hostname", None, HOSTNAME_MAX),
                                             self.ssh.connect_timeout)
                latency = (time.perf_counter() - t0) * 1000
                hostname = res.stdout.strip()[:255] or None
            await self._restore_forwards(conn)
            self._set(state=HostState.CONNECTED, hostname=hostname, fingerprint=fingerprint,
                      error=None, remedy=None, latency_ms=latency, known_fingerprints=(),
                      known_hosts=", ".join(policy.existing))
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
                    await asyncio.wait_for(conn.run("true", check=False, encoding=None), LATENCY_EVERY)
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
            self._on_command(rec if rec.origin else replace(rec, origin=origin.current()))

    # ---- commands ----------------------------------------------------------------------------------

    async def run(self, cmd: Cmd, *, timeout: float | None = 60.0, input: str | None = None,
                  max_output: int = MAX_OUTPUT) -> Result:
        """Run one command on its own channel; a non-zero exit is a Result, not an exception.

        Output is read as bytes (bad UTF-8 shows as U+FFFD) and at most `max_output` bytes of stdout and
        of stderr are kept; the rest is drained and dropped (`Result.truncated`, and a mark in the text).
        """
        line = as_command(cmd).line
        conn = self._require()
        started = time.time()
        t0 = time.perf_counter()
        self._record(CommandRecord(self.rank, line, started))
        try:
            out = await asyncio.wait_for(collect(conn, line, input, max_output), timeout)
        except TimeoutError:
            self._record(CommandRecord(self.rank, line, started, time.perf_counter() - t0, None, "timeout"))
            raise CommandTimeout(self.rank, line, timeout or 0) from None
        except (asyncssh.Error, OSError) as exc:
            self._record(CommandRecord(self.rank, line, started, time.perf_counter() - t0, None, "lost"))
            raise HostUnavailable(self.rank, HostState.LOST, str(exc)) from None
        duration = time.perf_counter() - t0
        if out.lost:
            # the channel closed without saying how the command ended: the link went, not the command
            self._record(CommandRecord(self.rank, line, started, duration, None, "lost"))
            raise HostUnavailable(self.rank, HostState.LOST, "the channel closed before the command's exit "
                                                             "status arrived (connection lost?)")
        self._record(CommandRecord(self.rank, line, started, duration, out.exit_status,
                                   "output truncated" if out.truncated else ""))
        return Result(self.rank, line, out.exit_status, out.stdout, out.stderr, duration, out.truncated)

    async def stream(self, cmd: Cmd, *, merge_stderr: bool = True, max_line: int = MAX_LINE
                     ) -> AsyncGenerator[str, None]:
        """Lines of a long-lived command; ends when it exits; raises HostUnavailable if the host is lost.

        Read as bytes (bad UTF-8 shows as U+FFFD); a line longer than `max_line` bytes is cut there with
        a mark and the rest of it dropped, so output without newlines cannot grow memory.
        Closing the iterator (or cancelling its consumer) signals and closes the remote process.
        """
        line = as_command(cmd).line
        conn = self._require()
        self._record(CommandRecord(self.rank, line, time.time(), note="stream"))
        stderr = asyncssh.STDOUT if merge_stderr else asyncssh.DEVNULL
        try:
            proc = await conn.create_process(line, stderr=stderr, encoding=None)
        except (asyncssh.Error, OSError) as exc:
            raise HostUnavailable(self.rank, HostState.LOST, str(exc)) from None
        try:
            async for out in split_lines(proc.stdout, max_line):
                yield out
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
        return (f"no SSH answer within {timeout:g} s (connect_timeout): the host is down, the network path "
                "is broken, or sshd accepted the connection and never spoke SSH")
    if isinstance(exc, asyncssh.DisconnectError):
        return f"disconnected by the host: {exc.reason}"
    return str(exc) or type(exc).__name__

