"""The interactive `ssh` command line: the cockpit's user, port, identity, ssh config and host-key policy,
never weaker (checked with the real OpenSSH client's `ssh -G`, which prints the settings it would use),
the container's `docker exec`, and a trailing command quoted word by word."""

from __future__ import annotations

import shlex
import shutil
import subprocess
from pathlib import Path

import pytest

from cockpit.config import ClusterConfig, HostEntry, SSHSection
from cockpit.hosts.shell_login import (
    CONTAINER_SHELL,
    KeyFiles,
    ShellRefused,
    key_files,
    login_argv,
    remote_line,
    shell_argv,
)
from cockpit.hosts.sshconfig import DEFAULT_GLOBAL

needs_ssh = pytest.mark.skipif(shutil.which("ssh") is None, reason="needs the OpenSSH client")


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A HOME of the test's own: its ~/.ssh/config and ~/.ssh/known_hosts are the test's."""
    monkeypatch.setenv("HOME", str(tmp_path))
    (tmp_path / ".ssh").mkdir()
    return tmp_path


def entry(config: ClusterConfig, **changes: object) -> HostEntry:
    return config.host(1).model_copy(update=changes)


def effective(argv: list[str]) -> dict[str, list[str]]:
    """What OpenSSH would use for this command line (`ssh -G`: prints the settings, connects nowhere)."""
    out = subprocess.run([argv[0], "-G", *argv[1:]], capture_output=True, text=True, timeout=30,
                         check=True, stdin=subprocess.DEVNULL).stdout
    found: dict[str, list[str]] = {}
    for key, _, value in (line.partition(" ") for line in out.splitlines()):
        found.setdefault(key, []).append(value)
    return found


def test_user_port_identity_and_the_strict_policy(fixed_config: ClusterConfig) -> None:
    ssh = SSHSection(identity_file="/keys/id_ed25519", connect_timeout=2.5, keepalive_interval=0.5,
                     keepalive_count_max=4)
    argv = login_argv(entry(fixed_config, user="op", port=2222), ssh,
                      KeyFiles(("/kh/a", "/kh/b"), ("/etc/ssh/ssh_known_hosts",), "/home/op/.ssh/config"))
    assert argv[:9] == ["ssh", "-F", "/home/op/.ssh/config", "-l", "op", "-p", "2222", "-i",
                        "/keys/id_ed25519"]
    opts = [argv[i + 1] for i, word in enumerate(argv) if word == "-o"]
    assert opts == ["StrictHostKeyChecking=yes", "UserKnownHostsFile=/kh/a /kh/b",
                    "GlobalKnownHostsFile=/etc/ssh/ssh_known_hosts", "KnownHostsCommand=none",
                    "VerifyHostKeyDNS=no", "UpdateHostKeys=no", "ConnectTimeout=3", "ServerAliveInterval=1",
                    "ServerAliveCountMax=4"]
    assert argv[-3:] == ["-t", "--", "spark-1"]   # a login shell: no remote command


def test_no_user_port_or_identity_leaves_them_to_the_ssh_config(fixed_config: ClusterConfig) -> None:
    argv = login_argv(entry(fixed_config), SSHSection(keepalive_interval=0), KeyFiles(("/kh",)))
    assert "-l" not in argv and "-p" not in argv and "-i" not in argv
    assert argv[1:3] == ["-F", "none"] and "GlobalKnownHostsFile=none" in argv
    assert "ServerAliveInterval=0" in argv    # keepalive off stays off
    with pytest.raises(ValueError, match="no known_hosts"):
        login_argv(entry(fixed_config), SSHSection(), KeyFiles(()))


def test_container_and_trailing_commands_are_quoted_word_by_word() -> None:
    hostile = ["echo", "a b", "$(id)", "x;rm -rf ~", "it's"]
    assert shlex.split(remote_line(None, hostile, tty=True) or "") == hostile
    assert remote_line(None, (), tty=True) is None
    assert shlex.split(remote_line("ds41_r37", (), tty=True) or "") == ["docker", "exec", "-it", "ds41_r37",
                                                                       *CONTAINER_SHELL]
    assert CONTAINER_SHELL[-1] == "command -v bash >/dev/null && exec bash || exec sh"
    assert shlex.split(remote_line("ds41_r37", hostile, tty=False) or "") == ["docker", "exec", "-i",
                                                                             "ds41_r37", *hostile]


def test_without_a_terminal_none_is_asked_for(fixed_config: ClusterConfig) -> None:
    argv = login_argv(entry(fixed_config), SSHSection(), KeyFiles(("/kh",)), container="c", command=["ls"],
                      tty=False)
    assert "-T" in argv and "-t" not in argv and argv[-1] == "docker exec -i c ls"


def test_the_config_known_hosts_alone_is_checked(fixed_config: ClusterConfig, home: Path) -> None:
    known = home / "cluster known_hosts"
    known.write_text("")
    config = fixed_config.model_copy(update={"ssh": SSHSection(known_hosts=str(known))})
    argv = shell_argv(config, 1, container=True)
    assert f'UserKnownHostsFile="{known}"' in argv and "GlobalKnownHostsFile=none" in argv
    assert argv[-1] == shlex.join(["docker", "exec", "-it", fixed_config.cluster.container_name,
                                   *CONTAINER_SHELL])


def test_refused_where_the_cockpit_would_not_connect(fixed_config: ClusterConfig, home: Path) -> None:
    with pytest.raises(ShellRefused, match="no known_hosts file") as missing:
        shell_argv(fixed_config, 1)
    assert missing.value.code == "known-hosts-missing"
    (home / ".ssh" / "known_hosts").write_text("")
    for setting in ("StrictHostKeyChecking no", "StrictHostKeyChecking accept-new", "UserKnownHostsFile none",
                    "UserKnownHostsFile /dev/null"):
        (home / ".ssh" / "config").write_text(f"Host spark-1\n  {setting}\n")
        with pytest.raises(ShellRefused, match="does not connect") as unsafe:
            shell_argv(fixed_config, 1)
        assert unsafe.value.code == "ssh-config-unsafe"
    (home / ".ssh" / "config").write_text("Host spark-1\n  ProxyJump jump\nHost jump\n"
                                          "  StrictHostKeyChecking no\n")
    with pytest.raises(ShellRefused, match="ProxyJump"):
        shell_argv(fixed_config, 1)
    (home / ".ssh" / "config").write_text("Host spark-0\n  StrictHostKeyChecking no\n")
    assert shell_argv(fixed_config, 1)[:3] == ["ssh", "-F", str(home / ".ssh" / "config")]  # not this host


@needs_ssh
def test_openssh_uses_the_cockpit_settings_nothing_weaker(fixed_config: ClusterConfig, home: Path) -> None:
    """The ssh config's user, port, ProxyJump and key files are the cockpit's too; its looser host-key
    settings that the cockpit ignores (DNS, key updates, a KnownHostsCommand) are overridden."""
    kh = home / "odd dir" / "known_hosts % 10.0.0.5"   # `%%` and `%h` in the config, expanded by the policy
    kh.parent.mkdir()
    kh.write_text("")
    (home / ".ssh" / "config").write_text(
        f'Host spark-1\n  HostName 10.0.0.5\n  User cfguser\n  Port 2200\n  ProxyJump hop.example:2022\n'
        f'  UserKnownHostsFile "{kh.parent}/known_hosts %% %h"\n  VerifyHostKeyDNS yes\n'
        '  UpdateHostKeys yes\n  KnownHostsCommand /bin/echo %H ssh-ed25519 AAAA\n'
        '  StrictHostKeyChecking ask\n')
    got = effective(shell_argv(fixed_config, 1))
    assert [got[k] for k in ("hostname", "user", "port", "proxyjump")] == [
        ["10.0.0.5"], ["cfguser"], ["2200"], ["hop.example:2022"]]
    assert got["userknownhostsfile"] == [str(kh)]     # the space and the % survive as one literal file
    assert got["stricthostkeychecking"] == ["true"] and got["verifyhostkeydns"] == ["false"]
    assert got["updatehostkeys"] == ["false"] and "knownhostscommand" not in got
    plain = effective(["ssh", "-F", str(home / ".ssh" / "config"), "spark-1"])   # the test can fail:
    assert plain["verifyhostkeydns"] == ["true"] and "knownhostscommand" in plain   # the config alone
    glob = [f for f in DEFAULT_GLOBAL if Path(f).is_file()]
    assert got["globalknownhostsfile"] == [" ".join(glob) or "none"]   # the policy's, as they exist
    # the cluster.toml's user, port and identity win over the ssh config's, as for the cockpit
    (home / "id_test").write_text("")   # OpenSSH leaves out an identity file that does not exist
    ssh = SSHSection(identity_file=str(home / "id_test"))
    config = fixed_config.model_copy(update={"ssh": ssh, "hosts": [
        h.model_copy(update={"user": "op", "port": 2222}) if h.rank == 1 else h for h in fixed_config.hosts]})
    got = effective(shell_argv(config, 1))
    assert (got["user"], got["port"]) == (["op"], ["2222"])
    assert str(home / "id_test") in got["identityfile"]


def test_key_files_are_the_policy_files(fixed_config: ClusterConfig, home: Path) -> None:
    (home / ".ssh" / "known_hosts").write_text("")
    files = key_files(fixed_config.host(1), fixed_config.ssh)
    assert files.user == (str(home / ".ssh" / "known_hosts"),)
    assert files.ssh_config is None     # no ~/.ssh/config: OpenSSH reads none either (`-F none`)
