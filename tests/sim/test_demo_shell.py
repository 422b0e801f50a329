"""Interactive shells on the demo cluster: a pty session through the real OpenSSH client looks like the
host (prompt, `hostname`, window size, exit status), and the sim's `docker exec` refuses a container
that is missing or stopped and runs in one that runs (cwd /, its `-e` env, the host's name)."""

from __future__ import annotations

import fcntl
import os
import pty
import select
import shutil
import struct
import subprocess
import sys
import termios
import time
from pathlib import Path

import pytest
from simcluster import SimCluster

from cockpit.sim.layout import prompt
from cockpit.sim.tools.docker import DockerError, env_file_lines, parse_exec

needs_ssh = pytest.mark.skipif(shutil.which("ssh") is None, reason="needs the OpenSSH client")


def test_prompt_names_the_host_and_nothing_else() -> None:
    assert prompt("spark-1") == "\\u@spark-1:\\w\\$ "
    assert prompt("sp$(rm)`x`\\h\n") == "\\u@sprmxh:\\w\\$ "


def test_exec_options() -> None:
    assert parse_exec(["-it", "c", "sh"]) == ({}, {"-i", "-t"}, ["c", "sh"])
    assert parse_exec(["--interactive", "-e", "A=1", "--env=B", "-w", "/tmp", "c", "ls", "-l"]) == (
        {"env": ["A=1", "B"], "workdir": ["/tmp"]}, {"-i"}, ["c", "ls", "-l"])
    assert parse_exec(["--env-file", "f", "-e", "A=1", "c", "sh"]) == (   # not read as `-e f`
        {"env-file": ["f"], "env": ["A=1"]}, set(), ["c", "sh"])
    assert parse_exec(["-i", "--", "c", "-x"]) == ({}, {"-i"}, ["c", "-x"])
    for bad in (["--bogus", "c", "sh"], ["-ix", "c", "sh"], ["-e"]):
        with pytest.raises(DockerError) as err:
            parse_exec(bad)
        assert err.value.code == 125 and "docker exec --help" in str(err.value)


class Terminal:
    """A command on a pty of its own (rows × cols), read until a pattern shows."""

    def __init__(self, argv: list[str], rows: int = 33, cols: int = 101):
        self.master, slave = pty.openpty()
        fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", rows, cols, 0, 0))
        self.proc = subprocess.Popen(argv, stdin=slave, stdout=slave, stderr=slave, close_fds=True,
                                     start_new_session=True, preexec_fn=self._take_terminal)
        os.close(slave)
        self.seen = b""

    @staticmethod
    def _take_terminal() -> None:  # so that a resize reaches the command (SIGWINCH)
        fcntl.ioctl(0, termios.TIOCSCTTY, 0)

    def resize(self, rows: int, cols: int) -> None:
        fcntl.ioctl(self.master, termios.TIOCSWINSZ, struct.pack("HHHH", rows, cols, 0, 0))

    def expect(self, pattern: bytes, timeout: float = 60) -> None:
        self.shows(pattern, timeout)
        assert pattern in self.seen, self.seen

    def shows(self, pattern: bytes, timeout: float) -> bool:
        """Read until `pattern` has shown (True) or `timeout` seconds passed (False)."""
        deadline = time.monotonic() + timeout
        while pattern not in self.seen and time.monotonic() < deadline:
            if select.select([self.master], [], [], 0.5)[0]:
                try:
                    self.seen += os.read(self.master, 65536)
                except OSError:
                    break
        return pattern in self.seen

    def send(self, line: str) -> None:
        os.write(self.master, line.encode() + b"\n")

    def close(self) -> None:
        self.proc.kill()
        self.proc.wait()
        os.close(self.master)


@needs_ssh
def test_a_login_on_a_pty_looks_like_the_host(demo_cluster: SimCluster) -> None:
    term = Terminal(["ssh", "-F", str(demo_cluster.dir / "ssh_config"), "-tt", "spark-1"])
    try:
        term.expect(b"@spark-1:~# " if os.geteuid() == 0 else b"@spark-1:~$ ")
        term.send("hostname; stty size; tty; echo $R37_SIM_ROOT")
        term.expect(b"/dev/pts/")
        term.expect(str(demo_cluster.root(1)).encode())
        assert b"\rspark-1\r\n33 101\r\n" in term.seen   # the stand-in; the client's window size
        term.resize(44, 132)            # ssh passes the new size on (window-change) when it gets to it:
        for _ in range(15):             # on a loaded machine, after keys typed 0.3 s later (CI)
            term.send("stty size")
            if term.shows(b"\r44 132\r\n", 2):
                break
        term.expect(b"\r44 132\r\n", timeout=1)
        term.send("exit 3")
        assert term.proc.wait(timeout=60) == 3, term.seen
    finally:
        term.close()


@needs_ssh
def test_a_command_on_a_pty_and_without_one(demo_cluster: SimCluster) -> None:
    base = ["ssh", "-F", str(demo_cluster.dir / "ssh_config")]
    with_pty = subprocess.run([*base, "-tt", "spark-2", "test -t 0 && echo on-a-tty; exit 5"],
                              capture_output=True, timeout=60, stdin=subprocess.DEVNULL)
    assert with_pty.returncode == 5 and with_pty.stdout == b"on-a-tty\r\n", with_pty
    plain = subprocess.run([*base, "-T", "spark-2", "test -t 0 || echo no-tty; hostname"],
                           capture_output=True, timeout=60, stdin=subprocess.DEVNULL)
    assert plain.returncode == 0 and plain.stdout == b"no-tty\nspark-2\n", plain


def cockpit(cluster: SimCluster, *argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "cockpit", "--config", str(cluster.config_path), *argv],
                          capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL)


@needs_ssh
def test_no_container_is_a_clean_failure(demo_cluster: SimCluster) -> None:
    proc = cockpit(demo_cluster, "ssh", "1", "--container", "--", "echo", "hi")
    assert proc.returncode == 1 and proc.stdout == ""
    assert "Error response from daemon: No such container: ds41_r37" in proc.stderr


@needs_ssh
def test_exec_env_file_is_read_as_docker_reads_it(tmp_path: Path) -> None:
    f = tmp_path / "env"
    f.write_text("# comment\n\nA=1\n  B\nC=x=y\n")
    assert env_file_lines([str(f)]) == ["A=1", "B", "C=x=y"]
    with pytest.raises(DockerError) as err:
        env_file_lines([str(tmp_path / "missing")])
    assert err.value.code == 125 and "no such file" in str(err.value)


def test_exec_in_a_running_container_then_a_stopped_one(fresh_demo_cluster: SimCluster,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    """A container of a tiny stored image (no `docker load`: a few seconds in all)."""
    from cockpit.sim.tools import _docker
    monkeypatch.setenv("R37_SIM_ROOT", str(fresh_demo_cluster.root(1)))
    _docker.save_image({"Id": "sha256:" + "ab" * 32, "RepoTags": ["tiny:1"], "Size": 1000, "Config": {},
                        "Created": "2026-01-01T00:00:00Z", "Architecture": "arm64", "Os": "linux"})
    ssh = ["ssh", "-F", str(fresh_demo_cluster.dir / "ssh_config"), "-T", "spark-1"]
    run = subprocess.run([*ssh, "docker run -d --name ds41_r37 -e GREETING=hi tiny:1 sleep 600"],
                         capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL)
    assert run.returncode == 0, run.stderr
    inside = cockpit(fresh_demo_cluster, "ssh", "1", "--container", "--", "sh", "-c",
                     'echo "$GREETING $HOSTNAME"; pwd; hostname; nvidia-smi -L >/dev/null && echo gpu')
    assert inside.returncode == 0, inside.stderr
    assert inside.stdout == "hi spark-1\n/\nspark-1\ngpu\n"
    stop = subprocess.run([*ssh, "docker stop -t 0 ds41_r37"], capture_output=True, timeout=60,
                          stdin=subprocess.DEVNULL)
    assert stop.returncode == 0, stop
    stopped = cockpit(fresh_demo_cluster, "ssh", "1", "--container", "--", "true")
    assert stopped.returncode == 1
    assert f"Error response from daemon: container {run.stdout.strip()} is not running" in stopped.stderr
