"""The recorder's feed: stats points recorded once each (none missed between two judgements, none twice),
engine points, alerts raised and cleared, verdicts and rank conditions with their cause, secrets redacted,
and `[recorder] enabled = false` records nothing."""

from __future__ import annotations

import time
from pathlib import Path

from cockpit.recipe.phases import Phase
from cockpit.recipe.recording import Recording, note_action, parse_when, path_for
from cockpit.recipe.timeline import (
    ClusterTimeline,
    ClusterVerdict,
    PhaseEntered,
    RankRecovered,
    VerdictChanged,
)
from cockpit.telemetry.cluster_stats import Alert, ClusterStats
from cockpit.telemetry.gpu_events import XidEvent
from cockpit.telemetry.recorder import read_events, read_samples


def _recording(fixed_config, tmp_path: Path) -> Recording:  # type: ignore[no-untyped-def]
    return Recording(fixed_config, path=tmp_path / "r.sqlite3", command="test").start()


def test_every_stats_point_once_and_alerts_raised_then_cleared(fixed_config, tmp_path: Path) -> None:
    rec = _recording(fixed_config, tmp_path)
    stats = ClusterStats(fixed_config.ranks, 1.0)
    now = time.time()
    for i in range(3):                                  # three points before the first judgement
        for rank in stats.ranks:
            stats.history[rank].add(now - 10 + i, {"util": float(i), "sm_mhz": 2405.0})
    stats.engine_history.add(now - 9, {"gen_tps": 50.6, "kv_pct": 12.0})
    alert = Alert("clock-latched", 2, now - 8, "SM clock latched at 820 MHz", "reboot the host")
    stats.set_alerts((alert,))
    rec.record_stats(stats)
    rec.record_stats(stats)                             # nothing new: nothing written twice
    for rank in stats.ranks:
        stats.history[rank].add(now - 5, {"util": 9.0, "sm_mhz": 820.0})
    stats.set_alerts(())
    rec.record_stats(stats)
    rec.close()
    samples = read_samples(rec.path)
    assert len(samples) == 4 * len(fixed_config.ranks)
    assert [s["util"] for s in samples if s["rank"] == 2] == [0.0, 1.0, 2.0, 9.0]
    kinds = [(e.kind, e.rank) for e in read_events(rec.path) if e.kind.startswith("alert")]
    assert kinds == [("alert-raised", 2), ("alert-cleared", 2)]


def test_each_xid_line_is_one_event_with_its_remedy(fixed_config, tmp_path: Path) -> None:
    rec = _recording(fixed_config, tmp_path)
    stats = ClusterStats(fixed_config.ranks, 1.0)
    x79 = XidEvent(79, "PCI:000f:01:00", 1_800_000_000.0,
                   "pid='<unknown>', name=<unknown>, GPU has fallen off the bus.")
    x13 = XidEvent(13, "PCI:000f:01:00", 1_800_000_050.0, "pid=7, name=python3, Graphics SM Warp Exception")
    stats.update(2, xids=(x79,))
    rec.record_stats(stats)
    stats.update(2, xids=(x79, x13))
    rec.record_stats(stats)                             # x79 again: noted once
    rec.close()
    xids = [e for e in read_events(rec.path) if e.kind == "xid"]
    assert [(e.rank, e.data["xid"], e.data["critical"]) for e in xids] == [(2, 79, True), (2, 13, False)]
    assert xids[0].summary.startswith("rank 2: Xid 79 (GPU has fallen off the bus, critical) on "
                                      "PCI:000f:01:00")
    assert "power-cycle" in xids[0].data["remedy"] and xids[0].data["host_at"] == 1_800_000_000.0


def test_verdicts_conditions_and_phases_with_their_cause(fixed_config, tmp_path: Path) -> None:
    rec = _recording(fixed_config, tmp_path)
    timeline = ClusterTimeline(fixed_config.ranks)
    rec.on_event(PhaseEntered(1, Phase.LOADING, time.time()), timeline)
    down = ClusterVerdict("down", "rank 2 failed first: NCCL error", 2, "check the fabric")
    rec.on_event(VerdictChanged(down), timeline)
    rec.on_event(VerdictChanged(down), timeline)       # the same verdict again: not a change
    rec.on_event(RankRecovered(3, "progress again after 200 s in loading weights", time.time()), timeline)
    rec.close()
    events = read_events(rec.path)
    verdicts = [e for e in events if e.kind == "verdict"]
    assert len(verdicts) == 1 and verdicts[0].data["first_failed"] == 2
    assert verdicts[0].data["remedy"] == "check the fabric"
    assert [e.rank for e in events if e.kind == "phase"] == [1]
    assert [(e.rank, e.summary) for e in events if e.kind == "recovered"] == [
        (3, "rank 3 recovered: progress again after 200 s in loading weights")]
    first = [e for e in events if e.kind == "condition"]
    assert sorted(e.rank for e in first) == fixed_config.ranks and first[0].data["cause"] == "PhaseEntered"


def test_actions_name_who_and_never_a_secret(fixed_config, monkeypatch, tmp_path: Path) -> None:
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    with Recording(fixed_config, command="test") as rec:
        note_action(fixed_config, "launch", "rank 0: docker run -e HF_TOKEN=hf_abcdefghijkl", rank=0)
    assert rec.path == path_for(fixed_config)
    [launch] = [e for e in read_events(rec.path) if e.kind == "launch"]
    assert "hf_abcdefghijkl" not in launch.summary and "HF_TOKEN=***" in launch.summary
    assert launch.data["who"] in launch.summary and "@" in launch.data["who"]


def test_disabled_records_nothing(fixed_config, monkeypatch, tmp_path: Path) -> None:
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    off = fixed_config.model_copy(update={"recorder": fixed_config.recorder.model_copy(
        update={"enabled": False})})
    note_action(off, "stop", "rank 0: stopped")
    assert not path_for(off).exists()


def test_times_on_the_command_line() -> None:
    now = time.mktime((2026, 12, 3, 23, 30, 0, 0, 0, -1))
    assert parse_when("15m", now) == now - 900 and parse_when("2h", now) == now - 7200
    assert parse_when("1d", now) == now - 86400
    assert parse_when("23:00", now) == now - 1800
    assert parse_when("2026-12-03 22:30", now) == now - 3600
    assert parse_when("2026-12-03T22:30:30", now) == now - 3570
    assert parse_when(str(now - 5), now) == now - 5
    for bad in ("", "yesterday", "15x", "25:00", "-3h"):
        try:
            parse_when(bad, now)
        except ValueError:
            continue
        raise AssertionError(bad)
