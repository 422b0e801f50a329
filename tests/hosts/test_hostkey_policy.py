"""Which known_hosts a host is checked against, which SSH settings are refused, how a key is judged,
and how a trusted key is written (no connection: the files and keys themselves)."""

from __future__ import annotations

import os
import stat

import asyncssh
import pytest

from cockpit.config import load_config
from cockpit.hosts import known_hosts as kh
from cockpit.hosts.sshconfig import DEFAULT_GLOBAL, resolve

FIXTURE = os.path.join(os.path.dirname(__file__), "..", "fixtures", "cluster.toml")


@pytest.fixture
def home(tmp_path, monkeypatch):  # type: ignore[no-untyped-def]
    monkeypatch.setenv("HOME", str(tmp_path))
    (tmp_path / ".ssh").mkdir()
    return tmp_path


def policy_for(ssh_config: str | None, home, known_hosts: str | None = None):  # type: ignore[no-untyped-def]
    if ssh_config is not None:
        (home / ".ssh" / "config").write_text(ssh_config)
    cfg = load_config(FIXTURE)
    ssh = cfg.ssh.model_copy(update={"known_hosts": known_hosts})
    return resolve(cfg.hosts[1], ssh), cfg.hosts[1]


@pytest.mark.parametrize("setting", ["UserKnownHostsFile none", "UserKnownHostsFile /dev/null",
                                     "UserKnownHostsFile=/dev/null", "StrictHostKeyChecking no",
                                     "StrictHostKeyChecking off", "StrictHostKeyChecking accept-new",
                                     "stricthostkeychecking=No"])
def test_settings_that_turn_checking_off_are_unsafe(home, setting) -> None:
    policy, _ = policy_for(f"Host *\n  {setting}\n", home)
    assert policy.unsafe and setting.split("=")[-1].split()[-1].lower() in policy.unsafe.lower()
    policy, _ = policy_for(f"Host *\n  {setting}\n", home, known_hosts=str(home / "kh"))
    assert policy.unsafe, "an explicit [ssh] known_hosts does not excuse a setting that turns checks off"


def test_safe_settings_and_other_hosts_blocks_pass(home) -> None:
    policy, _ = policy_for("Host not-this-one\n  UserKnownHostsFile none\n  StrictHostKeyChecking no\n"
                               "Host *\n  StrictHostKeyChecking yes\n", home)
    assert policy.unsafe is None
    assert policy.files == (str(home / ".ssh" / "known_hosts"),) and policy.source == "default"
    assert policy.global_files == DEFAULT_GLOBAL


def test_known_hosts_from_ssh_config_and_from_cluster_toml(home) -> None:
    policy, _ = policy_for("Host *\n  UserKnownHostsFile ~/a %d/b\n  GlobalKnownHostsFile /etc/g\n"
                               "  HostKeyAlias alias-1\n", home)
    assert policy.files == (str(home / "a"), str(home / "b"))
    assert policy.global_files == ("/etc/g",) and policy.write_file == str(home / "a")
    assert policy.lookup == "alias-1"
    policy, _ = policy_for(None, home, known_hosts="~/cockpit_known")
    assert policy.files == (str(home / "cockpit_known"),) and policy.global_files == ()
    policy, _ = policy_for(None, home, known_hosts="/dev/null")
    assert policy.unsafe and "/dev/null" in policy.unsafe


def test_unsafe_proxy_jump_host_is_refused(home) -> None:
    policy, _ = policy_for("Host bastion\n  StrictHostKeyChecking no\nHost *\n  ProxyJump me@bastion:2200\n",
                           home)
    assert policy.unsafe and "bastion" in policy.unsafe


def test_unreadable_ssh_config_is_refused(home) -> None:
    policy, _ = policy_for("Host *\n  Port notanumber\n", home)
    assert policy.unsafe and "cannot read" in policy.unsafe


def _key() -> asyncssh.SSHKey:
    return asyncssh.generate_private_key("ssh-ed25519").convert_to_public()


def test_a_key_is_trusted_unknown_changed_or_revoked(home) -> None:
    policy, entry = policy_for(None, home, known_hosts=str(home / "kh"))
    good, other, bad = _key(), _key(), _key()
    line = kh.entry_line(policy, good)
    want = f"[{entry.ssh}]:{entry.port}" if entry.port not in (None, 22) else entry.ssh
    assert line.split(" ")[0] == want
    known = asyncssh.import_known_hosts(f"{line}\n@revoked {kh.entry_line(policy, bad)}\n")
    assert kh.check(known, policy, "", good).verdict is kh.KeyVerdict.TRUSTED
    changed = kh.check(known, policy, "", other)
    assert changed.verdict is kh.KeyVerdict.CHANGED and changed.known == (kh.fingerprint(good),)
    assert kh.check(known, policy, "", bad).verdict is kh.KeyVerdict.REVOKED
    assert kh.check(asyncssh.import_known_hosts(""), policy, "", good).verdict is kh.KeyVerdict.UNKNOWN


def test_append_line_appends_and_never_rewrites(tmp_path) -> None:
    path = tmp_path / "new" / "known_hosts"
    kh.append_line(str(path), "a ssh-ed25519 AAAA")
    assert path.read_text() == "a ssh-ed25519 AAAA\n"
    assert stat.S_IMODE(path.stat().st_mode) == 0o600 and stat.S_IMODE(path.parent.stat().st_mode) == 0o700
    path.write_text("# kept\nold line without newline")
    kh.append_line(str(path), "b ssh-ed25519 BBBB")
    assert path.read_text() == "# kept\nold line without newline\nb ssh-ed25519 BBBB\n"


def test_same_fingerprint() -> None:
    assert kh.same_fingerprint("SHA256:abc", "abc") and kh.same_fingerprint("SHA256:abc=", "SHA256:abc")
    assert not kh.same_fingerprint("SHA256:abc", "SHA256:abd")
