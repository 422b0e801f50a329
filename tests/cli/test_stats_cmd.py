"""`r37-cockpit stats` on the demo cluster over real SSH: --once (table, JSON, exit codes, a fault on one
rank, a silent host), --watch (lines per rank, JSON lines, Ctrl-C) and the Prometheus endpoint."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families
from simcluster import SimCluster

from cockpit.sim.faults import set_fault

RANK_FIELDS = {"rank", "host", "sampler", "error", "stale", "age_s", "gpu", "processes", "memory", "ports",
               "clock_events", "xid"}
GPU_FIELDS = {"util", "sm_mhz", "max_sm_mhz", "power_w", "temp_c", "pstate", "name", "timestamp"}
MEMORY_FIELDS = {"kind", "total_bytes", "available_bytes", "engine_bytes", "gpu_total_mib", "gpu_used_mib"}


def argv(cluster: SimCluster, *args: str) -> list[str]:
    return [sys.executable, "-m", "cockpit", "--config", str(cluster.config_path), "stats", *args]


def cli(cluster: SimCluster, *args: str, timeout: float = 90) -> subprocess.CompletedProcess[str]:
    return subprocess.run(argv(cluster, *args), capture_output=True, text=True, timeout=timeout,
                          stdin=subprocess.DEVNULL)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def watch(cluster: SimCluster, *args: str, run_for: float) -> subprocess.CompletedProcess[str]:
    """`stats --watch` for `run_for` seconds from its first line (however long a busy machine takes to
    start it), then Ctrl-C (SIGINT)."""
    proc = subprocess.Popen(argv(cluster, "--watch", *args), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, stdin=subprocess.DEVNULL)
    lines: list[str] = []
    first = threading.Event()

    def read() -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            lines.append(line)
            first.set()

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    try:
        first.wait(120)
        time.sleep(run_for)
        proc.send_signal(signal.SIGINT)
        proc.wait(timeout=30)
        reader.join(10)
        err = proc.stderr.read() if proc.stderr is not None else ""
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    return subprocess.CompletedProcess(proc.args, proc.returncode, "".join(lines), err)


def test_once_json_carries_every_field_of_every_rank_and_exits_0_when_idle(demo_cluster: SimCluster) -> None:
    res = cli(demo_cluster, "--once", "--json")
    assert res.returncode == 0, res.stdout + res.stderr
    data = json.loads(res.stdout)
    assert data["ok"] is True and data["unsampled"] == [] and data["alerts"] == []
    assert data["cluster"] == "sim-demo" and data["interval_s"] == 1.0
    assert [r["rank"] for r in data["ranks"]] == [0, 1, 2, 3]
    for r in data["ranks"]:
        assert set(r) == RANK_FIELDS
        assert set(r["gpu"]) == GPU_FIELDS and set(r["memory"]) == MEMORY_FIELDS
        assert r["sampler"] == "sampling" and r["stale"] is False and r["error"] is None
        assert r["gpu"]["name"] == "NVIDIA GB10" and isinstance(r["gpu"]["util"], int)
        assert isinstance(r["gpu"]["sm_mhz"], int) and r["gpu"]["max_sm_mhz"] > 0
        assert r["memory"]["kind"] == "unified" and r["memory"]["gpu_total_mib"] is None
        assert r["memory"]["available_bytes"] > 0 and r["memory"]["total_bytes"] > 0
        assert r["ports"] and all(p["active"] is True for p in r["ports"])
        assert all(p["tx_gbps"] is not None for p in r["ports"])   # two rounds: rates exist
        assert r["host"].startswith("root@127.0.0.1:")


def test_once_text_table_and_no_alerts(demo_cluster: SimCluster) -> None:
    res = cli(demo_cluster)
    assert res.returncode == 0, res.stdout + res.stderr
    lines = res.stdout.splitlines()
    assert lines[0].split()[:3] == ["RANK", "HOST", "SAMPLER"]
    assert [line.split()[0] for line in lines[1:5]] == ["0", "1", "2", "3"]
    assert all(" sampling " in line for line in lines[1:5])
    assert "no alerts" in res.stdout and "engine: no /metrics read" in res.stdout


def test_low_memory_on_rank_1_alerts_and_exits_1_healing_gives_0(demo_cluster: SimCluster) -> None:
    root = demo_cluster.root(1)
    set_fault(root, "low-memory", True, {"available_gib": 3})
    try:
        res = cli(demo_cluster, "--json")
        text = cli(demo_cluster)
    finally:
        set_fault(root, "low-memory", False)
    assert res.returncode == 1, res.stdout + res.stderr
    data = json.loads(res.stdout)
    assert data["ok"] is False
    assert [(a["kind"], a["rank"], a["severity"]) for a in data["alerts"]] == [("memory-low", 1, "fail")]
    assert "3.0 GiB" in data["alerts"][0]["message"] and data["alerts"][0]["remedy"]
    assert data["ranks"][1]["memory"]["available_bytes"] == 3 << 30
    assert "1 alert(s) active" in res.stderr
    assert text.returncode == 1 and "FAIL rank 1 memory-low" in text.stdout and "what to do:" in text.stdout
    healed = cli(demo_cluster, "--json")
    assert healed.returncode == 0, healed.stdout + healed.stderr
    assert json.loads(healed.stdout)["alerts"] == []


def test_a_silent_host_is_reported_never_fine(fresh_demo_cluster: SimCluster) -> None:
    fresh_demo_cluster.fault(3, "host-down")
    start = time.monotonic()
    res = cli(fresh_demo_cluster, "--json", "--timeout", "6")
    assert time.monotonic() - start < 40
    assert res.returncode == 1, res.stdout + res.stderr
    data = json.loads(res.stdout)
    assert data["ok"] is False
    assert [u["rank"] for u in data["unsampled"]] == [3]
    assert data["ranks"][3]["sampler"] != "sampling" and data["ranks"][3]["gpu"]["util"] is None
    assert "rank 3" in res.stderr and "could not be sampled" in res.stderr
    assert all(data["ranks"][r]["sampler"] == "sampling" for r in (0, 1, 2))


def test_watch_prints_a_line_per_rank_per_interval_and_ctrl_c_exits_0(demo_cluster: SimCluster) -> None:
    res = watch(demo_cluster, "--interval", "0.5", run_for=6)
    assert res.returncode == 0, res.stdout + res.stderr
    assert "Traceback" not in res.stderr and "interrupted" not in res.stderr
    lines = res.stdout.splitlines()
    for rank in range(4):
        mine = [line for line in lines if f" rank {rank}  " in line]
        assert len(mine) >= 3, res.stdout
        assert all("util " in line and " MHz" in line and " GiB avail" in line and "Gb/s" in line
                   for line in mine)


def test_watch_shows_an_alert_beginning_and_clearing(demo_cluster: SimCluster) -> None:
    root = demo_cluster.root(1)
    proc = subprocess.Popen(argv(demo_cluster, "--watch", "--interval", "0.5"), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, stdin=subprocess.DEVNULL)
    lines: list[str] = []

    def read() -> None:
        assert proc.stdout is not None
        lines.extend(iter(proc.stdout.readline, ""))

    def wait_for(text: str, deadline_s: float = 60) -> None:
        """Each step waits for what the watch printed (a loaded machine starts and samples slowly)."""
        t0 = time.monotonic()
        while not any(text in line for line in list(lines)):
            assert proc.poll() is None and time.monotonic() - t0 < deadline_s, (text, "".join(lines))
            time.sleep(0.1)

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    try:
        wait_for(" rank 1 ")
        set_fault(root, "low-memory", True, {"available_gib": 3})
        wait_for("ALERT FAIL rank 1 memory-low")
        set_fault(root, "low-memory", False)
        wait_for("CLEARED FAIL rank 1 memory-low")
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=30)
        reader.join(10)
    finally:
        set_fault(root, "low-memory", False)
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    out = "".join(lines)
    assert proc.returncode == 0, out + err
    began = [i for i, line in enumerate(out.splitlines()) if "ALERT FAIL rank 1 memory-low" in line]
    cleared = [i for i, line in enumerate(out.splitlines()) if "CLEARED FAIL rank 1 memory-low" in line]
    assert len(began) == 1 and len(cleared) == 1 and began[0] < cleared[0], out
    assert any(" rank 1  " in line and "alerts: memory-low" in line for line in out.splitlines())


def test_watch_json_is_one_object_per_interval(demo_cluster: SimCluster) -> None:
    res = watch(demo_cluster, "--json", "--interval", "0.5", run_for=5)
    assert res.returncode == 0, res.stdout + res.stderr
    objects = [json.loads(line) for line in res.stdout.splitlines()]
    assert len(objects) >= 3
    assert all([r["rank"] for r in o["ranks"]] == [0, 1, 2, 3] for o in objects)
    assert objects[-1]["at"] > objects[0]["at"]


def test_watch_serves_the_metrics_endpoint(demo_cluster: SimCluster) -> None:
    port = free_port()
    proc = subprocess.Popen(argv(demo_cluster, "--watch", "--serve-metrics", f"127.0.0.1:{port}"), text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL)
    try:
        text = ""
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            try:
                text = httpx.get(f"http://127.0.0.1:{port}/metrics", timeout=2).text
            except httpx.HTTPError:
                text = ""
            if all(f'rank="{r}"' in line for r in range(4)
                   for line in [" ".join(x for x in text.splitlines()
                                         if x.startswith("r37_gpu_utilization_percent{"))]):
                break
            time.sleep(0.3)
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 0, err
    assert f"serving the stats at http://127.0.0.1:{port}/metrics" in err and "warning" not in err
    util = {s.labels["rank"]: s.value for f in text_string_to_metric_families(text) for s in f.samples
            if s.name == "r37_gpu_utilization_percent"}
    assert set(util) == {"0", "1", "2", "3"}
    with pytest.raises(httpx.ConnectError):
        httpx.get(f"http://127.0.0.1:{port}/metrics", timeout=2)   # stopped with the command


def test_a_port_in_use_is_a_clear_error(demo_cluster: SimCluster) -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen()
        port = sock.getsockname()[1]
        res = cli(demo_cluster, "--watch", "--serve-metrics", f"127.0.0.1:{port}")
    assert res.returncode == 2, res.stdout + res.stderr
    assert f"127.0.0.1:{port} is in use" in res.stderr and "Traceback" not in res.stderr


@pytest.mark.parametrize(("args", "message"), [
    (("--once", "--serve-metrics", "127.0.0.1:9337"), "--serve-metrics serves the stats while watching"),
    (("--serve-metrics", "127.0.0.1:9337"), "add --watch"),
    (("--watch", "--serve-metrics", "nonsense"), "--serve-metrics: 'nonsense' is not HOST:PORT"),
    (("--watch", "--serve-metrics", "127.0.0.1:99999"), "--serve-metrics: "),
    (("--interval", "0"), "--interval 0: give 0.2 to 60 seconds"),
    (("--interval", "nan"), "--interval nan"),
    (("--timeout", "0"), "--timeout 0"),
])
def test_bad_options_name_the_option_and_the_reason(demo_cluster: SimCluster, args: tuple[str, ...],
                                                    message: str) -> None:
    res = cli(demo_cluster, *args)
    assert res.returncode == 2, res.stdout + res.stderr
    assert message in res.stderr and "Traceback" not in res.stderr


def test_config_serve_metrics_is_for_watch_only(demo_cluster: SimCluster, tmp_path: Path) -> None:
    toml = tmp_path / "cluster.toml"
    text = demo_cluster.config_path.read_text()
    toml.write_text(text + '\n[stats]\nserve_metrics = "127.0.0.1:1"\n' if "[stats]" not in text else text)
    res = subprocess.run([sys.executable, "-m", "cockpit", "--config", str(toml), "stats", "--json"],
                         capture_output=True, text=True, timeout=90, env=dict(os.environ))
    assert res.returncode == 0, res.stdout + res.stderr        # --once ignores the config's endpoint
    assert "serving" not in res.stderr


def test_ctrl_c_during_start_up_ends_cleanly_and_soon(demo_cluster: SimCluster) -> None:
    for delay in (0.8, 1.2):   # after the imports, while the channels are being opened
        proc = subprocess.Popen(argv(demo_cluster, "--watch"), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                text=True, stdin=subprocess.DEVNULL)
        try:
            time.sleep(delay)
            start = time.monotonic()
            proc.send_signal(signal.SIGINT)
            _, err = proc.communicate(timeout=20)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.communicate()
        # after the imports it is the watch's own end (0); a loaded machine may still be importing, and
        # Ctrl-C then is an interruption (130) said as such: never a traceback, never a hang
        assert proc.returncode == 0 or (proc.returncode == 130 and "interrupted" in err), err
        assert "Traceback" not in err and time.monotonic() - start < 10
