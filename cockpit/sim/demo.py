"""The demo cluster's SSH servers: one asyncssh server per simulated host on 127.0.0.1, run as a
process of its own (`python -m cockpit.sim.demo DIR`).

Each host runs commands in a real `bash -c` with that host's PATH (stand-ins first), HOME and
`R37_SIM_ROOT`, like sshd: without a pty on pipes (the cockpit's own commands), with one (`ssh -t`) on a
pseudo-terminal of its own, where a session without a command is an interactive `bash --norc -i` whose
prompt names the simulated host (`root@spark-1:~# `); the client's terminal type and window size (and
its changes) reach that pty, and the session ends with the shell's status. Port-forward requests for
127.0.0.1:PORT are answered with the host's own address (the hosts share the machine's loopback, so
each simulated host owns one 127.x address). A small TCP front per host turns the `host-down` fault
into a silent host: bytes stop flowing both ways and new connections get no banner, like a host whose
link went down.
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import json
import os
import signal
import struct
import sys
import termios
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import cast

import asyncssh

from cockpit.sim import layout

LOCAL_NAMES = {"127.0.0.1", "localhost", "::1", "0.0.0.0", "ip6-localhost"}
FAULT_POLL = 0.3


def host_env(root: Path, path_dirs: list[str]) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k in ("LANG", "LC_ALL", "TERM", "TZ", "USER", "LOGNAME")}
    env.update({
        "PATH": ":".join([*path_dirs, os.environ.get("PATH", "/usr/local/bin:/usr/bin:/bin")]),
        "HOME": str(layout.home_dir(root)),
        layout.ROOT_ENV: str(root),
        "SHELL": "/bin/bash",
        "LANG": env.get("LANG", "C.UTF-8"),
    })
    return env


def _take_terminal() -> None:
    """In the child, after setsid(): its stdin (the pty's slave) becomes its controlling terminal."""
    fcntl.ioctl(0, termios.TIOCSCTTY, 0)


def set_window(fd: int, cols: int, rows: int, xpix: int = 0, ypix: int = 0) -> None:
    """The pty's window size (the kernel tells the foreground process group with SIGWINCH)."""
    def clamp(v: int) -> int:
        return max(0, min(int(v), 0xFFFF))
    with contextlib.suppress(OSError):
        fcntl.ioctl(fd, termios.TIOCSWINSZ, struct.pack("HHHH", clamp(rows), clamp(cols), clamp(xpix),
                                                        clamp(ypix)))


class ShellSession(asyncssh.SSHServerSession):
    """An exec (or shell) request run in a real bash, like sshd: on pipes, or on a pty when one was asked
    for (then a shell request is an interactive bash)."""

    def __init__(self, host: SimHost):
        self._host = host
        self._term: tuple[str, tuple[int, int, int, int]] | None = None
        self._master: int | None = None
        self._pty_out = bytearray()     # keystrokes the pty could not take yet
        self._pty_eof = asyncio.Event()
        self._reading = False
        self._chan: asyncssh.SSHServerChannel | None = None
        self._command: str | None = None
        self._proc: asyncio.subprocess.Process | None = None
        self._writable = asyncio.Event()
        self._writable.set()
        self._pending_stdin: list[bytes] = []
        self._stdin_eof = False
        self._lost = False              # the client went away (before the command may have started)
        self._task: asyncio.Future[None] | None = None

    def connection_made(self, chan: asyncssh.SSHServerChannel) -> None:
        self._chan = chan

    def exec_requested(self, command: str) -> bool:
        self._command = command
        return True

    def shell_requested(self) -> bool:
        self._command = None
        return True

    def pty_requested(self, term_type: str, term_size: tuple[int, int, int, int],
                      term_modes: object) -> bool:
        self._term = (term_type[:64] or "xterm", term_size)
        return True

    def terminal_size_changed(self, width: int, height: int, pixwidth: int, pixheight: int) -> None:
        if self._term is not None:
            self._term = (self._term[0], (width, height, pixwidth, pixheight))
        if self._master is not None:
            set_window(self._master, width, height, pixwidth, pixheight)

    def session_started(self) -> None:
        self._task = asyncio.ensure_future(self._run() if self._term is None else self._run_pty())

    async def _run(self) -> None:
        argv = ["bash", "-c", self._command] if self._command is not None else ["bash", "-s"]
        assert self._chan is not None
        try:
            self._proc = await asyncio.create_subprocess_exec(
                *argv, stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE, cwd=self._host.env["HOME"], env=self._host.env,
                start_new_session=True)
        except OSError as exc:
            self._chan.write_stderr(f"bash: {exc}\n".encode())
            self._chan.exit(127)
            return
        self._hang_up_if_lost()
        for data in self._pending_stdin:
            self._proc.stdin.write(data)  # type: ignore[union-attr]
        if self._stdin_eof:
            self._proc.stdin.close()  # type: ignore[union-attr]
        await asyncio.gather(self._pump(self._proc.stdout, self._chan.write),
                             self._pump(self._proc.stderr, self._chan.write_stderr))
        status = await self._proc.wait()
        with contextlib.suppress(Exception):
            if status < 0:
                self._chan.exit(128 - status)
            else:
                self._chan.exit(status)

    async def _run_pty(self) -> None:
        """The command (or an interactive bash) on a pty of its own; its status once it exits and the pty
        is drained."""
        assert self._chan is not None and self._term is not None
        term, (cols, rows, xpix, ypix) = self._term
        env = dict(self._host.env, TERM=term)
        if self._command is None:
            argv = ["bash", "--norc", "-i"]
            env["PS1"] = layout.prompt(self._host.spec.hostname)
        else:
            argv = ["bash", "-c", self._command]
        master, slave = os.openpty()
        set_window(slave, cols, rows, xpix, ypix)
        try:
            self._proc = await asyncio.create_subprocess_exec(
                *argv, stdin=slave, stdout=slave, stderr=slave, cwd=env["HOME"], env=env,
                start_new_session=True, preexec_fn=_take_terminal)
        except OSError as exc:
            os.close(master)
            self._chan.write_stderr(f"bash: {exc}\n".encode())
            self._chan.exit(127)
            return
        finally:
            os.close(slave)
        self._hang_up_if_lost()
        os.set_blocking(master, False)
        self._master = master
        self._start_reading()
        for data in self._pending_stdin:
            self._to_pty(data)
        status = await self._proc.wait()
        with contextlib.suppress(asyncio.TimeoutError):  # what it wrote last; a job left behind may hold it
            await asyncio.wait_for(self._pty_eof.wait(), 1.0)
        self._stop_reading()
        while self._read_pty():
            pass
        self._master = None
        loop = asyncio.get_running_loop()
        loop.remove_writer(master)
        os.close(master)
        with contextlib.suppress(Exception):
            self._chan.exit(128 - status if status < 0 else status)

    def _start_reading(self) -> None:
        if self._master is not None and not self._reading and not self._pty_eof.is_set():
            asyncio.get_running_loop().add_reader(self._master, self._read_pty)
            self._reading = True

    def _stop_reading(self) -> None:
        if self._master is not None and self._reading:
            asyncio.get_running_loop().remove_reader(self._master)
        self._reading = False

    def _read_pty(self) -> bool:
        """One read of the pty's output into the channel; False when there is nothing (more) to read."""
        if self._master is None:
            return False
        try:
            data = os.read(self._master, 65536)
        except BlockingIOError:
            return False
        except OSError:  # EIO: every process holding the terminal has gone
            data = b""
        if not data:
            self._stop_reading()
            self._pty_eof.set()
            return False
        with contextlib.suppress(asyncssh.Error, OSError):
            assert self._chan is not None
            self._chan.write(data)
        return True

    def _to_pty(self, data: bytes) -> None:
        """Keystrokes to the pty; what it cannot take now waits for it (never blocking the server)."""
        if self._master is None:
            return
        pending = not self._pty_out
        self._pty_out += data
        if pending:
            self._flush_pty()

    def _flush_pty(self) -> None:
        loop = asyncio.get_running_loop()
        master = self._master
        if master is None:
            return
        try:
            while self._pty_out:
                del self._pty_out[:os.write(master, self._pty_out[:4096])]
        except BlockingIOError:
            loop.add_writer(master, self._flush_pty)
            return
        except OSError:
            self._pty_out.clear()
        loop.remove_writer(master)

    async def _pump(self, reader: asyncio.StreamReader | None, write: Callable[[bytes], object]) -> None:
        if reader is None:
            return
        while True:
            data = await reader.read(65536)
            if not data:
                return
            await self._writable.wait()
            try:
                write(data)
            except (asyncssh.Error, OSError, BrokenPipeError):
                return

    def data_received(self, data: bytes, datatype: asyncssh.DataType) -> None:
        if self._term is not None and self._master is not None:
            self._to_pty(data)
        elif self._proc and self._proc.stdin:
            self._proc.stdin.write(data)
        else:
            self._pending_stdin.append(data)

    def eof_received(self) -> bool:
        if self._term is not None:
            return True  # a terminal has no end of input: the shell ends on `exit` or Ctrl-D, as with sshd
        if self._proc and self._proc.stdin:
            self._proc.stdin.close()
        else:
            self._stdin_eof = True
        return True  # keep the channel open: the command's output and exit status are still to come

    def pause_writing(self) -> None:
        self._writable.clear()
        self._stop_reading()

    def resume_writing(self) -> None:
        self._writable.set()
        self._start_reading()

    def signal_received(self, signal_name: str) -> None:
        self._kill(getattr(signal, f"SIG{signal_name}", signal.SIGTERM))

    def connection_lost(self, exc: Exception | None) -> None:
        self._lost = True
        self._writable.set()
        self._stop_reading()
        self._kill(signal.SIGHUP)

    def _hang_up_if_lost(self) -> None:
        """A client that left while its command was being started: the command gets the hang-up that
        `connection_lost` could not give it yet (it ran on, unread, for the life of the demo cluster)."""
        if self._lost:
            self._kill(signal.SIGHUP)

    def _kill(self, sig: int) -> None:
        if self._proc and self._proc.returncode is None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(self._proc.pid, sig)


class HostServer(asyncssh.SSHServer):
    def __init__(self, host: SimHost):
        self._host = host
        self._conn: asyncssh.SSHServerConnection | None = None

    def connection_made(self, conn: asyncssh.SSHServerConnection) -> None:
        self._conn = conn

    def begin_auth(self, username: str) -> bool:
        return True

    def connection_requested(
        self, dest_host: str, dest_port: int, orig_host: str, orig_port: int
    ) -> Awaitable[asyncssh.SSHTCPSession[bytes]]:
        """Forward 127.0.0.1:PORT to this host's own address; allow peers' fabric addresses; nothing else."""
        target = self._host.local_addr if dest_host in LOCAL_NAMES else dest_host
        if target not in self._host.allowed_targets:
            raise asyncssh.ChannelOpenError(asyncssh.OPEN_ADMINISTRATIVELY_PROHIBITED,
                                            f"{dest_host} is outside the simulated cluster")
        assert self._conn is not None
        # the forwarder serves as the channel's session: asyncssh casts its own forward_connection() alike
        return cast(
            "Awaitable[asyncssh.SSHTCPSession[bytes]]", self._conn.forward_connection(target, dest_port)
        )

    def session_requested(self) -> asyncssh.SSHServerSession:
        return ShellSession(self._host)


class SimHost:
    """One simulated host: SSH server on an internal port behind a front that can go silent."""

    def __init__(self, root: Path, path_dirs: list[str], host_key: str, authorized_keys: str, user: str):
        self.root = root
        self.spec = layout.read_spec(root)
        self.env = host_env(root, path_dirs)
        self.local_addr = self.spec.api_bind
        self.allowed_targets = {self.spec.api_bind, *self.spec.peers}
        self._host_key = host_key
        self._authorized_keys = authorized_keys
        self._user = user
        self._front: asyncio.Server | None = None
        self._ssh: asyncssh.SSHAcceptor | None = None
        self._links: set[tuple[asyncio.StreamWriter, asyncio.StreamWriter | None]] = set()
        self.down = False
        self.port = 0

    async def start(self, port: int = 0) -> None:
        self._ssh = await asyncssh.create_server(
            lambda: HostServer(self), "127.0.0.1", 0, server_host_keys=[self._host_key],
            authorized_client_keys=self._authorized_keys, encoding=None, allow_scp=False, line_editor=False,
            password_auth=False, kbdint_auth=False, keepalive_interval=0)
        self._front = await asyncio.start_server(self._accept, "127.0.0.1", port)
        self.port = self._front.sockets[0].getsockname()[1]

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        # the switch as it is now, not as of the last poll: a connection made once `sim fault host-down`
        # returned is never answered (the poll is for connections already open)
        self.set_down(layout.fault_active(self.root, "host-down"))
        if self.down:  # a host that is down never answers: hold the socket silently
            self._links.add((writer, None))
            with contextlib.suppress(Exception):
                while await reader.read(65536):
                    pass
            return
        assert self._ssh is not None
        inner_port = self._ssh.sockets[0].getsockname()[1]
        try:
            ireader, iwriter = await asyncio.open_connection("127.0.0.1", inner_port)
        except OSError:
            writer.close()
            return
        link = (writer, iwriter)
        self._links.add(link)
        try:
            await asyncio.gather(self._copy(reader, iwriter), self._copy(ireader, writer))
        finally:
            self._links.discard(link)
            for w in (writer, iwriter):
                w.close()

    async def _copy(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        with contextlib.suppress(Exception):
            while data := await reader.read(65536):
                if self.down:
                    continue  # dropped on the floor, as on a dead link
                writer.write(data)
                await writer.drain()
        with contextlib.suppress(Exception):
            writer.write_eof()

    def set_down(self, down: bool) -> None:
        if down == self.down:
            return
        self.down = down
        if not down:  # the link is back: connections that lost bytes are dead for their peers anyway
            for front, inner in list(self._links):
                front.close()
                if inner:
                    inner.close()
            self._links.clear()

    async def watch_faults(self) -> None:
        while True:
            self.set_down(layout.fault_active(self.root, "host-down"))
            await asyncio.sleep(FAULT_POLL)

    async def close(self) -> None:
        if self._front:
            self._front.close()
        if self._ssh:
            self._ssh.close()


async def serve(cluster_dir: Path) -> None:
    plan = json.loads((cluster_dir / "demo-plan.json").read_text())
    hosts = [SimHost(Path(h["root"]), plan["path_dirs"], h["host_key"], plan["authorized_keys"], plan["user"])
             for h in plan["hosts"]]
    for host, h in zip(hosts, plan["hosts"], strict=True):
        await host.start(h.get("port", 0))
    ready = {"pid": os.getpid(), "ports": [h.port for h in hosts]}
    tmp = cluster_dir / f".demo-ready.json.{os.getpid()}.tmp"  # never a name of the operator's
    tmp.write_text(json.dumps(ready))
    tmp.replace(cluster_dir / "demo-ready.json")
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    watchers = [asyncio.ensure_future(h.watch_faults()) for h in hosts]
    await stop.wait()
    for w in watchers:
        w.cancel()
    for h in hosts:
        await h.close()


def _hang_ups_reach_commands() -> None:
    """Started with SIGHUP ignored (`nohup`, some CI runners), which every child inherits, the hosts'
    commands outlived their clients. The server keeps ignoring hang-ups, with a handler that does
    nothing: unlike SIG_IGN a handler is reset to the default in a child that execs, so commands get
    the hang-up as sshd's children do."""
    if signal.getsignal(signal.SIGHUP) is signal.SIG_IGN:
        signal.signal(signal.SIGHUP, lambda _sig, _frame: None)


def main(argv: list[str] | None = None) -> int:
    args = argv if argv is not None else sys.argv[1:]
    if len(args) != 1:
        print("usage: python -m cockpit.sim.demo CLUSTER_DIR", file=sys.stderr)
        return 2
    _hang_ups_reach_commands()
    asyncio.run(serve(Path(args[0])))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
