"""Copies of a simulated cluster's client files with chosen known_hosts entries, for host key tests
(demo and lab alike: both write DIR/known_hosts with one `[addr]:port key` line per rank)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import asyncssh
from simcluster import SimCluster


def known_lines(cluster: SimCluster) -> dict[int, str]:
    """Rank -> its line of the cluster's own known_hosts."""
    lines = (cluster.dir / "known_hosts").read_text().split("\n")
    out = {}
    for h in cluster.config.hosts:
        pattern = h.ssh if not h.port or h.port == 22 else f"[{h.ssh}]:{h.port}"
        out[h.rank] = next(line for line in lines if line.split(" ", 1)[0] == pattern)
    return out


def fingerprint_of(line: str) -> str:
    """SHA256 fingerprint of the key of a known_hosts line."""
    key = line.removeprefix("@revoked ").split(" ", 1)[1]
    return asyncssh.import_public_key(key).get_fingerprint("sha256")


def wrong_key(line: str) -> str:
    """The same host with another (fresh) key: what a changed host key looks like."""
    other = asyncssh.generate_private_key("ssh-ed25519").export_public_key().decode().strip()
    return f"{line.split(' ', 1)[0]} {other}"


def revoked(line: str) -> str:
    return "@revoked " + line


def write_known(path: Path, lines: list[str]) -> Path:
    path.write_text("".join(line + "\n" for line in lines))
    return path


def config_with(cluster: SimCluster, dest: Path, known_hosts: Path | None) -> Path:
    """A copy of the cluster's cluster.toml whose `[ssh] known_hosts` is `known_hosts` (None: unset, so
    the cockpit resolves it from ~/.ssh/config or ~/.ssh/known_hosts)."""
    text = cluster.config_path.read_text()
    line = f"known_hosts = {json.dumps(str(known_hosts))}" if known_hosts is not None else ""
    text, n = re.subn(r"^known_hosts = .*$", line, text, count=1, flags=re.M)
    assert n == 1
    dest.parent.mkdir(parents=True, exist_ok=True)
    dest.write_text(text)
    return dest


def fake_home(home: Path, ssh_config: str | None = None, known: list[str] | None = None) -> Path:
    """A $HOME with an `.ssh/config` and/or `.ssh/known_hosts` of the test's choosing."""
    ssh = home / ".ssh"
    ssh.mkdir(parents=True, exist_ok=True, mode=0o700)
    if ssh_config is not None:
        (ssh / "config").write_text(ssh_config)
    if known is not None:
        write_known(ssh / "known_hosts", known)
    return home


def cockpit(config: Path, *args: str, home: Path | None = None,
            timeout: float = 90) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ)
    if home is not None:
        env["HOME"] = str(home)
    return subprocess.run([sys.executable, "-m", "cockpit", "--config", str(config), *args],
                          capture_output=True, text=True, timeout=timeout, env=env, stdin=subprocess.DEVNULL)


def hosts_json(config: Path, home: Path | None = None) -> tuple[int, dict[int, dict]]:
    """`r37-cockpit hosts --json`: its exit code and each rank's host object."""
    res = cockpit(config, "hosts", "--json", "--timeout", "20", home=home)
    data = json.loads(res.stdout)
    return res.returncode, {h["rank"]: h for h in data["hosts"]}
