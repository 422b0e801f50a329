"""Host keys on the demo cluster: unknown, changed and revoked keys, a missing known_hosts and an ssh
config that would turn checking off are each refused and reported as themselves; `hosts trust` adds
exactly the key the operator verified."""

from __future__ import annotations

import asyncio
import json
import os
import stat

from hosts.keyfiles import (
    cockpit,
    config_with,
    fake_home,
    fingerprint_of,
    hosts_json,
    known_lines,
    revoked,
    write_known,
    wrong_key,
)

from cockpit.config import load_config
from cockpit.hosts import Fleet, HostState


def mixed_known(demo_cluster, tmp_path):  # type: ignore[no-untyped-def]
    """rank 0: another key (changed), rank 1: no entry (unknown), rank 2: @revoked, rank 3: its own."""
    lines = known_lines(demo_cluster)
    path = write_known(tmp_path / "known_hosts", [wrong_key(lines[0]), revoked(lines[2]), lines[3]])
    return lines, path


async def _settled(fleet: Fleet, timeout: float = 30) -> None:
    for _ in range(int(timeout * 10)):
        if all(s.connected or s.down for s in fleet.statuses):
            return
        await asyncio.sleep(0.1)


def test_hosts_json_tells_changed_unknown_revoked_apart(demo_cluster, tmp_path) -> None:
    lines, known = mixed_known(demo_cluster, tmp_path)
    rc, hosts = hosts_json(config_with(demo_cluster, tmp_path / "c" / "cluster.toml", known))
    assert rc == 1
    assert [hosts[r]["code"] for r in range(4)] == ["host-key-changed", "host-key-unknown",
                                                    "host-key-revoked", None]
    assert hosts[3]["state"] == "connected"
    changed = hosts[0]
    assert changed["state"] == HostState.KEY_CHANGED.value
    assert changed["fingerprint"] == fingerprint_of(lines[0])  # what the host offers now ...
    old = known.read_text().split("\n")[0]  # ... and what known_hosts holds for it
    assert changed["known_fingerprints"] == [fingerprint_of(old)]
    assert changed["known_fingerprints"][0] != changed["fingerprint"]
    assert changed["known_fingerprints"][0] in changed["error"] and changed["fingerprint"] in changed["error"]
    assert "ssh-keygen -R" in changed["remedy"] and str(known) in changed["remedy"]
    unknown = hosts[1]
    fp1 = fingerprint_of(lines[1])
    assert unknown["fingerprint"] == fp1
    cfg = tmp_path / "c" / "cluster.toml"
    assert f"r37-cockpit --config {cfg} hosts trust --rank 1 --fingerprint {fp1}" in unknown["remedy"]
    assert "ssh-keyscan" not in json.dumps(hosts)
    assert hosts[2]["fingerprint"] == fingerprint_of(lines[2]) and "@revoked" in hosts[2]["error"]


async def test_fleet_reports_the_same_states(demo_cluster, tmp_path) -> None:
    _, known = mixed_known(demo_cluster, tmp_path)
    cfg = load_config(config_with(demo_cluster, tmp_path / "c" / "cluster.toml", known))
    async with Fleet(cfg) as fleet:
        await _settled(fleet)
        states = [s.state for s in fleet.statuses]
        assert states == [HostState.KEY_CHANGED, HostState.KEY_UNKNOWN, HostState.KEY_REVOKED,
                          HostState.CONNECTED]
        assert [s.code for s in fleet.statuses] == ["host-key-changed", "host-key-unknown",
                                                    "host-key-revoked", None]
        assert all(fleet[r]._conn is None for r in range(3)), "a refused host got a connection"


def test_missing_known_hosts_is_its_own_state(demo_cluster, tmp_path) -> None:
    missing = tmp_path / "nowhere" / "known_hosts"
    rc, hosts = hosts_json(config_with(demo_cluster, tmp_path / "c" / "cluster.toml", missing))
    assert rc == 1
    assert {h["code"] for h in hosts.values()} == {"known-hosts-missing"}
    assert str(missing) in hosts[0]["error"] and "unreachable" not in hosts[0]["error"]
    assert "hosts trust --rank 0" in hosts[0]["remedy"]
    assert not missing.exists()


def test_ssh_config_turning_checks_off_is_refused_not_obeyed(demo_cluster, tmp_path) -> None:
    """`UserKnownHostsFile none` makes asyncssh validate nothing: the cockpit refuses to connect."""
    home = fake_home(tmp_path / "home", "Host *\n  UserKnownHostsFile none\n")
    for toml_known in (None, demo_cluster.dir / "known_hosts"):
        cfg = config_with(demo_cluster, tmp_path / f"c{toml_known is None}" / "cluster.toml", toml_known)
        rc, hosts = hosts_json(cfg, home=home)
        assert rc == 1
        assert {h["code"] for h in hosts.values()} == {"ssh-config-unsafe"}, hosts
        assert all(h["hostname"] is None for h in hosts.values())
        assert "UserKnownHostsFile none" in hosts[0]["error"]
    res = cockpit(cfg, "hosts", "--timeout", "20", home=home)
    assert res.returncode == 1 and "[ssh-config-unsafe]" in res.stdout


def test_strict_host_key_checking_off_is_refused(demo_cluster, tmp_path) -> None:
    first = demo_cluster.config.hosts[0].ssh
    home = fake_home(tmp_path / "home", f"Host {first}\n  StrictHostKeyChecking accept-new\n")
    rc, hosts = hosts_json(demo_cluster.config_path, home=home)
    assert rc == 1
    assert {h["code"] for h in hosts.values()} == {"ssh-config-unsafe"}
    assert "StrictHostKeyChecking accept-new" in hosts[0]["error"]
    fake_home(home, "Host other-host\n  StrictHostKeyChecking no\n"
                    f"Host {first}\n  StrictHostKeyChecking yes\n")  # not matching / safe: connects
    rc, hosts = hosts_json(demo_cluster.config_path, home=home)
    assert rc == 0, hosts


def test_known_hosts_resolved_from_ssh_config_then_default(demo_cluster, tmp_path) -> None:
    cfg = config_with(demo_cluster, tmp_path / "c" / "cluster.toml", None)
    copy = write_known(tmp_path / "from-config", list(known_lines(demo_cluster).values()))
    rc, hosts = hosts_json(cfg, home=fake_home(tmp_path / "h1", f"Host *\n  UserKnownHostsFile {copy}\n"))
    assert rc == 0 and {h["known_hosts"] for h in hosts.values()} == {str(copy)}
    home2 = fake_home(tmp_path / "h2")
    rc, hosts = hosts_json(cfg, home=home2)
    assert rc == 1 and {h["code"] for h in hosts.values()} == {"known-hosts-missing"}
    assert str(home2 / ".ssh" / "known_hosts") in hosts[0]["error"]
    fake_home(home2, known=list(known_lines(demo_cluster).values()))
    rc, hosts = hosts_json(cfg, home=home2)
    assert rc == 0


def test_trust_adds_exactly_the_verified_key(demo_cluster, tmp_path) -> None:
    lines = known_lines(demo_cluster)
    known = write_known(tmp_path / "known_hosts", [lines[0], lines[2], lines[3]])
    before = known.read_bytes()
    cfg = config_with(demo_cluster, tmp_path / "c" / "cluster.toml", known)
    wrong = fingerprint_of(lines[0])  # a real fingerprint, of another host
    res = cockpit(cfg, "hosts", "trust", "--rank", "1", "--fingerprint", wrong, "--yes", "--json")
    assert res.returncode == 3, res.stdout + res.stderr
    assert json.loads(res.stdout)["error"]["code"] == "fingerprint-mismatch"
    assert known.read_bytes() == before
    fp = fingerprint_of(lines[1])
    res = cockpit(cfg, "hosts", "trust", "--rank", "1", "--fingerprint", fp)  # no --yes, no terminal
    assert res.returncode == 3 and "--yes" in res.stderr
    assert lines[1].split(" ", 1)[1] in res.stdout and str(known) in res.stdout  # the exact line and file
    assert known.read_bytes() == before
    res = cockpit(cfg, "hosts", "trust", "--rank", "1", "--fingerprint", fp, "--yes", "--json")
    assert res.returncode == 0, res.stdout + res.stderr
    out = json.loads(res.stdout)
    assert out["appended"] is True and out["line"] == lines[1]
    assert known.read_bytes() == before + (lines[1] + "\n").encode()
    rc, hosts = hosts_json(cfg)
    assert rc == 0 and hosts[1]["state"] == "connected"
    res = cockpit(cfg, "hosts", "trust", "--rank", "1", "--fingerprint", fp, "--yes", "--json")
    assert res.returncode == 0 and json.loads(res.stdout)["appended"] is False
    assert known.read_bytes() == before + (lines[1] + "\n").encode()


def test_trust_refuses_changed_and_revoked_keys(demo_cluster, tmp_path) -> None:
    lines, known = mixed_known(demo_cluster, tmp_path)
    before = known.read_bytes()
    cfg = config_with(demo_cluster, tmp_path / "c" / "cluster.toml", known)
    res = cockpit(cfg, "hosts", "trust", "--rank", "0", "--fingerprint", fingerprint_of(lines[0]), "--yes",
                  "--json")
    assert res.returncode == 3
    err = json.loads(res.stdout)["error"]
    assert err["code"] == "host-key-changed" and f"ssh-keygen -R '{lines[0].split()[0]}' -f {known}" \
        in err["message"]
    res = cockpit(cfg, "hosts", "trust", "--rank", "2", "--fingerprint", fingerprint_of(lines[2]), "--yes",
                  "--json")
    assert res.returncode == 3 and json.loads(res.stdout)["error"]["code"] == "host-key-revoked"
    assert known.read_bytes() == before


def test_trust_creates_a_missing_file_private(demo_cluster, tmp_path) -> None:
    lines = known_lines(demo_cluster)
    known = tmp_path / "new" / "dir" / "known_hosts"
    cfg = config_with(demo_cluster, tmp_path / "c" / "cluster.toml", known)
    res = cockpit(cfg, "hosts", "trust", "--rank", "3", "--fingerprint", fingerprint_of(lines[3]), "--yes")
    assert res.returncode == 0, res.stdout + res.stderr
    assert known.read_text() == lines[3] + "\n"
    assert stat.S_IMODE(os.stat(known).st_mode) == 0o600
    assert stat.S_IMODE(os.stat(known.parent).st_mode) == 0o700


def test_chat_tunnel_follows_the_same_policy(demo_cluster, tmp_path) -> None:
    """The API tunnel rides rank 0's SSH connection: an unsafe ssh config means no tunnel, said so."""
    home = fake_home(tmp_path / "home", "Host *\n  UserKnownHostsFile none\n")
    res = cockpit(demo_cluster.config_path, "chat", "hi", "--json", home=home)
    assert res.returncode == 1
    api = json.loads(res.stdout)["api"]
    assert api["state"] == "tunnel_down" and "UserKnownHostsFile none" in api["message"]
