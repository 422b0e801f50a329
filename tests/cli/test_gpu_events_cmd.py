"""Clock event reasons and Xid errors end to end on a demo cluster of its own, over real SSH: the sim's
nvidia-smi and journalctl stand-ins print the real formats, the sampler channel reads them, the alert rules
judge them and `stats --json` / `--watch --json` / the Prometheus endpoint show them per rank.

Rank 1 runs hot (`gpu-thermal`): an alert once held, cleared when the fault ends. Rank 2 logs Xid 79
(`xid`): a critical alert with its remedy, cleared when the line is older than `xid_alert_s`. Rank 3's
kernel log cannot be read (`klog-denied`): "not readable" with the reason, never "no Xid", and no alert
claims anything of it."""

from __future__ import annotations

import json
import signal
import subprocess
import threading
import time
from typing import Any

import httpx
from prometheus_client.parser import text_string_to_metric_families
from simcluster import SimCluster
from test_stats_cmd import argv, cli, free_port

XID_WINDOW_S = 12


def _short_xid_window(cluster: SimCluster) -> None:
    """This test's cluster only: an Xid alert lasts XID_WINDOW_S (the default hour would outlast the test)."""
    text = cluster.config_path.read_text()
    assert "[stats]" not in text
    cluster.config_path.write_text(text + f"\n[stats]\nxid_alert_s = {XID_WINDOW_S}\nthrottle_hold_s = 2\n")


class Watch:
    """`stats --watch --json` in the background: every object it printed, in order."""

    def __init__(self, cluster: SimCluster, *args: str) -> None:
        self.objects: list[dict[str, Any]] = []
        self.port = free_port()
        self.proc = subprocess.Popen(argv(cluster, "--watch", "--json", "--interval", "0.5",
                                          "--serve-metrics", f"127.0.0.1:{self.port}", *args),
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                     stdin=subprocess.DEVNULL)
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.objects.append(json.loads(line))

    def until(self, what, timeout: float, why: str) -> dict[str, Any]:  # type: ignore[no-untyped-def]
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.objects and what(self.objects[-1]):
                return self.objects[-1]
            assert self.proc.poll() is None, self.proc.stderr.read() if self.proc.stderr else ""
            time.sleep(0.2)
        last = self.objects[-1] if self.objects else None
        raise AssertionError(f"{why}: last object {json.dumps(last)[:3000]}")

    def stop(self) -> str:
        self.proc.send_signal(signal.SIGINT)
        try:
            _, err = self.proc.communicate(timeout=30)
        finally:
            if self.proc.poll() is None:
                self.proc.kill()
                self.proc.communicate()
        return err


def _alerts(obj: dict[str, Any]) -> dict[tuple[str, int], dict[str, Any]]:
    return {(a["kind"], a["rank"]): a for a in obj["alerts"]}


def test_throttle_xid_and_an_unreadable_kernel_log(fresh_demo_cluster: SimCluster) -> None:
    cluster = fresh_demo_cluster
    _short_xid_window(cluster)
    # a one-off sample: every rank idle (the real idle mask), every kernel log readable, nothing found
    res = cli(cluster, "--json")
    assert res.returncode == 0, res.stdout + res.stderr
    for r in json.loads(res.stdout)["ranks"]:
        events = r["clock_events"]
        assert events["mask"] == "0x0000000000000001" and events["active"] == ["gpu_idle"]
        assert r["xid"]["readable"] is True and r["xid"]["source"] == "journalctl"
        assert r["xid"]["recent"] == [] and r["xid"]["total"] == {}

    cluster.fault(3, "klog-denied")
    watch = Watch(cluster)
    try:
        first = watch.until(lambda o: o["ranks"][3]["xid"]["readable"] is False, 60, "rank 3 unreadable")
        x3 = first["ranks"][3]["xid"]
        assert "may not read the system journal" in x3["reason"] and "systemd-journal" in x3["reason"]
        assert x3["recent"] == [] and first["alerts"] == []         # unknown: no alert, and never "none"

        cluster.fault(1, "gpu-thermal")
        from cockpit.sim.faults import set_fault
        set_fault(cluster.root(2), "xid", True, {"xid": 79})
        both = watch.until(lambda o: {("gpu-thermal", 1), ("gpu-xid", 2)} <= set(_alerts(o)), 60,
                           "thermal and Xid alerts")
        thermal, xid = _alerts(both)[("gpu-thermal", 1)], _alerts(both)[("gpu-xid", 2)]
        assert thermal["severity"] == "fail" and "HW thermal" in thermal["message"]
        assert "airflow" in thermal["remedy"]
        assert xid["severity"] == "fail" and xid["message"].startswith("Xid 79 GPU has fallen off the bus")
        assert xid["remedy"].startswith("Xid 79: ") and "power-cycle" in xid["remedy"]
        assert {k[1] for k in _alerts(both)} == {1, 2}              # only the faulty ranks
        assert both["ranks"][1]["clock_events"]["active"] == ["gpu_idle", "sw_thermal_slowdown",
                                                              "hw_thermal_slowdown"]
        assert [e["xid"] for e in both["ranks"][2]["xid"]["recent"]] == [79]
        assert both["ranks"][2]["xid"]["total"] == {"79": 1}

        text = httpx.get(f"http://127.0.0.1:{watch.port}/metrics", timeout=5).text
        samples = [s for f in text_string_to_metric_families(text) for s in f.samples]
        active = {(s.labels["rank"], s.labels["reason"]): s.value for s in samples
                  if s.name == "r37_gpu_clock_event_active"}
        assert active[("1", "hw_thermal_slowdown")] == 1.0 and active[("0", "hw_thermal_slowdown")] == 0.0
        xids = {(s.labels["rank"], s.labels["xid"]): s.value for s in samples
                if s.name == "r37_gpu_xid_total"}
        assert xids == {("2", "79"): 1.0}
        readable = {s.labels["rank"]: s.value for s in samples if s.name == "r37_gpu_kernel_log_readable"}
        assert readable == {"0": 1.0, "1": 1.0, "2": 1.0, "3": 0.0}

        text = cli(cluster)                                         # the one-off table says the same
        assert text.returncode == 1, text.stdout + text.stderr
        lines = text.stdout.splitlines()
        assert "  rank 1: clocks idle, SW thermal, HW thermal; Xid none (journalctl)" in lines
        assert any(line.startswith("  rank 2: clocks idle; Xid 79 GPU has fallen off the bus (critical, ")
                   for line in lines)
        assert any(line.startswith("  rank 3: clocks idle; Xid not readable: journalctl: this login may not "
                                   "read the system journal") for line in lines)
        assert "FAIL rank 2 gpu-xid: Xid 79 GPU has fallen off the bus" in text.stdout

        cluster.fault(1, "gpu-thermal", on=False)
        healed = watch.until(lambda o: not o["alerts"], XID_WINDOW_S + 40, "thermal healed, Xid aged out")
        assert healed["ranks"][2]["xid"]["total"] == {"79": 1}       # still counted, no longer alerting
        assert healed["ranks"][3]["xid"]["readable"] is False
    finally:
        err = watch.stop()
    assert watch.proc.returncode == 0, err
    assert "Traceback" not in err
