"""contrib/prometheus: the alerting rules pass `promtool check rules` and their unit tests
(`promtool test rules`), and every r37_* metric the rules and the Grafana dashboard name is one the
exporter serves on the demo cluster."""

from __future__ import annotations

import asyncio
import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest
from prometheus_client import generate_latest
from simcluster import SimCluster

from cockpit.hosts import Fleet
from cockpit.recipe.monitor import StatsMonitor
from cockpit.telemetry.exporter import MetricsServer

CONTRIB = Path(__file__).resolve().parents[2] / "contrib"
RULES = CONTRIB / "prometheus" / "r37-alerts.yml"
RULE_TESTS = CONTRIB / "prometheus" / "r37-alerts.test.yml"
DASHBOARD = CONTRIB / "grafana" / "r37-cockpit.json"
METRIC = re.compile(r"\br37_[a-z0-9_]+")
ALERTS = {"R37ExporterDown", "R37EngineHung", "R37RankDown", "R37ClockLatched", "R37RdmaPortDown",
          "R37RdmaErrors", "R37KvCacheFull", "R37MemAvailableLow", "R37GpuThrottled", "R37GpuXid",
          "R37KernelLogUnreadable"}


def promtool() -> str:
    found = shutil.which("promtool")
    if found is None:
        pytest.skip("promtool is not installed (./scripts/test fetches it from Debian's prometheus package "
                    "where apt-get works)")
    return found


def test_promtool_check_rules() -> None:
    res = subprocess.run([promtool(), "check", "rules", str(RULES)], capture_output=True, text=True,
                         timeout=120)
    assert res.returncode == 0, res.stdout + res.stderr
    assert f"SUCCESS: {len(ALERTS)} rules found" in res.stdout


def test_promtool_test_rules() -> None:
    res = subprocess.run([promtool(), "test", "rules", RULE_TESTS.name], capture_output=True, text=True,
                         timeout=120, cwd=RULE_TESTS.parent)
    assert res.returncode == 0, res.stdout + res.stderr
    assert "SUCCESS" in res.stdout


def test_every_alert_has_a_unit_test_that_fires_it() -> None:
    rules = RULES.read_text()
    tests = RULE_TESTS.read_text()
    assert set(re.findall(r"alert: (\w+)", rules)) == ALERTS
    fired = set(re.findall(r"alertname: (\w+)\n\s+exp_alerts:\n\s+- exp_labels", tests))
    assert fired == ALERTS


def _names(text: str) -> set[str]:
    return set(METRIC.findall(text))


def test_dashboard_is_valid_json_with_queries() -> None:
    dash = json.loads(DASHBOARD.read_text())
    exprs = [t["expr"] for p in dash["panels"] for t in p["targets"]]
    assert dash["uid"] == "r37-cockpit" and len(exprs) >= 10


async def _exporter_text(cluster: SimCluster) -> str:
    cfg = cluster.config
    async with Fleet(cfg) as fleet:
        assert await fleet.wait_connected(20)
        async with StatsMonitor(fleet, cfg, None, 0.5) as mon:
            assert await mon.first_sample(30)
            mon.judge()
            return generate_latest(MetricsServer(mon.stats).registry).decode()


def test_every_metric_named_exists_in_the_exporters_output(demo_cluster: SimCluster) -> None:
    text = asyncio.run(_exporter_text(demo_cluster))
    served = {line.split()[2] for line in text.splitlines() if line.startswith("# TYPE ")}
    assert "r37_gpu_utilization_percent" in served
    named = _names(RULES.read_text()) | _names(DASHBOARD.read_text())
    assert len(named) >= 15
    assert named <= served, f"not served by the exporter: {sorted(named - served)}"
