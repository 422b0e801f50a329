"""A corrupt launch ledger is kept aside and the operator is told, by `status` (text and --json)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from cockpit.recipe.ledger import Ledger


def _status(toml: Path, state: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "XDG_STATE_HOME": str(state)}
    return subprocess.run([sys.executable, "-m", "cockpit", "--config", str(toml), "status", *extra],
                          capture_output=True, text=True, timeout=120, env=env)


def test_status_reports_a_corrupt_ledger_kept_aside(demo_cluster, tmp_path: Path,  # type: ignore[no-untyped-def]
                                                    monkeypatch) -> None:
    state = tmp_path / "state"
    monkeypatch.setenv("XDG_STATE_HOME", str(state))
    path = Ledger(demo_cluster.config).path
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b'{"ranks": {"0": tr')          # a write cut short
    proc = _status(demo_cluster.config_path, state)
    assert "warning:" in proc.stderr and "corrupt" in proc.stderr, proc.stderr
    kept = list(path.parent.glob(path.name + ".corrupt-*"))
    assert len(kept) == 1 and kept[0].read_bytes() == b'{"ranks": {"0": tr'
    path.write_bytes(b"\xff\xfe not json")
    data = json.loads(_status(demo_cluster.config_path, state, "--json").stdout)
    assert [w["code"] for w in data["warnings"]] == ["file-corrupt"]
    assert len(list(path.parent.glob(path.name + ".corrupt-*"))) == 2
