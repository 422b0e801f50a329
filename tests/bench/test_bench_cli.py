"""`r37-cockpit bench`: bad input is refused before anything is sent; progress lines."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest

from cockpit.bench.records import RequestRecord
from cockpit.bench.runner import CellStarted, Note, RequestDone
from cockpit.cli import main
from cockpit.cli.bench_cmd import Progress, request_line


def test_a_bad_prompt_file_is_a_usage_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "p.json"
    bad.write_text(json.dumps({"format": "r37-cockpit.bench.prompts", "version": 1, "categories": {}}))
    assert main(["bench", "--api-url", "http://127.0.0.1:9", "--prompts", str(bad)]) == 2
    assert f"prompt set: {bad}: categories: must be a non-empty object" in capsys.readouterr().err


def test_an_existing_out_dir_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["bench", "--api-url", "http://127.0.0.1:9", "--out", str(tmp_path)]) == 2
    assert "never overwrites" in capsys.readouterr().err


def test_a_bad_compare_dir_is_a_usage_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["bench", "--api-url", "http://127.0.0.1:9", "--compare", str(tmp_path)]) == 2
    assert "--compare:" in capsys.readouterr().err


def test_an_unreachable_api_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "run"
    assert main(["bench", "--api-url", "http://127.0.0.1:9", "--out", str(out)]) == 3
    assert "benchmark refused: API not ready" in capsys.readouterr().err
    assert not out.exists()


def _done(ok: bool = True) -> RequestDone:
    rec = RequestRecord(12, "decode", "prose C8", "prose", 8, 400, 10, "x", ok=ok, completion_tokens=400)
    if not ok:
        rec.error = {"kind": "server_error", "message": "boom\x1b[31m", "status": None}
    return RequestDone("prose C8", rec, 3, 27, 12.0, 30.0)


def test_request_lines() -> None:
    assert request_line(_done()) == "[ 3/27] prose C8 #12  ok    400 tok"
    line = request_line(_done(ok=False))
    assert "FAIL" in line and "server_error: boom" in line and "\x1b" not in line


def test_progress_without_a_terminal_prints_lines_only() -> None:
    out = io.StringIO()
    p = Progress(out)
    p(CellStarted("prose C8", 2, 10, 8, 65.0))
    p(_done())
    p(Note("left out: prefill 128k"))
    p.close()
    assert out.getvalue().splitlines() == ["== prose C8 (2/10, 8 requests) at 01:05",
                                           "[ 3/27] prose C8 #12  ok    400 tok",
                                           "warning: left out: prefill 128k"]
