"""Create (idempotently) the root directory of one simulated GB10 host; see `cockpit.sim.layout`."""

from __future__ import annotations

import json
import os
from dataclasses import asdict
from pathlib import Path

from cockpit.sim import layout
from cockpit.sim.tools import _fabric, _meminfo

MEMINFO_BASE = (
    ("MemTotal", 127600748),
    ("MemFree", 116843212),
    ("MemAvailable", 118912344),
    ("Buffers", 14244),
    ("Cached", 2806416),
    ("SwapCached", 0),
    ("Active", 2371308),
    ("Inactive", 1573956),
    ("Active(anon)", 1187624),
    ("Inactive(anon)", 0),
    ("Active(file)", 1183684),
    ("Inactive(file)", 1573956),
    ("Unevictable", 30988),
    ("Mlocked", 27916),
    ("SwapTotal", 16777212),
    ("SwapFree", 16777212),
    ("Zswap", 0),
    ("Zswapped", 0),
    ("Dirty", 228),
    ("Writeback", 0),
    ("AnonPages", 1154732),
    ("Mapped", 625540),
    ("Shmem", 62844),
    ("KReclaimable", 241772),
    ("Slab", 797660),
    ("SReclaimable", 241772),
    ("SUnreclaim", 555888),
    ("KernelStack", 22704),
    ("ShadowCallStack", 5692),
    ("PageTables", 26836),
    ("SecPageTables", 0),
    ("NFS_Unstable", 0),
    ("Bounce", 0),
    ("WritebackTmp", 0),
    ("CommitLimit", 80577584),
    ("Committed_AS", 5521104),
    ("VmallocTotal", 133143461888),
    ("VmallocUsed", 101520),
    ("VmallocChunk", 0),
    ("Percpu", 22912),
    ("HardwareCorrupted", 0),
    ("AnonHugePages", 473088),
    ("ShmemHugePages", 0),
    ("ShmemPmdMapped", 0),
    ("FileHugePages", 0),
    ("FilePmdMapped", 0),
    ("CmaTotal", 0),
    ("CmaFree", 0),
    ("Unaccepted", 0),
)
HUGEPAGES = (("HugePages_Total", 0), ("HugePages_Free", 0), ("HugePages_Rsvd", 0), ("HugePages_Surp", 0))
HUGEPAGE_KB = (("Hugepagesize", 2048), ("Hugetlb", 0))


def _write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text)
    tmp.replace(path)


def _write_if_missing(path: Path, text: str) -> None:
    if not path.exists():
        _write(path, text)


def meminfo_base_text() -> str:
    rows = [(k, v, True) for k, v in MEMINFO_BASE] + [(k, v, False) for k, v in HUGEPAGES]
    rows += [(k, v, True) for k, v in HUGEPAGE_KB]
    return _meminfo.fmt(rows)


def write_fabric_state(root: Path, spec: layout.HostSpec) -> None:
    """(Re)write port state and GID tables from the spec and the active faults (not the counters)."""
    d = asdict(spec)
    port_down = layout.fault_active(root, "rdma-port-down")
    wrong_gid = layout.fault_active(root, "wrong-gid")
    for i, hca in enumerate(spec.hcas):
        port = layout.infiniband_dir(root) / hca / "ports" / "1"
        down = port_down and hca == spec.ib_hca
        _write(port / "state", (_fabric.STATE_DOWN if down else _fabric.STATE_ACTIVE) + "\n")
        _write(port / "phys_state", (_fabric.PHYS_DISABLED if down else _fabric.PHYS_LINKUP) + "\n")
        table = _fabric.gid_table(d, i, wrong_gid)
        for n in range(_fabric.NUM_GIDS):
            gid, gtype = table[n] if n < len(table) else (_fabric.ZERO_GID, "")
            _write(port / "gids" / str(n), gid + "\n")
            # Unused entries: empty attr files; the cat/head stand-ins answer EINVAL like real sysfs.
            _write(port / "gid_attrs" / "types" / str(n), gtype + "\n" if gtype else "")
            _write(port / "gid_attrs" / "ndevs" / str(n), spec.netdevs[i] + "\n" if gtype else "")


def _provision_hca(root: Path, spec: layout.HostSpec, i: int, hca: str) -> None:
    base = layout.infiniband_dir(root) / hca
    _write(base / "node_guid", _fabric.node_guid(spec.rank, i) + "\n")
    _write(base / "sys_image_guid", _fabric.node_guid(spec.rank, i) + "\n")
    _write(base / "fw_ver", _fabric.FW_VER + "\n")
    _write(base / "board_id", _fabric.BOARD_ID + "\n")
    _write(base / "hca_type", _fabric.HCA_TYPE + "\n")
    _write(base / "node_type", "1: CA\n")
    _write(base / "device" / "net" / spec.netdevs[i] / "address", _fabric.mac(spec.rank, i) + "\n")
    port = base / "ports" / "1"
    _write(port / "rate", _fabric.RATE + "\n")
    _write(port / "link_layer", "Ethernet\n")
    _write(port / "lid", "0x0\n")
    seed = 1 + spec.rank * 7 + i * 3
    start = {
        "port_xmit_data": 2_147_000_000 * seed + 123_457,
        "port_rcv_data": 2_146_000_000 * seed + 98_765,
        "port_xmit_packets": 5_210_000 * seed + 311,
        "port_rcv_packets": 5_190_000 * seed + 977,
    }
    for name in _fabric.COUNTERS:
        _write_if_missing(port / "counters" / name, f"{start[name]}\n")
    for name in _fabric.HW_COUNTERS:
        value = {"rx_write_requests": 84_311 * seed, "rx_read_requests": 1_204 * seed}.get(name, 0)
        _write_if_missing(port / "hw_counters" / name, f"{value}\n")


def provision_host(root: Path, spec: layout.HostSpec) -> None:
    """Lay out a host root (idempotent: counters, docker state and faults already there are kept)."""
    root = Path(root)
    layout.write_spec(root, spec)
    for d in (
        layout.faults_dir(root),
        layout.run_dir(root),
        layout.home_dir(root),
        layout.docker_dir(root) / "images",
        layout.docker_dir(root) / "containers",
    ):
        d.mkdir(parents=True, exist_ok=True)
    if spec.mode == "demo":
        srv = Path(spec.srv_dir) if spec.srv_dir and spec.srv_dir != "/srv" else layout.demo_srv_dir(root)
        for sub in ("models", "engram-local", "cache"):
            (srv / sub).mkdir(parents=True, exist_ok=True)
    _write(layout.meminfo_base_path(root), meminfo_base_text())
    _write_if_missing(layout.run_dir(root) / "mem.json", json.dumps({"used_bytes": 0}) + "\n")
    _meminfo.refresh(root)
    _write_if_missing(
        layout.run_dir(root) / "gpu.json",
        json.dumps({"utilization": 0, "power_w": 4.1, "sm_clock_mhz": 208, "apps": []}) + "\n",
    )
    daemon = {"runtimes": {"nvidia": {"path": "nvidia-container-runtime", "args": []}}}
    _write_if_missing(layout.docker_dir(root) / "daemon.json", json.dumps(daemon, indent=4) + "\n")
    for i, hca in enumerate(spec.hcas):
        _provision_hca(root, spec, i, hca)
    write_fabric_state(root, spec)
    os.chmod(root, 0o755)
