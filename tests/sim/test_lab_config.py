"""What a lab host's sshd gives every session (pure text: the running lab is tested in tests/lab)."""

from __future__ import annotations

from pathlib import Path

from cockpit.sim import layout
from cockpit.sim.lab import HOST_ROOT_MOUNT, sshd_config


def test_every_lab_session_gets_the_host_root(tmp_path: Path) -> None:
    lines = sshd_config(tmp_path, 1, "10.99.7.11").splitlines()
    assert f"SetEnv {layout.ROOT_ENV}={HOST_ROOT_MOUNT}" in lines
    assert HOST_ROOT_MOUNT == "/var/lib/r37-sim"
    assert [ln for ln in lines if ln.startswith("SetEnv")] == [f"SetEnv R37_SIM_ROOT={HOST_ROOT_MOUNT}"]
