"""`sim up --engine vllm` without the real vLLM, and the recipe argv → real CPU vLLM mapping (the real
engine itself: tests/real_vllm/test_sim_engine.py)."""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
from pathlib import Path

from cockpit.sim import realvllm

# what `DRY_RUN=1 bash launch/node.sh 0 cluster.env` prints for rank 0 on a demo cluster (its argv part)
HEAD = shlex.split(
    "vllm serve /srv/models/DeepSeek-V4.1-Flash-dealignai --served-model-name deepseek-v4.1-flash "
    "--trust-remote-code --tensor-parallel-size 4 --distributed-executor-backend mp --nnodes 4 --node-rank 0 "
    "--master-addr 127.88.9.10 --master-port 29543 --host 0.0.0.0 --port 8000 --max-model-len 600000 "
    "--max-num-seqs 8 --gpu-memory-utilization 0.81 --max-num-batched-tokens 4096 --kv-cache-dtype fp8 "
    "--block-size 256 --speculative-config '{\"method\":\"deepseek_mtp\",\"num_speculative_tokens\":3}' "
    "--compilation-config '{\"cudagraph_mode\":\"FULL_AND_PIECEWISE\"}' --limit-mm-per-prompt "
    "'{\"image\":4}' --mm-processor-cache-gb 1")


def _without_vllm(tmp_path: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "R37_VLLM_PYTHON"}
    env["R37_CACHE_DIR"] = str(tmp_path / "empty-cache")
    return env


def test_sim_up_engine_vllm_without_vllm_names_the_script_and_writes_nothing(tmp_path: Path) -> None:
    cluster = tmp_path / "c"
    res = subprocess.run([sys.executable, "-m", "cockpit", "sim", "up", "--engine", "vllm", "--dir",
                          str(cluster), "--json"], capture_output=True, text=True, timeout=120,
                         env=_without_vllm(tmp_path))
    assert res.returncode == 1, res.stdout + res.stderr
    message = json.loads(res.stdout)["error"]["message"]
    assert "scripts/vllm-venv.sh" in message and "R37_VLLM_PYTHON" in message, message
    assert "Traceback" not in res.stderr
    assert not cluster.exists()            # refused before anything was written


def test_a_python_without_vllm_beside_it_is_refused(tmp_path: Path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.setenv("R37_VLLM_PYTHON", sys.executable)     # a python, but no `vllm` next to it
    try:
        realvllm.find_python()
    except realvllm.NotInstalled as exc:
        assert "is not a python beside a `vllm` command" in str(exc) and "vllm-venv.sh" in str(exc)
    else:
        raise AssertionError("a python without vllm was taken for the vLLM environment")


def test_a_complete_environment_in_the_cache_is_found(tmp_path: Path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.delenv("R37_VLLM_PYTHON", raising=False)
    monkeypatch.setenv("R37_CACHE_DIR", str(tmp_path))
    half = tmp_path / "venv-vllm-py311-half" / "bin"        # killed install: no completion marker
    half.mkdir(parents=True)
    (half / "vllm").touch()
    try:
        realvllm.find_python()
        raise AssertionError("a half-made environment was used")
    except realvllm.NotInstalled:
        pass
    done = tmp_path / "venv-vllm-py311-abc" / "bin"
    done.mkdir(parents=True)
    (done / "vllm").touch()
    (done.parent / ".r37-complete").touch()
    assert realvllm.find_python() == done / "python"


def test_the_head_argv_maps_to_what_the_cpu_build_takes() -> None:
    assert realvllm.is_head(HEAD)
    assert not realvllm.is_head([*HEAD[:14], "--headless"])
    assert not realvllm.is_head(["vllm", "serve", "/m", "--node-rank", "2"])
    assert not realvllm.is_head(["nvidia-smi"])
    argv, record = realvllm.real_argv(HEAD, "/v/bin/vllm", "/cache/tiny", "127.88.9.10")
    assert argv[:3] == ["/v/bin/vllm", "serve", "/cache/tiny"]
    flags = dict(zip(argv[3::2], argv[4::2], strict=False))
    assert flags["--host"] == "127.88.9.10" and flags["--port"] == "8000"
    assert flags["--served-model-name"] == "deepseek-v4.1-flash"
    assert flags["--max-model-len"] == "2048" and flags["--max-num-seqs"] == "8"
    assert flags["--dtype"] == "float32" and flags["--reasoning-parser"] == "deepseek_v3"
    for gone in ("--tensor-parallel-size", "--speculative-config", "--kv-cache-dtype", "--nnodes",
                 "--gpu-memory-utilization", "--compilation-config", "--trust-remote-code", "--block-size"):
        assert gone not in argv, gone
    assert "--kv-cache-dtype fp8" in record["dropped"] and "--trust-remote-code" in record["dropped"]
    assert record["head"] == {"nnodes": 4, "addr": "127.88.9.10", "port": 29543}


def test_the_api_never_binds_beyond_loopback() -> None:
    for bind in ("0.0.0.0", "192.168.100.10", "::", ""):
        argv, _ = realvllm.real_argv(HEAD, "vllm", "/m", bind)
        assert argv[argv.index("--host") + 1] == "127.0.0.1", bind


def test_a_single_node_launch_has_no_rendezvous_head() -> None:
    _, record = realvllm.real_argv(["vllm", "serve", "/m", "--port", "8000"], "vllm", "/m", "127.0.0.1")
    assert record["head"] is None


def test_the_engines_environment_has_no_fabric_settings() -> None:
    env = realvllm.real_env({"NCCL_IB_HCA": "rocep1s0f0", "NCCL_SOCKET_IFNAME": "enp1s0f0np0",
                             "GLOO_SOCKET_IFNAME": "enp1s0f0np0", "VLLM_HOST_IP": "127.1.2.10",
                             "PYTHONPATH": "/work", "HF_HUB_OFFLINE": "1", "VLLM_CPU_KVCACHE_SPACE": "2"},
                            "/cache/tiny-model-x")
    assert not [k for k in env if k.startswith("NCCL_")]
    assert "GLOO_SOCKET_IFNAME" not in env and "VLLM_HOST_IP" not in env and "PYTHONPATH" not in env
    assert env["HF_HUB_OFFLINE"] == "1"
    assert env["VLLM_CPU_KVCACHE_SPACE"] == "2"            # the container's own -e wins
    assert env["VLLM_CPU_OMP_THREADS_BIND"] == "nobind"
    assert env["VLLM_CACHE_ROOT"] == "/cache/vllm-compile-cache"
