"""Clock event reasons and Xid lines: the parsers on real bytes and hostile ones, the sampler channel's
kernel-log reader run by a real bash against stand-in tools, the sampler's per-rank state, and the alert
rules (hold, window, severity). The whole path on a demo cluster: tests/cli/test_gpu_events_cmd.py."""

from __future__ import annotations

import calendar
import os
import subprocess
from pathlib import Path

from prometheus_client import generate_latest
from prometheus_client.parser import text_string_to_metric_families
from prometheus_client.registry import CollectorRegistry

from cockpit.cli.stats_cmd import watch_line
from cockpit.config import StatsSection
from cockpit.hosts.shell import kernel_log_reader
from cockpit.hosts.state import HostState, HostStatus
from cockpit.recipe.alerts import findings
from cockpit.telemetry.cluster_stats import ClusterStats, RankStats
from cockpit.telemetry.exporter import StatsCollector
from cockpit.telemetry.gpu import GpuParseError, GpuReading, parse_gpu_line
from cockpit.telemetry.gpu_events import (
    KlogStatus,
    XidEvent,
    parse_reason_mask,
    parse_xid_line,
    reasons_of,
)
from cockpit.telemetry.host_sample import KlogNote, SamplerReader, ToolExit
from cockpit.telemetry.sampler import _RankSampler
from cockpit.telemetry.stats_json import stats_dict

SAMPLES = Path(__file__).parents[1] / "fixtures" / "samples" / "h200"
QUERY = ["index", "name", "uuid", "pci.bus_id", "driver_version", "pstate", "utilization.gpu",
         "utilization.memory", "temperature.gpu", "power.draw", "power.limit", "clocks.sm", "clocks.max.sm",
         "clocks.mem", "memory.total", "memory.used", "memory.free", "clocks_event_reasons.active",
         "fan.speed", "compute_mode"]
# real kernel lines (an RTX 5080 on driver 595, NVIDIA developer forum thread "Xid 62 GSP watchdog timeout"):
# Xids without `pid=`/`name=`
REAL_62 = ("NVRM: Xid (PCI:0000:01:00): 62, 323f0f30 0000c3d8 00000000 206dae68 206da022 206da190 206d85f6 "
           "206d8d86")
REAL_154 = ("NVRM: Xid (PCI:0000:01:00): 154, GPU recovery action changed from 0x0 (None) to 0x1 (GPU Reset "
            "Required)")
NOW = 1_800_000_000.0
T0 = calendar.timegm((2027, 1, 15, 8, 0, 0, 0, 0, 0))                     # 2027-01-15T08:00:00Z
CFG = StatsSection()


# ---- parsers -------------------------------------------------------------------------------------------

def test_real_h200_query_line_carries_the_idle_reason() -> None:
    line = (SAMPLES / "smi-query.csv").read_text().splitlines()[0]
    got = parse_gpu_line(line, QUERY)
    assert isinstance(got, GpuReading) and got.event_reasons == 0x1
    assert reasons_of(got.event_reasons) == ("gpu_idle",)


def test_reason_masks_tolerant_and_strict() -> None:
    thermal = ("sw_thermal_slowdown", "hw_thermal_slowdown")
    assert reasons_of(parse_reason_mask("0x0000000000000060")) == thermal
    assert reasons_of(parse_reason_mask("0X00000000000000C8")) == ("hw_slowdown", "hw_thermal_slowdown",
                                                                   "hw_power_brake_slowdown")
    assert reasons_of(0) == () and reasons_of(None) is None             # none active vs not known
    assert reasons_of(0x200) == ("bit_0x200",)                          # a bit a newer driver adds: shown
    for cell in ("[N/A]", "Not Supported", "", "0x", "60", "0x" + "f" * 17, "0x12g"):
        assert parse_reason_mask(cell) is None
    # GB10 prints [N/A] for what it cannot report: unknown, the reading stands; junk is a parse error
    fields = ["utilization.gpu", "clocks_event_reasons.active"]
    na = parse_gpu_line("5, [N/A]", fields)
    assert isinstance(na, GpuReading) and na.event_reasons is None and na.util == 5
    assert isinstance(parse_gpu_line("5, \x1b]52;c;AAAA\x07", fields), GpuParseError)
    assert isinstance(parse_gpu_line("5, Active", fields), GpuParseError)
    old = parse_gpu_line("5, 0x0000000000000004", ["utilization.gpu", "clocks_throttle_reasons.active"])
    assert isinstance(old, GpuReading) and old.event_reasons == 0x4   # the pre-535 field name


def test_real_xid_lines_and_their_stamps() -> None:
    x = parse_xid_line(REAL_62)
    assert x is not None and (x.xid, x.pci, x.at) == (62, "PCI:0000:01:00", None) and x.critical
    assert x.detail.startswith("323f0f30") and x.name == "internal micro-controller halt"
    assert parse_xid_line(REAL_154).xid == 154                          # type: ignore[union-attr]
    # journalctl -o short-iso (systemd 255, and the older +0000 zone), dmesg --time-format=iso
    for stamp in ("2027-01-15T08:00:00+00:00 spark-2 kernel: ", "2027-01-15T09:00:00+0100 spark-2 kernel: ",
                  "2027-01-15T08:00:00,000000+00:00 ", "2027-01-15T03:00:00.000000-05:00 "):
        got = parse_xid_line(stamp + REAL_62)
        assert got is not None and got.at == T0 and got.xid == 62
    unknown = parse_xid_line("NVRM: Xid (PCI:0000:01:00): 999, pid=1, name=x, who knows")
    assert unknown is not None and not unknown.critical and "xid-errors" in unknown.remedy
    assert parse_xid_line("2027-01-15T08:00:00 " + REAL_62).at is None   # type: ignore[union-attr]  # no zone


def test_hostile_kernel_lines_are_bounded_and_neutralised() -> None:
    evil = parse_xid_line("NVRM: Xid (PCI:0000:01:00): 13, pid=1, name=\x1b]0;owned\x07\x1b[2J"
                          + "A" * 10_000)
    assert evil is not None and "\x1b" not in evil.detail and "\x07" not in evil.detail
    assert len(evil.detail) <= 300
    for junk in ("NVRM: Xid (PCI:0000:01:00): 123456789, x", "NVRM: Xid (PCI:;rm -rf /): 79, x",
                 "Xid 79 somewhere", "NVRM: GPU at PCI:0000:01:00: GPU has fallen off the bus.", "\x00" * 50):
        assert parse_xid_line(junk) is None
    assert parse_xid_line("A" * 5000 + REAL_62) is None                  # past the bound: not read


# ---- the channel's kernel-log reader, run by bash ------------------------------------------------------

def _tool(bindir: Path, name: str, script: str) -> None:
    path = bindir / name
    path.write_text("#!/bin/sh\n" + script)
    path.chmod(0o755)


def _reader_output(bindir: Path, tmp: Path) -> list[str]:
    """The reader with only `bindir` (and the shell's own) on PATH; its lines once every tool ended."""
    env = dict(os.environ, PATH=f"{bindir}")
    out = subprocess.run(["/bin/bash", "-c", kernel_log_reader(60) + " wait"], env=env, capture_output=True,
                         text=True, timeout=30, cwd=tmp).stdout
    return out.splitlines()


def _feed(lines: list[str]) -> list[object]:
    reader = SamplerReader()
    return [e for line in lines if (e := reader.feed(line)) is not None]


def test_reader_journalctl_readable_with_an_xid(tmp_path: Path) -> None:
    bindir = tmp_path / "bin"
    bindir.mkdir()
    _tool(bindir, "journalctl", 'case "$*" in *-f*) printf "2027-01-15T08:00:00+00:00 h kernel: eth0 up\\n'
                                f'2027-01-15T08:00:01+00:00 h kernel: {REAL_62}\\n";; '
                                '*) printf "2027-01-15T07:00:00+00:00 h kernel: Linux version 6.11\\n";; '
                                'esac\n')
    lines = _reader_output(bindir, tmp_path)
    assert lines[0] == "K #r37 source journalctl" and lines[1] == "K #r37 readable"
    assert not any("eth0" in line or "Linux version" in line for line in lines)   # dropped on the host
    events = _feed(lines)
    assert KlogNote("source", "journalctl") in events and KlogNote("readable") in events
    xids = [e for e in events if isinstance(e, XidEvent)]
    assert [(x.xid, x.at) for x in xids] == [(62, T0 + 1)]
    assert events[-1] == ToolExit("K", 0, "")


def test_reader_journalctl_denied_and_dmesg_restricted(tmp_path: Path) -> None:
    bindir = tmp_path / "bin"
    bindir.mkdir()
    _tool(bindir, "journalctl", "printf 'Hint: You are currently not seeing messages from other users and "
                                "the system.\\n      Users in groups '\"'\"'adm'\"'\"', "
                                "'\"'\"'systemd-journal'\"'\"' can "
                                "see all messages.\\n      Pass -q to turn off this notice.\\n' >&2; "
                                "echo '-- No entries --'\n")
    events = _feed(_reader_output(bindir, tmp_path))
    assert KlogNote("denied", "journalctl: this login may not read the system journal") in events
    assert KlogNote("readable") not in events                           # `-- No entries --` proves nothing
    (bindir / "journalctl").unlink()
    _tool(bindir, "dmesg", "echo 'dmesg: read kernel buffer failed: Operation not permitted' >&2; exit 1\n")
    events = _feed(_reader_output(bindir, tmp_path))
    assert events[0] == KlogNote("source", "dmesg")
    assert KlogNote("denied", "dmesg restricted (kernel.dmesg_restrict=1)") in events
    assert events[-1] == ToolExit("K", 1, "")
    (bindir / "dmesg").unlink()
    assert _feed(_reader_output(bindir, tmp_path)) == [KlogNote("source", "none"), ToolExit("K", 1, "")]


# ---- the sampler's per-rank state ---------------------------------------------------------------------

def _sampler() -> tuple[ClusterStats, _RankSampler]:
    stats = ClusterStats([0, 1], 1.0)
    return stats, _RankSampler(1, stats)


def test_sampler_klog_state_never_claims_what_it_did_not_read() -> None:
    stats, s = _sampler()
    s.reset()
    assert stats.ranks[1].klog == KlogStatus()                           # not known yet
    s.feed("K #r37 source journalctl")
    assert stats.ranks[1].klog.readable is None
    s.feed("K Hint: You are currently not seeing messages from other users and the system.")
    s.feed("K #r37 readable")                                            # after a refusal: proves nothing
    k = stats.ranks[1].klog
    assert k.readable is False and "systemd-journal" in k.reason and k.text().startswith("not readable: ")
    s.reset()
    s.feed("K #r37 source dmesg")
    s.feed("K dmesg: read kernel buffer failed: Operation not permitted")
    s.feed("X K 1")
    assert stats.ranks[1].klog.readable is False and "dmesg restricted" in stats.ranks[1].klog.reason


def test_sampler_counts_each_xid_line_once_across_channels() -> None:
    stats, s = _sampler()
    for _ in range(3):                                                   # three channels read the same log
        s.reset()
        s.feed("K #r37 source journalctl")
        s.feed(f"K 2027-01-15T08:00:01+00:00 h kernel: {REAL_62}")
        s.feed(f"K 2027-01-15T08:00:02+00:00 h kernel: {REAL_154}")
    r = stats.ranks[1]
    assert r.xid_total == {62: 1, 154: 1} and [x.xid for x in r.xids] == [62, 154]
    assert r.klog.readable is True                                       # an Xid line read proves it
    for i in range(100):
        s.feed(f"K 2027-01-15T09:00:{i % 60:02d}+00:00 h kernel: NVRM: Xid (PCI:0000:01:00): 13, n {i}")
    assert len(stats.ranks[1].xids) == 32 and stats.ranks[1].xid_total[13] == 100


def test_sampler_reasons_since_hold_across_readings_and_reset_on_a_break() -> None:
    stats, s = _sampler()
    fields_line = "G 2027/01/15 08:00:00.000, 0, NVIDIA GB10, 90, 2400, 3003, 40.00, 92, P0, [N/A], [N/A], {}"
    s.feed(fields_line.format("0x0000000000000060"))
    first = dict(stats.ranks[1].reasons_since)
    assert set(first) == {"sw_thermal_slowdown", "hw_thermal_slowdown"}
    s.feed(fields_line.format("0x0000000000000040"))
    assert stats.ranks[1].reasons_since == {"hw_thermal_slowdown": first["hw_thermal_slowdown"]}
    s.feed(fields_line.format("[N/A]"))
    assert stats.ranks[1].reasons_since == {}


# ---- the rules, the JSON and the exporter -------------------------------------------------------------

def _statuses() -> list[HostStatus]:
    return [HostStatus(r, f"spark-{r}", HostState.CONNECTED) for r in range(2)]


def _rank(rank: int, mask: int | None, since: dict[str, float] | None = None, *,  # type: ignore[no-untyped-def]
          skew: float = 0.0, **kw) -> RankStats:
    """A fresh rank; `skew`: how far the host's clock runs ahead of this machine's."""
    gpu = GpuReading(util=90, sm=2400, max_sm=3003, event_reasons=mask)
    return RankStats(rank, "sampling", gpu=gpu, gpu_at=NOW - 0.2, round_at=NOW - 0.2,
                     host_clock=NOW - 0.2 + skew, reasons_since=since or {}, **kw)


def test_throttle_alert_needs_the_hold_and_a_bad_reason() -> None:
    stats = ClusterStats([0, 1], 1.0)
    stats.put(_rank(0, 0x4, {"sw_power_cap": NOW - 600}))               # power capped under load: healthy
    stats.put(_rank(1, 0x60, {"sw_thermal_slowdown": NOW - 2, "hw_thermal_slowdown": NOW - 2}))
    assert findings(stats, CFG, None, _statuses(), NOW) == []            # not held long enough yet
    stats.put(_rank(1, 0x60, {"sw_thermal_slowdown": NOW - 6, "hw_thermal_slowdown": NOW - 6}))
    found = findings(stats, CFG, None, _statuses(), NOW)
    assert [(f.kind, f.rank, f.severity) for f in found] == [("gpu-thermal", 1, "fail")]
    assert "HW thermal for 6 s" in found[0].message and "airflow" in found[0].remedy
    stats.put(_rank(1, 0x88, {"hw_slowdown": NOW - 60, "hw_power_brake_slowdown": NOW - 60}))
    assert {(f.kind, f.severity) for f in findings(stats, CFG, None, _statuses(), NOW)} == {
        ("gpu-power-brake", "fail")}                                     # HW slowdown is the brake's: once
    stats.put(_rank(1, 0x20, {"sw_thermal_slowdown": NOW - 60}))
    assert {(f.kind, f.severity) for f in findings(stats, CFG, None, _statuses(), NOW)} == {
        ("gpu-thermal", "warn")}


def test_xid_alert_in_its_window_by_the_hosts_clock() -> None:
    stats = ClusterStats([0, 1], 1.0)
    skew = 7200.0                                                        # the host's clock runs 2 h ahead
    x79 = XidEvent(79, "PCI:000f:01:00", NOW + skew - 100, "GPU has fallen off the bus.")
    x13 = XidEvent(13, "PCI:000f:01:00", NOW + skew - 50, "pid=1, name=python3, Graphics SM Warp Exception")
    old = XidEvent(48, "PCI:000f:01:00", NOW + skew - 4000, "DBE")
    stats.put(_rank(0, 0, klog=KlogStatus("journalctl", True)))
    stats.put(_rank(1, 0, skew=skew, klog=KlogStatus("journalctl", True), xids=(old, x79, x13),
                    xid_total={48: 1, 79: 1, 13: 1}))
    found = findings(stats, CFG, None, _statuses(), NOW)
    assert [(f.kind, f.rank, f.severity) for f in found] == [("gpu-xid", 1, "fail")]
    assert found[0].message.startswith("Xid 79 GPU has fallen off the bus on PCI:000f:01:00, 100 s ago")
    assert "also Xid 13" in found[0].message and "48" not in found[0].message.split(":")[0]
    assert found[0].remedy.startswith("Xid 79: ")
    assert findings(stats, StatsSection(xid_alert_s=30), None, _statuses(), NOW) == []
    only13 = StatsSection(xid_alert_s=60)
    found = findings(stats, only13, None, _statuses(), NOW)
    assert [(f.kind, f.severity) for f in found] == [("gpu-xid", "warn")]

    data = stats_dict(stats, NOW)
    x = data["ranks"][1]["xid"]
    assert x["readable"] is True and x["total"] == {"13": 1, "48": 1, "79": 1}
    assert [(e["xid"], round(e["age_s"])) for e in x["recent"]] == [(48, 4000), (79, 100), (13, 50)]
    assert data["ranks"][1]["clock_events"] == {"mask": "0x0000000000000000", "active": [],
                                                "active_for_s": {}}


def test_exporter_families() -> None:
    stats = ClusterStats([0, 1], 1.0, "c")
    stats.put(_rank(0, None, klog=KlogStatus("journalctl", False, "denied")))
    stats.put(_rank(1, 0x40, klog=KlogStatus("journalctl", True), xid_total={79: 2}))
    reg = CollectorRegistry()
    reg.register(StatsCollector(stats, lambda: NOW))
    samples = [s for f in text_string_to_metric_families(generate_latest(reg).decode()) for s in f.samples]
    active = {(s.labels["rank"], s.labels["reason"]): s.value for s in samples
              if s.name == "r37_gpu_clock_event_active"}
    assert active[("1", "hw_thermal_slowdown")] == 1.0 and active[("1", "gpu_idle")] == 0.0
    assert not any(r == "0" for r, _ in active)                          # [N/A]: no sample, never 0
    assert {(s.labels["rank"], s.labels["xid"]): s.value for s in samples if s.name == "r37_gpu_xid_total"} \
        == {("1", "79"): 2.0}
    assert {s.labels["rank"]: s.value for s in samples if s.name == "r37_gpu_kernel_log_readable"} \
        == {"0": 0.0, "1": 1.0}


def test_watch_line_names_a_held_throttling_reason() -> None:
    stats = ClusterStats([0, 1], 1.0)
    stats.put(_rank(0, 0x4, {"sw_power_cap": NOW - 60}))
    stats.put(_rank(1, 0x80, {"hw_power_brake_slowdown": NOW - 60}))
    assert "clocks:" not in watch_line(stats.ranks[0], stats, NOW)     # a power cap is how a GPU runs
    assert watch_line(stats.ranks[1], stats, NOW).endswith("  clocks: power brake")
