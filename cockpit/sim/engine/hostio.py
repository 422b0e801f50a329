"""What the engine writes into its host root: memory use, GPU readings and RDMA counters.

    <root>/run/mem.json     {"used_bytes": N}                         rising while loading, removed at exit
    <root>/run/gpu.json     {"utilization", "power_w", "sm_clock_mhz", "temperature_c", "apps": [...]}
    <root>/run/pystate.json {"activity": serving|idle|collective|stalled, "role": head|worker, "rank": R,
                             "pid": P}   what the engine's Python threads do (read by the py-spy stand-in)
    <root>/proc/meminfo     re-rendered after every mem.json change (`_meminfo.refresh`)
    <root>/sys/class/infiniband/<hca>/ports/1/counters/{port_xmit_data,port_rcv_data,port_xmit_packets,
                                                        port_rcv_packets}   (data counters = bytes / 4)
    <root>/sys/class/infiniband/<hca>/ports/1/hw_counters/{local_ack_timeout_err,roce_adp_retrans}
                            while the port's `state` is not ACTIVE (rdma-port-down): +1 / +3 per call
                            with traffic, and the data counters stand still

All files are written atomically (temp file + rename). RDMA traffic is modelled as tensor-parallel
all-reduce volume: BYTES_PER_TOKEN bytes sent and received per processed token (prompt or generated).
"""

from __future__ import annotations

import contextlib
import json
import os
import random
from pathlib import Path

from cockpit.sim import layout
from cockpit.sim.tools import _meminfo

# hidden 7168 x 2 bytes (bf16) x 2 all-reduces per layer x 43 layers x ring factor 2(n-1)/n = 1.5
BYTES_PER_TOKEN = 7168 * 2 * 2 * 43 * 3 // 2
MTU = 4096
# What a stalled RoCE QP does to mlx5's hw_counters per attempted transfer while its port is down.
PORT_DOWN_ERRORS = (("local_ack_timeout_err", 1), ("roce_adp_retrans", 3))
TOTAL_MEMORY = 128 * 10**9


def write_atomic(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(text)
    tmp.replace(path)


def _bump(path: Path, inc: int) -> None:
    """Add inc to a decimal counter file (a missing or garbled one counts as 0)."""
    try:
        cur = int(path.read_text().strip() or 0)
    except (FileNotFoundError, ValueError):
        cur = 0
    write_atomic(path, f"{cur + inc}\n")


class HostIO:
    """Writer of one host's live readings; a no-op without a host root."""

    def __init__(self, root: Path | None, hca: str, seed: int = 0) -> None:
        self.root = root
        self.hca = hca
        self._rng = random.Random(seed)
        self.used_bytes = 0
        self._activity: tuple[str, str, int] | None = None

    # --- memory ---------------------------------------------------------------------------------
    def set_memory(self, used: int) -> None:
        self.used_bytes = used
        if self.root:
            write_atomic(layout.run_dir(self.root) / "mem.json", json.dumps({"used_bytes": used}))
            _meminfo.refresh(self.root)

    # --- GPU ------------------------------------------------------------------------------------
    def set_gpu(self, load: float, slow: bool = False) -> None:
        """load 0..1: 0 = loaded and idle, 1 = generating flat out."""
        if not self.root:
            return
        j = self._rng.uniform(-1, 1)
        util = 0 if load <= 0.005 else min(100, round(95 * load + 2 * j))
        power = round(5.0 + 83.0 * load + 3.0 * j * load, 2)
        # a GPU with kernels to run boosts whatever its share of busy time (GB10: 2.2-2.4 GHz under load)
        clock = round(2250 + 150 * load + 40 * j) if util >= 5 else round(800 + 60 * j * load)
        if slow:
            clock = min(clock, 630 + round(200 * load + 50 * abs(j)))
        data = {
            "utilization": util,
            "power_w": power,
            "sm_clock_mhz": clock,
            "temperature_c": round(38 + 30 * load + j),
            "apps": [{"pid": os.getpid(), "used_mib": self.used_bytes // (1 << 20)}]
            if self.used_bytes
            else [],
        }
        write_atomic(layout.run_dir(self.root) / "gpu.json", json.dumps(data))

    def set_activity(self, activity: str, role: str, rank: int) -> None:
        """What the engine's Python threads are doing now (written when it changes)."""
        if not self.root or self._activity == (activity, role, rank):
            return
        self._activity = (activity, role, rank)
        write_atomic(layout.run_dir(self.root) / "pystate.json",
                     json.dumps({"activity": activity, "role": role, "rank": rank, "pid": os.getpid()}))

    # --- RDMA -----------------------------------------------------------------------------------
    def counters_dir(self) -> Path | None:
        if not self.root:
            return None
        return layout.infiniband_dir(self.root) / self.hca / "ports" / "1" / "counters"

    def has_hca(self) -> bool:
        d = self.counters_dir()
        return d is not None and d.parent.parent.parent.is_dir()

    def port_active(self) -> bool:
        d = self.counters_dir()
        if d is None:
            return False
        try:
            return (d.parent / "state").read_text().strip().endswith("ACTIVE")
        except OSError:
            return False

    def add_traffic(self, nbytes: int) -> None:
        """Move xmit and rcv counters by nbytes each (data counters count 4-byte words).

        A port that is not ACTIVE moves no data: its error counters rise instead.
        """
        d = self.counters_dir()
        if d is None or nbytes <= 0 or not self.has_hca():
            return
        if not self.port_active():
            for name, inc in PORT_DOWN_ERRORS:
                _bump(d.parent / "hw_counters" / name, inc)
            return
        packets = -(-nbytes // MTU)
        for name, inc in (
            ("port_xmit_data", nbytes // 4),
            ("port_rcv_data", nbytes // 4),
            ("port_xmit_packets", packets),
            ("port_rcv_packets", packets),
        ):
            _bump(d / name, inc)

    def cleanup(self) -> None:
        if not self.root:
            return
        for name in ("mem.json", "gpu.json", "pystate.json"):
            with contextlib.suppress(FileNotFoundError):
                (layout.run_dir(self.root) / name).unlink()
        _meminfo.refresh(self.root)
