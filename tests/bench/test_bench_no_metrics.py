"""`bench --api-url` against a server that cannot be shown idle: no /metrics (HTTP 404), or llama.cpp's
llama-server started without `--metrics` (HTTP 501). Refused with a remedy for that status (not the one
for a 500); with `--force` the run goes on and its records say idleness was not checked. A server with
llama.cpp's metric families is checked by those. Through the CLI (a subprocess), against the second
OpenAI-compatible test server (tests/fixtures/openai_server.py); tests/real_llama/test_llama_differential.py
requires the real llama-server's 501 to read the same."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from cockpit.api.errors import REMEDY_SERVER_FAILED, from_status

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "fixtures"))
from openai_server import LLAMA_501, LLAMA_NO_METRICS, OpenAIServer

REPO = Path(__file__).resolve().parents[2]
KEY = "sk-bench-PLANTED-77aa88bb99cc"


def bench(tmp: Path, url: str, *extra: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "OPENAI_API_KEY"}
    env.update(HOME=str(tmp), XDG_CONFIG_HOME=str(tmp / ".config"), XDG_STATE_HOME=str(tmp / ".state"),
               XDG_CACHE_HOME=str(tmp / ".cache"), OPENAI_API_KEY=KEY,
               PYTHONPATH=str(REPO) + os.pathsep + env.get("PYTHONPATH", ""))
    return subprocess.run([sys.executable, "-m", "cockpit", "bench", "--suite", "quick", "--api-url", url,
                           "--idle", "1", "--concurrency", "1", *extra], cwd=tmp, env=env,
                          capture_output=True, text=True, timeout=300)


def test_a_501_is_not_explained_as_a_500() -> None:
    err = from_status(501, json.dumps(LLAMA_NO_METRICS).encode(), "http://h/metrics")
    assert err.status == 501 and LLAMA_501 in err.message
    assert err.remedy != REMEDY_SERVER_FAILED and "501 Not Implemented" in err.remedy
    assert "model" not in err.remedy and "500" not in err.remedy


@pytest.mark.parametrize("status", ["501", "404"])
def test_no_metrics_refuses_then_runs_with_force_and_marks_the_records(tmp_path: Path, status: str) -> None:
    with OpenAIServer(KEY, metrics=status) as server:
        refused = bench(tmp_path, server.url)
        assert refused.returncode == 3, refused.stderr
        reason, remedy = refused.stderr.splitlines()[:2]
        assert "benchmark refused: whether the API is idle cannot be checked" in reason
        assert f"HTTP {status} from {server.url}/metrics" in reason
        if status == "501":
            assert "Start it with `--metrics`" in reason
        assert remedy.startswith("  remedy: ") and "`--force`" in remedy and "--metrics" in remedy
        assert "500" not in remedy and "model" not in remedy

        out = tmp_path / "run"
        forced = bench(tmp_path, server.url, "--force", "-o", str(out))
        # the test server sends no usage, so the run may fail later; what matters is that it ran, marked
        assert forced.returncode in (0, 1), forced.stderr
        assert "warning: idleness not checked" in forced.stderr
        config = json.loads((out / "config.json").read_text())
        assert config["idle_checked"] is False
        assert config["idle_check"].startswith(f"idleness not checked: {server.url}/metrics answered HTTP "
                                               f"{status}")
        summary = json.loads((out / "summary.json").read_text())
        assert any(n.startswith("idleness not checked") for n in summary["notes"])
        assert "idleness not checked" in (out / "summary.md").read_text()


def test_llamacpp_metrics_are_the_idle_check(tmp_path: Path) -> None:
    with OpenAIServer(KEY, metrics="llamacpp") as server:
        out = tmp_path / "run"
        run = bench(tmp_path, server.url, "-o", str(out))
        assert run.returncode in (0, 1), run.stderr          # not refused: idle by llama.cpp's gauges
        assert "idleness not checked" not in run.stderr
        assert json.loads((out / "config.json").read_text())["idle_checked"] is True
