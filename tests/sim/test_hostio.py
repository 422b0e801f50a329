"""The engine's host writer: RDMA counters on a healthy and on a downed port, and the live meminfo."""

from __future__ import annotations

from pathlib import Path

import pytest

from cockpit.sim import layout
from cockpit.sim.engine.hostio import HostIO
from cockpit.sim.faults import set_fault
from cockpit.sim.provision import provision_host
from cockpit.sim.tools import _fabric

PEERS = ["192.168.100.10", "192.168.100.11"]
ERRORS = ("local_ack_timeout_err", "roce_adp_retrans")
DATA = ("port_xmit_data", "port_rcv_data", "port_xmit_packets", "port_rcv_packets")


@pytest.fixture
def root(tmp_path: Path) -> Path:
    spec = layout.HostSpec(rank=0, nranks=2, hostname="spark-0", mode="demo", fabric_ip=PEERS[0],
                           peers=PEERS, srv_dir=str(tmp_path / "host" / "srv"))
    provision_host(tmp_path / "host", spec)
    return tmp_path / "host"


def _port(root: Path, hca: str = "rocep1s0f0") -> Path:
    return layout.infiniband_dir(root) / hca / "ports" / "1"


def _read(root: Path, *names: str, hca: str = "rocep1s0f0") -> dict[str, int]:
    return {n: int((_port(root, hca) / n).read_text()) for n in names}


def test_every_hca_has_its_hw_counters_after_provisioning(root: Path) -> None:
    spec = layout.read_spec(root)
    for hca in spec.hcas:
        names = sorted(p.name for p in (_port(root, hca) / "hw_counters").iterdir())
        assert names == sorted(_fabric.HW_COUNTERS)
        assert _read(root, *(f"hw_counters/{n}" for n in ERRORS), hca=hca) == {
            f"hw_counters/{n}": 0 for n in ERRORS}


def test_healthy_port_moves_data_and_keeps_error_counters_at_zero(root: Path) -> None:
    io = HostIO(root, "rocep1s0f0")
    before = _read(root, *(f"counters/{n}" for n in DATA))
    io.add_traffic(4096 * 10)
    io.add_traffic(0)
    after = _read(root, *(f"counters/{n}" for n in DATA))
    assert after["counters/port_xmit_data"] - before["counters/port_xmit_data"] == 4096 * 10 // 4
    assert after["counters/port_rcv_packets"] - before["counters/port_rcv_packets"] == 10
    assert _read(root, *(f"hw_counters/{n}" for n in ERRORS)) == {f"hw_counters/{n}": 0 for n in ERRORS}


def test_port_down_freezes_data_and_raises_error_counters(root: Path) -> None:
    io = HostIO(root, "rocep1s0f0")
    data = [f"counters/{n}" for n in DATA]
    errors = [f"hw_counters/{n}" for n in ERRORS]
    set_fault(root, "rdma-port-down", True)
    assert (_port(root) / "state").read_text() == _fabric.STATE_DOWN + "\n"
    before = _read(root, *data)
    for _ in range(4):
        io.add_traffic(1 << 20)
    io.add_traffic(0)  # no traffic, no retries
    assert _read(root, *data) == before
    assert _read(root, *errors) == {"hw_counters/local_ack_timeout_err": 4,
                                    "hw_counters/roce_adp_retrans": 12}
    assert not any(p.name.startswith(".") for p in (_port(root) / "hw_counters").iterdir())  # no temp files
    other = HostIO(root, "rocep1s0f1")  # only ib_hca is down
    other.add_traffic(1 << 20)
    assert _read(root, *errors, hca="rocep1s0f1") == {e: 0 for e in errors}
    set_fault(root, "rdma-port-down", False)
    io.add_traffic(1 << 20)
    assert _read(root, "counters/port_xmit_data")["counters/port_xmit_data"] == \
        before["counters/port_xmit_data"] + (1 << 18)
    assert _read(root, *errors)["hw_counters/local_ack_timeout_err"] == 4  # counters keep their history


def test_memory_writes_keep_proc_meminfo_current(root: Path) -> None:
    live = layout.meminfo_path(root)

    def available() -> int:
        return int(live.read_text().split("MemAvailable:")[1].split()[0])

    idle = available()
    io = HostIO(root, "rocep1s0f0")
    io.set_memory(10 * 2**30)
    assert available() == idle - 10 * 2**20
    io.cleanup()
    assert available() == idle and not (layout.run_dir(root) / "mem.json").exists()


def test_without_a_root_nothing_is_written() -> None:
    io = HostIO(None, "")
    io.set_memory(5)
    io.add_traffic(100)
    io.cleanup()
    assert io.used_bytes == 5 and not io.port_active()
