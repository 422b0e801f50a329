"""The Prometheus endpoint: scraped over HTTP, parsed with prometheus_client's own parser."""

from __future__ import annotations

import io
import os
import shutil
import socket
import subprocess

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from cockpit.loopback import is_loopback
from cockpit.telemetry.cluster_stats import Alert, ClusterStats, MemoryStats
from cockpit.telemetry.engine_stats import EngineStatsReading
from cockpit.telemetry.exporter import ExporterError, MetricsServer, bind_warning
from cockpit.telemetry.gpu import GpuReading
from cockpit.telemetry.host_sample import GpuApp
from cockpit.telemetry.rdma import PortStats

NOW = 1_000_000.0
GIB = 1 << 30


def model() -> ClusterStats:
    st = ClusterStats([0, 1, 2], 1.0, "alpha")
    st.update(0, sampler="sampling", gpu_at=NOW - 0.5, round_at=NOW - 0.5,
              gpu=GpuReading(util=87, sm=2400, max_sm=3003, power_w=61.5, temp_c=55),
              apps=(GpuApp(305, "vllm", 2048), GpuApp(306, "x", None)),
              memory=MemoryStats("discrete", 128 * GIB, 20 * GIB, None, gpu_total_mib=143771,
                                 gpu_used_mib=100),
              ports=(PortStats("mlx5_0", 1, "4: ACTIVE", True, 12.5, 0.5, {"out_of_sequence": 3}),
                     PortStats("mlx5_1", 1, "1: DOWN", False)))
    # rank 1: read once, long ago (stale); rank 2: never read
    st.update(1, sampler="sampling", gpu_at=NOW - 100, round_at=NOW - 100, gpu=GpuReading(util=50))
    st.set_engine(EngineStatsReading(at=NOW - 1, running=3, waiting=0, kv_cache_usage=0.25,
                                     generation_tokens_per_s=120.0, ttft_p50_s=0.2, ttft_p99_s=0.9,
                                     itl_p90_s=0.03, request_success={"stop": 2.0, "length": 0.0}))
    st.set_alerts((Alert("memory-low", 0, NOW - 10, "low", "free it"),
                   Alert("engine-hung", None, NOW - 2, "hung", "look", "warn")))
    return st


def scrape(stats: ClusterStats) -> dict[str, dict[tuple[tuple[str, str], ...], float]]:
    with MetricsServer(stats, "127.0.0.1", 0, clock=lambda: NOW) as server:
        assert server.port != 0
        res = httpx.get(server.url, timeout=5)
    assert res.status_code == 200
    out: dict[str, dict[tuple[tuple[str, str], ...], float]] = {}
    for fam in text_string_to_metric_families(res.text):
        for s in fam.samples:
            out.setdefault(s.name, {})[tuple(sorted(s.labels.items()))] = s.value
    return out


def lab(**labels: str) -> tuple[tuple[str, str], ...]:
    return tuple(sorted(labels.items()))


def test_rank_series_carry_cluster_and_rank_and_the_values() -> None:
    m = scrape(model())
    assert m["r37_gpu_utilization_percent"] == {lab(cluster="alpha", rank="0"): 87.0}
    assert m["r37_gpu_sm_clock_mhz"][lab(cluster="alpha", rank="0")] == 2400
    assert m["r37_gpu_max_sm_clock_mhz"][lab(cluster="alpha", rank="0")] == 3003
    assert m["r37_gpu_power_watts"][lab(cluster="alpha", rank="0")] == 61.5
    assert m["r37_gpu_temperature_celsius"][lab(cluster="alpha", rank="0")] == 55
    assert m["r37_memory_available_bytes"] == {lab(cluster="alpha", rank="0"): 20 * GIB}
    assert m["r37_memory_total_bytes"][lab(cluster="alpha", rank="0")] == 128 * GIB
    assert m["r37_gpu_memory_total_bytes"][lab(cluster="alpha", rank="0")] == 143771 * (1 << 20)
    assert "r37_memory_engine_bytes" not in m          # unknown: absent, never 0
    assert m["r37_gpu_process_memory_bytes"] == {lab(cluster="alpha", rank="0", pid="305"): 2048 * (1 << 20)}


def test_a_stale_or_unread_rank_has_only_its_age_and_stale_flag() -> None:
    m = scrape(model())
    for name in ("r37_gpu_utilization_percent", "r37_memory_available_bytes", "r37_rdma_port_up"):
        assert not any(dict(k)["rank"] in ("1", "2") for k in m.get(name, {})), name
    assert m["r37_stats_age_seconds"] == {lab(cluster="alpha", rank="0"): 0.5,
                                          lab(cluster="alpha", rank="1"): 100.0}
    assert m["r37_rank_stale"] == {lab(cluster="alpha", rank="0"): 0.0, lab(cluster="alpha", rank="1"): 1.0,
                                   lab(cluster="alpha", rank="2"): 1.0}


def test_port_series_carry_hca_and_port() -> None:
    m = scrape(model())
    up = lab(cluster="alpha", rank="0", hca="mlx5_0", port="1")
    down = lab(cluster="alpha", rank="0", hca="mlx5_1", port="1")
    assert m["r37_rdma_port_up"] == {up: 1.0, down: 0.0}
    assert m["r37_rdma_transmit_bytes_per_second"] == {up: 12.5e9 / 8}
    assert m["r37_rdma_receive_bytes_per_second"] == {up: 0.5e9 / 8}
    assert m["r37_rdma_hw_events_increase"] == {
        lab(cluster="alpha", rank="0", hca="mlx5_0", port="1", counter="out_of_sequence"): 3.0}


def test_engine_gauges_and_quantiles() -> None:
    m = scrape(model())
    head = lab(cluster="alpha", rank="0")
    assert m["r37_engine_requests_running"] == {head: 3.0}
    assert m["r37_engine_requests_waiting"] == {head: 0.0}
    assert m["r37_engine_kv_cache_usage_ratio"] == {head: 0.25}
    assert m["r37_engine_generation_tokens_per_second"] == {head: 120.0}
    assert "r37_engine_prefix_cache_hit_ratio" not in m
    assert m["r37_engine_ttft_seconds"] == {lab(cluster="alpha", rank="0", percentile="p50"): 0.2,
                                            lab(cluster="alpha", rank="0", percentile="p99"): 0.9}
    assert m["r37_engine_itl_seconds"] == {lab(cluster="alpha", rank="0", percentile="p90"): 0.03}
    assert m["r37_engine_stats_age_seconds"] == {head: 1.0}
    assert m["r37_engine_requests_finished_increase"][
        lab(cluster="alpha", rank="0", finished_reason="stop")] == 2.0


def test_a_stale_engine_reading_is_not_exported_as_current() -> None:
    st = model()
    st.set_engine(EngineStatsReading(at=NOW - 60, running=3))
    m = scrape(st)
    assert "r37_engine_requests_running" not in m
    assert m["r37_engine_stats_age_seconds"] == {lab(cluster="alpha", rank="0"): 60.0}


def test_alerts() -> None:
    m = scrape(model())
    assert m["r37_alert_active"] == {
        lab(cluster="alpha", kind="memory-low", rank="0", severity="fail"): 1.0,
        lab(cluster="alpha", kind="engine-hung", rank="", severity="warn"): 1.0}
    assert m["r37_alerts"] == {lab(cluster="alpha"): 2.0}
    st = model()
    st.set_alerts(())
    m = scrape(st)
    assert "r37_alert_active" not in m and m["r37_alerts"] == {lab(cluster="alpha"): 0.0}


def test_scrape_sees_the_model_as_it_is_now() -> None:
    st = model()
    with MetricsServer(st, "127.0.0.1", 0, clock=lambda: NOW) as server:
        before = httpx.get(server.url, timeout=5).text
        st.update(0, gpu=GpuReading(util=3))
        after = httpx.get(server.url, timeout=5).text
    assert 'r37_gpu_utilization_percent{cluster="alpha",rank="0"} 87.0' in before
    assert 'r37_gpu_utilization_percent{cluster="alpha",rank="0"} 3.0' in after


def test_close_stops_serving() -> None:
    server = MetricsServer(model(), "127.0.0.1", 0).start()
    port = server.port
    server.close()
    with pytest.raises(httpx.ConnectError):
        httpx.get(f"http://127.0.0.1:{port}/metrics", timeout=2)
    server.close()  # twice is harmless


def test_a_port_in_use_is_a_clear_error() -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen()
        port = sock.getsockname()[1]
        with pytest.raises(ExporterError, match=rf"127.0.0.1:{port} is in use"):
            MetricsServer(model(), "127.0.0.1", port).start()


def test_loopback_is_quiet_any_other_address_warns() -> None:
    assert is_loopback("127.0.0.1") and is_loopback("::1") and is_loopback("localhost")
    assert not is_loopback("0.0.0.0") and not is_loopback("10.0.0.5") and not is_loopback("spark-0")
    assert bind_warning("127.0.0.1", 9337) is None
    warning = bind_warning("0.0.0.0", 9337)
    assert warning is not None and "0.0.0.0:9337" in warning and "other machines" in warning
    quiet = io.StringIO()
    with MetricsServer(model(), "127.0.0.1", 0).start(warn=quiet):
        pass
    assert quiet.getvalue() == ""
    loud = io.StringIO()
    server = MetricsServer(model(), "0.0.0.0", 0).start(warn=loud)
    try:
        assert httpx.get(f"http://127.0.0.1:{server.port}/metrics", timeout=5).status_code == 200
    finally:
        server.close()
    assert loud.getvalue().startswith("warning: serving the stats on 0.0.0.0:")


def test_the_exposition_passes_promtool() -> None:
    """Prometheus' own lint (`promtool check metrics`: naming, units, label rules) finds nothing."""
    promtool = shutil.which("promtool")
    if promtool is None:
        if os.geteuid() == 0:
            pytest.fail("promtool is missing: scripts/test installs it (apt-get install prometheus)")
        pytest.skip("promtool is not installed and we are not root (apt-get install prometheus)")
    with MetricsServer(model(), "127.0.0.1", 0, clock=lambda: NOW) as server:
        text = httpx.get(server.url, timeout=5).text
    assert "r37_rdma_transmit_bytes_per_second" in text and "r37_engine_ttft_seconds" in text
    done = subprocess.run([promtool, "check", "metrics"], input=text, capture_output=True, text=True,
                          timeout=60)
    assert (done.returncode, done.stdout + done.stderr) == (0, ""), done.stdout + done.stderr
