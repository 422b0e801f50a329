"""The phase and failure rules on what real vLLM 0.32 (the CPU build) printed: captures in
tests/fixtures/samples/real-vllm-0.32-cpu (the live server's own log: tests/real_vllm)."""

from __future__ import annotations

import pytest
from vllmread import read_boot, sample

from cockpit.recipe.phases import (
    Phase,
    is_access_log,
    match_failure,
    match_phase,
    match_stats,
)

ULIMIT_WARNING = (
    "(APIServer pid=28884) WARNING 12-03 21:36:46 [system_utils.py:255] Found ulimit of 20000 and failed to "
    "automatically increase with error current limit exceeds maximum limit. This can cause fd limit errors "
    "like `OSError: [Errno 24] Too many open files`. Consider increasing with ulimit -n"
)
ACCESS = 'INFO:     127.0.0.1:43686 - "GET /health HTTP/1.1" 200 OK'


@pytest.mark.parametrize("name", ["startup-run1.log", "startup-run2.log"])
def test_real_boot_log_goes_through_the_phases_without_a_failure(name: str) -> None:
    reading = read_boot(sample(name).splitlines())
    assert reading.failure is None, (reading.failure, reading.cause)
    assert reading.phases == (Phase.LAUNCHED, Phase.RUNNING, Phase.DIST_INIT, Phase.LOADING, Phase.KV_CACHE,
                              Phase.API_START)


def test_a_warning_that_names_an_error_is_not_that_error() -> None:
    assert ULIMIT_WARNING in sample("startup-run1.log")
    assert match_failure(ULIMIT_WARNING) is None
    # the error itself, as a traceback's last line or an ERROR line, still is
    rule = match_failure("OSError: [Errno 24] Too many open files: '/srv/models/x/model.safetensors'")
    assert rule is not None and rule.name == "too-many-open-files"
    rule = match_failure("(EngineCore pid=7) ERROR 12-03 21:37:09 [core.py:708] OSError: [Errno 24] Too many "
                         "open files")
    assert rule is not None and rule.name == "too-many-open-files"


def test_the_api_up_and_kv_cache_lines_of_0_32() -> None:
    assert match_phase("(APIServer pid=1) INFO 12-03 21:38:34 [entry.py:140] Starting vLLM server on "
                       "http://127.0.0.1:8000", 0) is Phase.API_START
    assert match_phase("(EngineCore pid=954) INFO 12-03 21:38:30 [kv_cache_utils.py:2327] CPU KV cache size: "
                       "524,288 tokens", 0) is Phase.KV_CACHE


def test_the_stats_lines_of_0_32_are_read() -> None:
    lines = sample("stats-lines-run1.log").splitlines()
    read = [match_stats(line) for line in lines if "Avg prompt throughput" in line]
    assert read and all(r is not None for r in read)
    assert read[3] == (13.6, 324.7, 4, 0)


def test_access_log_lines_are_recognised() -> None:
    lines = sample("startup-run1.log").splitlines()
    access = [line for line in lines if is_access_log(line)]
    assert access and all('HTTP/1.1"' in line for line in access)
    assert not is_access_log("INFO:     Application startup complete.")
    assert not is_access_log("INFO:     Waiting for connections to close. (CTRL+C to force quit)")


def test_access_log_lines_do_not_crowd_out_the_failure_context() -> None:
    boot = sample("startup-run2.log").splitlines()
    probes = [ACCESS] * 600    # 20 minutes of the cockpit's own probes, every 2 s
    crash = ["(EngineCore pid=954) ERROR 12-03 22:00:00 [core.py:1100] EngineCore encountered a fatal error.",
             "Traceback (most recent call last):",
             '  File "/x/core.py", line 1, in run', "RuntimeError: CUDA error: an illegal memory access"]
    reading = read_boot(boot + probes + crash)
    assert reading.failure == "CUDA error on this rank's GPU"
    assert not any(is_access_log(line) for line in reading.context)
    assert "Starting vLLM server on http://127.0.0.1:8000" in "\n".join(reading.context)


@pytest.mark.parametrize("name", ["shutdown-run1-sigterm.log", "shutdown-run2-sigterm-with-open-stream.log",
                                  "shutdown-run3-sigterm-midstream-abort.log",
                                  "shutdown-run4-sigterm-two-open-streams.log"])
def test_a_stop_is_no_failure(name: str) -> None:
    boot = sample("startup-run2.log").splitlines()
    reading = read_boot(boot + sample(name).splitlines(), stop_at=len(boot))
    assert reading.failure is None
