"""The stable error codes: published once, in the README, and reachable from every typed failure."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import typing
from pathlib import Path

import pytest

from cockpit.api.stream import ErrorKind
from cockpit.cli.common import CliError, error_json
from cockpit.errorcodes import CODES, check, code_for_api_kind

README = Path(__file__).resolve().parents[2] / "README.md"


def test_readme_lists_every_code_and_no_other() -> None:
    text = README.read_text()
    section = text.split("### Error codes", 1)[1].split("\n## ", 1)[0]
    listed = re.findall(r"^\| `([a-z0-9-]+)` \|", section, re.M)
    assert listed == list(CODES), "README Error codes table out of date: python scripts/errorcodes_table.py"


def test_every_api_error_kind_has_its_own_code() -> None:
    for kind in typing.get_args(ErrorKind):
        code = code_for_api_kind(kind)
        assert code in CODES
        assert code == "api-" + kind.replace("_", "-"), f"{kind} falls back to {code}"


def test_unpublished_code_is_a_bug() -> None:
    with pytest.raises(KeyError):
        check("no-such-code")
    with pytest.raises(KeyError):
        CliError("x", code="made-up")


def test_error_json_shape() -> None:
    out = error_json("usage", "bad --rank")
    assert out == {"ok": False, "error": {"code": "usage", "message": "bad --rank",
                                          "remedy": CODES["usage"].remedy}}


def test_cli_json_error_carries_code(tmp_path: Path) -> None:
    proc = subprocess.run([sys.executable, "-m", "cockpit", "--config", str(tmp_path / "nope.toml"),
                           "hosts", "--json"], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2
    data = json.loads(proc.stdout)
    assert data["error"]["code"] == "config-missing"
    assert "nope.toml" in data["error"]["message"]
