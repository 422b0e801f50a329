"""`r37-cockpit ssh RANK [--container] [-- CMD…]`: the real OpenSSH client against the demo cluster with the
cockpit's known_hosts (it just works), ssh's exit status, read-only refusal, unknown ranks, no `ssh`."""

from __future__ import annotations

import os
import pty
import select
import shlex
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
from simcluster import SimCluster

from cockpit.cli import build_parser, common, main
from cockpit.cli.ssh_cmd import split_remote
from cockpit.recipe.readonly import command_change

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "cluster.toml"
needs_ssh = pytest.mark.skipif(shutil.which("ssh") is None, reason="needs the OpenSSH client")


def cockpit(cluster: SimCluster, *argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "cockpit", "--config", str(cluster.config_path), *argv],
                          capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL)


@needs_ssh
def test_a_command_on_a_demo_host_with_the_cockpits_own_known_hosts(demo_cluster: SimCluster) -> None:
    hello = cockpit(demo_cluster, "ssh", "1", "--", "echo", "hello world")
    assert hello.returncode == 0, hello.stderr
    assert hello.stdout == "hello world\n"
    shown = hello.stderr.splitlines()[0]     # the exact argv, one line, before anything else
    argv = shlex.split(shown)
    config = demo_cluster.config
    assert argv[0] == "ssh" and argv[-2:] == [config.host(1).ssh, "echo 'hello world'"]
    assert f"UserKnownHostsFile={config.ssh.known_hosts}" in argv and "StrictHostKeyChecking=yes" in argv
    assert argv[argv.index("-p") + 1] == str(config.host(1).port)
    failed = cockpit(demo_cluster, "ssh", "--container", "2", "--", "false")
    assert failed.returncode == 1, failed.stderr                    # ssh's own status, passed on
    assert shlex.split(failed.stderr.splitlines()[0])[-1] == "docker exec -i ds41_r37 false"


@needs_ssh
def test_an_interactive_session_on_a_terminal(demo_cluster: SimCluster) -> None:
    """On a terminal (a pty here) the session asks for one (`-t`) and the operator's lines reach the host's
    shell; leaving it with `exit 4` is the command's exit status."""
    master, slave = pty.openpty()
    proc = subprocess.Popen([sys.executable, "-m", "cockpit", "--config", str(demo_cluster.config_path),
                             "ssh", "2"], stdin=slave, stdout=slave, stderr=slave, close_fds=True)
    os.close(slave)
    seen = b""
    try:
        os.write(master, b"echo marker-$((6*7))\n")
        deadline = time.monotonic() + 60
        while b"marker-42" not in seen and time.monotonic() < deadline:
            if select.select([master], [], [], 1)[0]:
                seen += os.read(master, 65536)
        os.write(master, b"exit 4\n")
        assert proc.wait(timeout=60) == 4, seen
    finally:
        proc.kill()
        os.close(master)
    assert b"marker-42" in seen and b" -t -- " in seen, seen


def test_read_only_refuses_before_anything_runs(demo_cluster: SimCluster) -> None:
    for argv in (["--read-only", "ssh", "1"], ["ssh", "1", "--read-only", "--", "touch", "x"]):
        proc = cockpit(demo_cluster, *argv)
        assert proc.returncode == common.EXIT_REFUSED, proc.stderr
        assert "refused in read-only mode" in proc.stderr and "`ssh`" in proc.stderr
        assert "ssh -F" not in proc.stderr                         # no command line: nothing was run
    assert not (demo_cluster.root(1) / "home" / "x").exists()


def test_options_after_the_rank_and_the_command_after_dashes() -> None:
    parser = build_parser()
    cases = ((["ssh", "1"], False, []), (["ssh", "--container", "1"], True, []),
             (["ssh", "1", "--container"], True, []),
             (["ssh", "1", "--", "ls", "-la", "--", "x"], False, ["ls", "-la", "--", "x"]),
             (["ssh", "1", "--container", "--", "--version"], True, ["--version"]))
    for argv, container, command in cases:
        args = parser.parse_args(argv)
        assert (split_remote(args), args.container) == ((command, []), container), argv
    assert command_change("ssh", {}) is not None
    assert split_remote(parser.parse_args(["ssh", "1", "--contianer", "--", "x"])) == (["x"], ["--contianer"])


def test_unknown_rank_and_missing_ssh_are_clear(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    conf = tmp_path / "cluster.toml"
    shutil.copy(FIXTURE, conf)
    assert main(["--config", str(conf), "ssh", "9"]) == common.EXIT_USAGE
    assert "no host has rank 9 (ranks: 0-3)" in capsys.readouterr().err
    assert main(["--config", str(conf), "ssh", "1", "--contianer"]) == common.EXIT_USAGE
    assert "--contianer after RANK" in capsys.readouterr().err
    assert main(["--config", str(conf), "--read-only", "ssh", "1", "--contianer", "--json"]) == 3
    assert '"code": "read-only"' in capsys.readouterr().out
    monkeypatch.setenv("PATH", str(tmp_path))                      # no `ssh` on it
    assert main(["--config", str(conf), "ssh", "1"]) == common.EXIT_FAILURE
    err = capsys.readouterr().err
    assert "`ssh` is not installed" in err and "openssh-client" in err
