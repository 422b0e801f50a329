"""The stats model in Prometheus text format: a custom collector and its own HTTP server.

`StatsCollector.collect()` builds every family from the `ClusterStats` at scrape time (read-only: the
model's readings are immutable snapshots, the collector copies the rank table before reading it). Every
per-rank series carries `cluster` and `rank` (ports also `hca` and `port`, GPU processes `pid`); the
engine's series are rank 0's; the cluster-wide `r37_alerts` carries `cluster` only, an alert of the
whole cluster has `rank=""`. An unknown value is left out (absent, never 0); a stale rank's readings
are left out too: only its `r37_stats_age_seconds` and `r37_rank_stale 1` say it is there.

`MetricsServer` serves it with prometheus_client's own HTTP server on its own registry, loopback by
default; any other bind address is served with a warning on stderr.
"""

from __future__ import annotations

import errno
import sys
import threading
import time
from collections.abc import Callable, Iterator
from typing import IO, Any

from prometheus_client import CollectorRegistry, start_http_server
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from cockpit.loopback import is_loopback
from cockpit.telemetry.cluster_stats import ClusterStats, RankStats, stale_after
from cockpit.telemetry.engine_stats import EngineStatsReading
from cockpit.telemetry.gpu_events import REASONS

MIB = 1 << 20
RANK = ("cluster", "rank")
PORT = ("cluster", "rank", "hca", "port")

# name, help, GpuReading attribute
GPU_GAUGES = (
    ("r37_gpu_utilization_percent", "GPU utilisation (nvidia-smi utilization.gpu), percent", "util"),
    ("r37_gpu_sm_clock_mhz", "Current SM clock, MHz", "sm"),
    ("r37_gpu_max_sm_clock_mhz", "Maximum SM clock the GPU reports, MHz", "max_sm"),
    ("r37_gpu_power_watts", "GPU power draw, watts", "power_w"),
    ("r37_gpu_temperature_celsius", "GPU temperature, degrees Celsius", "temp_c"),
)
# name, help, MemoryStats attribute, factor to bytes
MEMORY_GAUGES = (
    ("r37_memory_total_bytes", "MemTotal of the rank, bytes", "total_bytes", 1),
    ("r37_memory_available_bytes", "MemAvailable of the rank, bytes", "available_bytes", 1),
    ("r37_memory_engine_bytes", "Memory the GPU's compute processes hold, bytes", "engine_bytes", 1),
    ("r37_gpu_memory_total_bytes", "Discrete GPU memory, bytes", "gpu_total_mib", MIB),
    ("r37_gpu_memory_used_bytes", "Discrete GPU memory in use, bytes", "gpu_used_mib", MIB),
)
# name, help, EngineStatsReading attribute
ENGINE_GAUGES = (
    ("r37_engine_requests_running", "Requests the engine is running", "running"),
    ("r37_engine_requests_waiting", "Requests waiting in the engine's queue", "waiting"),
    ("r37_engine_kv_cache_usage_ratio", "KV cache usage, 0..1", "kv_cache_usage"),
    ("r37_engine_generation_tokens_per_second", "Generated tokens per second", "generation_tokens_per_s"),
    ("r37_engine_prompt_tokens_per_second", "Prompt tokens per second", "prompt_tokens_per_s"),
    ("r37_engine_prefix_cache_hit_ratio", "Prefix cache hits per query, 0..1", "prefix_cache_hit_rate"),
    ("r37_engine_spec_acceptance_ratio", "Speculative draft tokens accepted, 0..1", "spec_acceptance_rate"),
    ("r37_engine_spec_mean_acceptance_length", "Mean tokens per speculative step",
     "spec_mean_acceptance_length"),
    ("r37_engine_preemptions_increase", "Preemptions since the previous /metrics read", "preemptions"),
)
QUANTILES = (("0.5", "p50"), ("0.9", "p90"), ("0.99", "p99"))


def _fresh(s: RankStats, interval_s: float, now: float) -> bool:
    return not s.stale(interval_s, now)


class StatsCollector(Collector):
    """Every family of the stats model, built at scrape time; `clock` is time.time (tests pass theirs)."""

    def __init__(self, stats: ClusterStats, clock: Callable[[], float] | None = None) -> None:
        self.stats = stats
        self.clock = clock or time.time

    def collect(self) -> Iterator[Metric]:
        stats, now = self.stats, self.clock()
        cluster, interval = stats.cluster, stats.interval_s
        ranks = sorted(dict(stats.ranks).items())
        fresh = [(r, s) for r, s in ranks if _fresh(s, interval, now)]
        yield from self._ranks(cluster, ranks, fresh, interval, now)
        yield from self._gpu_events(cluster, ranks, fresh)
        yield from self._ports(cluster, fresh)
        yield from self._engine(cluster, stats.engine, interval, now)
        yield from self._alerts(cluster, stats)

    def _ranks(self, cluster: str, ranks: list[tuple[int, RankStats]], fresh: list[tuple[int, RankStats]],
               interval: float, now: float) -> Iterator[Metric]:
        age = GaugeMetricFamily("r37_stats_age_seconds", "Seconds since the newest reading", labels=RANK)
        stale = GaugeMetricFamily("r37_rank_stale", "1 while the rank has no current readings", labels=RANK)
        sampling = GaugeMetricFamily("r37_rank_sampling", "1 while the sampler is sampling", labels=RANK)
        for r, s in ranks:
            a = s.age(now)
            if a is not None:
                age.add_metric([cluster, str(r)], a)
            stale.add_metric([cluster, str(r)], float(s.stale(interval, now)))
            sampling.add_metric([cluster, str(r)], float(s.sampler == "sampling"))
        yield from (age, stale, sampling)
        for name, text, attr in GPU_GAUGES:
            fam = GaugeMetricFamily(name, text, labels=RANK)
            for r, s in fresh:
                value = getattr(s.gpu, attr) if s.gpu is not None else None
                if value is not None:
                    fam.add_metric([cluster, str(r)], float(value))
            yield fam
        for name, text, attr, factor in MEMORY_GAUGES:
            fam = GaugeMetricFamily(name, text, labels=RANK)
            for r, s in fresh:
                value = getattr(s.memory, attr) if s.memory is not None else None
                if value is not None:
                    fam.add_metric([cluster, str(r)], float(value * factor))
            yield fam
        procs = GaugeMetricFamily("r37_gpu_process_memory_bytes", "GPU memory a compute process holds",
                                  labels=(*RANK, "pid"))
        for r, s in fresh:
            for app in s.apps:
                if app.used_mib is not None:
                    procs.add_metric([cluster, str(r), str(app.pid)], float(app.used_mib * MIB))
        yield procs

    def _gpu_events(self, cluster: str, ranks: list[tuple[int, RankStats]],
                    fresh: list[tuple[int, RankStats]]) -> Iterator[Metric]:
        """Clock event reasons of fresh ranks that report them (every known reason, 0 or 1); Xid lines read
        per rank and Xid (a counter of this cockpit's process); whether the kernel log is readable (absent
        while not known)."""
        active = GaugeMetricFamily("r37_gpu_clock_event_active",
                                   "1 while nvidia-smi reports the clock event reason active, else 0",
                                   labels=(*RANK, "reason"))
        for r, s in fresh:
            mask = s.gpu.event_reasons if s.gpu is not None else None
            if mask is None:
                continue
            for name, (bit, _label) in REASONS.items():
                active.add_metric([cluster, str(r), name], float(bool(mask & bit)))
        xid = CounterMetricFamily("r37_gpu_xid", "NVRM Xid lines read from the rank's kernel log",
                                  labels=(*RANK, "xid"))
        readable = GaugeMetricFamily("r37_gpu_kernel_log_readable",
                                     "1 when the rank's kernel log (Xid lines) can be read, 0 when not",
                                     labels=RANK)
        for r, s in ranks:
            for n, count in sorted(s.xid_total.items()):
                xid.add_metric([cluster, str(r), str(n)], float(count))
            if s.klog.readable is not None:
                readable.add_metric([cluster, str(r)], float(s.klog.readable))
        yield from (active, xid, readable)

    def _ports(self, cluster: str, fresh: list[tuple[int, RankStats]]) -> Iterator[Metric]:
        # Prometheus' naming rules (`promtool check metrics`): base units (bytes, not bits), and no type
        # word ("counter") in a gauge's name
        tx = GaugeMetricFamily("r37_rdma_transmit_bytes_per_second", "RDMA port transmit rate, bytes/s",
                               labels=PORT)
        rx = GaugeMetricFamily("r37_rdma_receive_bytes_per_second", "RDMA port receive rate, bytes/s",
                               labels=PORT)
        up = GaugeMetricFamily("r37_rdma_port_up", "1 when the port is ACTIVE, 0 when not", labels=PORT)
        inc = GaugeMetricFamily("r37_rdma_hw_events_increase",
                                "Increase of a port's hardware error counter since the last round",
                                labels=(*PORT, "counter"))
        for r, s in fresh:
            for p in s.ports:
                labels = [cluster, str(r), p.hca, str(p.port)]
                if p.tx_gbps is not None:
                    tx.add_metric(labels, p.tx_gbps * 1e9 / 8)
                if p.rx_gbps is not None:
                    rx.add_metric(labels, p.rx_gbps * 1e9 / 8)
                if p.active is not None:
                    up.add_metric(labels, float(p.active))
                for counter, value in sorted(p.changes.items()):
                    inc.add_metric([*labels, counter], float(value))
        yield from (tx, rx, up, inc)

    def _engine(self, cluster: str, e: EngineStatsReading | None, interval: float,
                now: float) -> Iterator[Metric]:
        labels = [cluster, "0"]
        age = GaugeMetricFamily("r37_engine_stats_age_seconds", "Seconds since rank 0's /metrics was read",
                                labels=RANK)
        if e is not None:
            age.add_metric(labels, max(0.0, now - e.at))
        yield age
        current = e is not None and e.error is None and now - e.at <= stale_after(interval)
        for name, text, attr in ENGINE_GAUGES:
            fam = GaugeMetricFamily(name, text, labels=RANK)
            value = getattr(e, attr) if current and e is not None else None
            if value is not None:
                fam.add_metric(labels, float(value))
            yield fam
        for name, text, prefix in (("r37_engine_ttft_seconds", "Time to first token over the window", "ttft"),
                                   ("r37_engine_itl_seconds", "Inter-token latency over the window", "itl")):
            # a gauge: the "quantile" label is a summary's only (promtool), so the percentile is named
            fam = GaugeMetricFamily(name, text, labels=(*RANK, "percentile"))
            for _q, suffix in QUANTILES:
                value = getattr(e, f"{prefix}_{suffix}_s") if current and e is not None else None
                if value is not None:
                    fam.add_metric([*labels, suffix], float(value))
            yield fam
        done = GaugeMetricFamily("r37_engine_requests_finished_increase",
                                 "Requests finished since the previous /metrics read, by reason",
                                 labels=(*RANK, "finished_reason"))
        if current and e is not None and e.request_success:
            for reason, value in sorted(e.request_success.items()):
                done.add_metric([*labels, reason], float(value))
        yield done

    def _alerts(self, cluster: str, stats: ClusterStats) -> Iterator[Metric]:
        alerts = stats.alerts
        active = GaugeMetricFamily("r37_alert_active", "1 for every active alert",
                                   labels=("cluster", "kind", "rank", "severity"))
        for a in alerts:
            active.add_metric([cluster, a.kind, "" if a.rank is None else str(a.rank), a.severity], 1.0)
        yield active
        count = GaugeMetricFamily("r37_alerts", "Number of active alerts", labels=("cluster",))
        count.add_metric([cluster], float(len(alerts)))
        yield count


class ExporterError(Exception):
    """The endpoint cannot be served (the address is in use, not this machine's, …): one sentence."""


def bind_warning(host: str, port: int) -> str | None:
    """The warning a non-loopback bind address gets (None for loopback)."""
    if is_loopback(host):
        return None
    return (f"warning: serving the stats on {host}:{port}, reachable from other machines: anyone who can "
            "reach it reads the cluster's stats (bind 127.0.0.1 and scrape through an SSH tunnel to keep it "
            "private)")


class MetricsServer:
    """prometheus_client's HTTP server over one `StatsCollector` on its own registry; `close()` stops it."""

    def __init__(self, stats: ClusterStats, host: str = "127.0.0.1", port: int = 0,
                 clock: Callable[[], float] | None = None) -> None:
        self.host = host
        self.requested_port = port
        self.registry = CollectorRegistry(auto_describe=False)
        self.registry.register(StatsCollector(stats, clock))
        self._server: Any = None
        self._thread: threading.Thread | None = None

    @property
    def port(self) -> int:
        return int(self._server.server_address[1]) if self._server is not None else self.requested_port

    @property
    def url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}/metrics"

    def start(self, warn: IO[str] | None = None) -> MetricsServer:
        """Serve; a non-loopback address first prints its warning on `warn` (default stderr)."""
        try:
            self._server, self._thread = start_http_server(self.requested_port, self.host,
                                                           registry=self.registry)
        except OSError as exc:
            if exc.errno == errno.EADDRINUSE:
                raise ExporterError(f"{self.host}:{self.requested_port} is in use by another program: "
                                    "pick another port") from None
            if exc.errno == errno.EADDRNOTAVAIL:
                raise ExporterError(f"{self.host} is not an address of this machine") from None
            if exc.errno == errno.EACCES:
                raise ExporterError(f"port {self.requested_port} is privileged: use one above 1023") from None
            raise ExporterError(f"cannot serve on {self.host}:{self.requested_port}: "
                                f"{exc.strerror or exc}") from None
        warning = bind_warning(self.host, self.port)
        if warning:
            print(warning, file=warn or sys.stderr, flush=True)
        return self

    def close(self) -> None:
        if self._server is None:
            return
        self._server.shutdown()
        self._server.server_close()
        if self._thread is not None:
            self._thread.join(5)
        self._server, self._thread = None, None

    def __enter__(self) -> MetricsServer:
        return self.start() if self._server is None else self

    def __exit__(self, *exc: object) -> None:
        self.close()
