"""Snapshots of the Stats pane with GPU events: rank 1 thermally throttled (its alert held), rank 2 with a
fresh Xid 79, rank 3 whose kernel log cannot be read (said so, never "none"), rank 0 healthy under load.
The model is filled directly, as the sampler and the alert rules would (the rules themselves:
tests/telemetry/test_gpu_events.py; the whole path on the demo cluster: tests/cli/test_gpu_events_cmd.py)."""

from __future__ import annotations

from dataclasses import replace

import pytest
from test_stats_snap import BEGAN, NOW, fill, frozen, healthy_rank, show

from cockpit.telemetry.cluster_stats import Alert
from cockpit.telemetry.gpu_events import REASON_REMEDY, KlogStatus, XidEvent
from cockpit.tui.app import CockpitApp

XID_79 = XidEvent(79, "PCI:000f:01:00", NOW - 130,
                  "pid='<unknown>', name=<unknown>, GPU has fallen off the bus.")
DENIED = ("journalctl: this login may not read the system journal; add the login to the systemd-journal "
          "(or adm) group on the host")


def scene_ranks() -> dict[str, object]:
    readable = KlogStatus("journalctl", True)
    r0 = replace(healthy_rank(0, NOW), klog=readable, host_clock=NOW - 0.4)
    r0 = replace(r0, gpu=replace(r0.gpu, event_reasons=0x4))              # SW power cap under load: fine
    r1 = replace(healthy_rank(1, NOW), klog=readable, host_clock=NOW - 0.4,
                 reasons_since={"sw_thermal_slowdown": NOW - 42, "hw_thermal_slowdown": NOW - 42})
    r1 = replace(r1, gpu=replace(r1.gpu, event_reasons=0x60, temp_c=92))
    r2 = replace(healthy_rank(2, NOW), klog=readable, host_clock=NOW - 0.4, xids=(XID_79,), xid_total={79: 1})
    r2 = replace(r2, gpu=replace(r2.gpu, event_reasons=0x0))
    r3 = replace(healthy_rank(3, NOW), klog=KlogStatus("journalctl", False, DENIED), host_clock=NOW - 0.4)
    r3 = replace(r3, gpu=replace(r3.gpu, event_reasons=None))             # [N/A]: not known
    return {"r0": r0, "r1": r1, "r2": r2, "r3": r3}


ALERTS = (
    Alert("gpu-xid", 2, NOW - 128, "Xid 79 GPU has fallen off the bus on PCI:000f:01:00, 130 s ago",
          "Xid 79: the GPU no longer answers on its bus: power-cycle the host", "fail"),
    Alert("gpu-thermal", 1, BEGAN + 5, "clocks slowed: SW thermal for 42 s, HW thermal for 42 s",
          REASON_REMEDY["thermal"], "fail"),
)


@pytest.mark.parametrize("size", [(160, 48), (80, 24)])
def test_throttled_rank_and_xid(snap_compare, fixed_config, monkeypatch, size) -> None:  # type: ignore[no-untyped-def]
    frozen(monkeypatch)
    app = CockpitApp(fixed_config, connect=False)

    async def before(pilot) -> None:  # type: ignore[no-untyped-def]
        fill(app.ctx.monitor.stats, **scene_ranks())  # type: ignore[arg-type]
        app.ctx.monitor.stats.set_alerts(ALERTS)
        await show(app, pilot)

    assert snap_compare(app, terminal_size=size, run_before=before)


def test_rank_detail_with_an_xid(snap_compare, fixed_config, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    frozen(monkeypatch)
    app = CockpitApp(fixed_config, connect=False)
    monkeypatch.setattr(app.ctx.monitor.sampler, "command",
                        lambda rank: f"exec bash -c 'sampler of rank {rank}'")

    async def before(pilot) -> None:  # type: ignore[no-untyped-def]
        fill(app.ctx.monitor.stats, **scene_ranks())  # type: ignore[arg-type]
        app.ctx.monitor.stats.set_alerts(ALERTS)
        await show(app, pilot, detail=2)

    assert snap_compare(app, terminal_size=(160, 48), run_before=before)
