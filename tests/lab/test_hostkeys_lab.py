"""Host keys against real OpenSSH sshd in the lab: the same refusals as on the demo cluster."""

from __future__ import annotations

import asyncio
import json

import pytest
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

pytestmark = pytest.mark.lab


async def test_changed_unknown_revoked_and_trusted_keys(lab_cluster, tmp_path) -> None:
    lines = known_lines(lab_cluster)
    known = write_known(tmp_path / "known_hosts", [wrong_key(lines[0]), revoked(lines[2]), lines[3]])
    cfg = load_config(config_with(lab_cluster, tmp_path / "c" / "cluster.toml", known))
    async with Fleet(cfg) as fleet:
        for _ in range(300):
            if all(s.connected or s.down for s in fleet.statuses):
                break
            await asyncio.sleep(0.1)
        assert [s.state for s in fleet.statuses] == [HostState.KEY_CHANGED, HostState.KEY_UNKNOWN,
                                                     HostState.KEY_REVOKED, HostState.CONNECTED]
        assert fleet[0].status.fingerprint == fingerprint_of(lines[0])
        assert fleet[0].status.known_fingerprints == (fingerprint_of(known.read_text().split("\n")[0]),)
        assert fleet[1].status.fingerprint == fingerprint_of(lines[1])
        assert f"--fingerprint {fingerprint_of(lines[1])}" in (fleet[1].status.remedy or "")


def test_missing_known_hosts_and_unsafe_ssh_config(lab_cluster, tmp_path) -> None:
    rc, hosts = hosts_json(config_with(lab_cluster, tmp_path / "c" / "cluster.toml", tmp_path / "none"))
    assert rc == 1 and {h["code"] for h in hosts.values()} == {"known-hosts-missing"}
    unsafe = "Host *\n  UserKnownHostsFile /dev/null\n  StrictHostKeyChecking no\n"
    home = fake_home(tmp_path / "home", unsafe)
    rc, hosts = hosts_json(lab_cluster.config_path, home=home)
    assert rc == 1 and {h["code"] for h in hosts.values()} == {"ssh-config-unsafe"}
    assert all(h["hostname"] is None for h in hosts.values())


def test_trust_with_the_verified_fingerprint_connects(lab_cluster, tmp_path) -> None:
    lines = known_lines(lab_cluster)
    known = write_known(tmp_path / "known_hosts", [lines[0], lines[1], lines[3]])
    cfg = config_with(lab_cluster, tmp_path / "c" / "cluster.toml", known)
    before = known.read_bytes()
    res = cockpit(cfg, "hosts", "trust", "--rank", "2", "--fingerprint", fingerprint_of(lines[1]), "--yes",
                  "--json")
    assert res.returncode == 3 and json.loads(res.stdout)["error"]["code"] == "fingerprint-mismatch"
    assert known.read_bytes() == before
    res = cockpit(cfg, "hosts", "trust", "--rank", "2", "--fingerprint", fingerprint_of(lines[2]), "--yes",
                  "--json")
    assert res.returncode == 0, res.stdout + res.stderr
    assert known.read_bytes() == before + (lines[2] + "\n").encode()
    rc, hosts = hosts_json(cfg)
    assert rc == 0 and hosts[2]["hostname"] == "spark-2"
