"""Fault switches of a simulated host: `<root>/faults/<name>` (content: optional JSON params).

`python -m cockpit.sim.faults ROOT NAME on|off [JSON]` sets one from a shell (the lab runs it inside a
host's mount namespace so that `missing-shard` sees that host's /srv).
"""

from __future__ import annotations

import json
import os
import shutil
import sys
from pathlib import Path

from cockpit.sim import layout
from cockpit.sim.tools import _meminfo

DESCRIPTIONS: dict[str, str] = {
    "no-gpu": "nvidia-smi cannot reach the driver (prints NVIDIA-SMI has failed..., exit 9)",
    "docker-down": "every docker command fails: Cannot connect to the Docker daemon (exit 1)",
    "docker-denied": "every docker command fails: permission denied on the daemon socket (exit 1)",
    "no-nvidia-runtime": "docker info lists no nvidia runtime; docker run --gpus leaves a created container "
                         "(exit 125)",
    "rdma-port-down": "the ib_hca port is DOWN/DISABLED in sysfs, rdma, ibv_devinfo, ibdev2netdev and ip",
    "wrong-gid": "GID index gid_index of ib_hca is a RoCE v1 ULA GID; the IPv4 RoCE v2 GID moved to 5",
    "low-disk": "df reports little space available on srv_dir: 1/256 of the simulated disk, at most 30 GB (a "
                "demo host); a lab host's /srv tmpfs shrinks to what it holds plus 1 MiB",
    "low-memory": "/proc/meminfo MemAvailable is capped at 40 GiB",
    "slow-clocks": "nvidia-smi SM clock latched at 900 MHz whatever the load",
    "missing-shard": "checkpoint shard 17 is absent: hf never fetches it, existing copies are hidden",
    "wrong-image-id": "docker load gives the runtime image a different ID than the card's",
    "nccl-timeout": "the engine fails at NCCL init with ibv_modify_qp ... Connection timed out",
    "oom-at-load": "the engine is OOM-killed while loading weights (OOMKilled, exit 137)",
    "crash-after-ready": "the engine dies with a Traceback some time after it became ready",
    "hang": "the engine stops producing tokens while requests stay running",
    "traceback-on-stop": "the engine prints a Python traceback while it shuts down on SIGTERM (still exit 0)",
    "lost-during-run": "docker run starts the container, then the host vanishes (host-down) before answering",
    "host-down": "the host vanishes: SSH refused/unreachable (handled by the demo server and the lab)",
    "slow-docker": "a busy host: docker inspect answers 8 s late and docker logs lags its log by that long",
    "tp-deadlock": 'on the head (rank 0): a tensor-parallel deadlock: one rank never enters the collective '
                   '(by default the last rank), so the engine stops producing tokens '
                   'with requests running; nvidia-smi on that rank reads 0 % at a low clock while the others '
                   'spin at ~100 % (waiting in NCCL); py-spy dump shows where each rank waits',
    "fabric-degraded": "ib_write_bw/ib_write_lat through ib_hca run at a lower rate (50 Gb/s) and a higher "
                       "latency: a bad cable, port or PFC",
    "gpu-thermal": "nvidia-smi reports SW and HW thermal slowdown active at 92 C",
    "xid": "switching it on appends an NVRM Xid line to the kernel log (Xid 79: the GPU fell off the bus); "
           "kernel messages stay when it is switched off, as on a real host",
    "klog-denied": "journalctl may not read the system journal (the login is in neither adm nor "
                   "systemd-journal): its hint, no kernel line",
    "no-sigterm-handler": "the engine (PID 1 of its container) catches no SIGTERM: `docker stop` waits its "
                          "whole timeout, then SIGKILL (exit 137)",
}
assert set(DESCRIPTIONS) == set(layout.FAULTS), "every fault needs a description"

PARAMS: dict[str, dict[str, str]] = {
    "low-disk": {"avail_bytes": "bytes df reports available on a demo host",
                 "free_bytes": "bytes left free on a lab host's /srv tmpfs"},
    "low-memory": {"available_gib": "the MemAvailable cap in GiB (default 40)"},
    "slow-clocks": {"mhz": "the latched SM clock (default 900)"},
    "slow-docker": {"delay_s": "the delay in seconds (default 8)"},
    "tp-deadlock": {"rank_idle": "the rank that never enters the collective (default the last)"},
    "fabric-degraded": {"gbps": "the ib_write_bw rate (default 50)"},
    "gpu-thermal": {"reasons": 'clock event reasons, e.g. ["hw_power_brake_slowdown"]'},
    "xid": {"xid": "the Xid number (default 79)"},
}
"""The JSON params each fault reads (`sim fault RANK NAME --params JSON`); any other key is refused."""
assert set(PARAMS) <= set(layout.FAULTS)

MISSING_SHARD = "model-00017-of-00048.safetensors"


def stash_dir(root: Path) -> Path:
    return layout.run_dir(root) / "missing-shard"


def _srv_dir(root: Path, spec: layout.HostSpec) -> Path:
    return Path(spec.srv_dir) if spec.mode == "lab" or spec.srv_dir != "/srv" else layout.demo_srv_dir(root)


def _hide_shards(root: Path, spec: layout.HostSpec) -> None:
    """Move every copy of shard 17 under srv_dir into the stash, remembering where it was."""
    srv = _srv_dir(root, spec)
    stash = stash_dir(root)
    stash.mkdir(parents=True, exist_ok=True)
    record = stash / "moved.json"
    moved = json.loads(record.read_text()) if record.exists() else []
    for dirpath, _dirs, files in os.walk(srv):
        if MISSING_SHARD in files:
            src = Path(dirpath) / MISSING_SHARD
            dst = stash / f"{len(moved)}.safetensors"
            shutil.move(src, dst)
            moved.append({"from": str(src), "stash": str(dst)})
    record.write_text(json.dumps(moved, indent=2))


def _restore_shards(root: Path) -> None:
    record = stash_dir(root) / "moved.json"
    if not record.exists():
        return
    for item in json.loads(record.read_text()):
        src, dst = Path(item["stash"]), Path(item["from"])
        if src.exists() and not dst.exists() and dst.parent.is_dir():
            shutil.move(src, dst)
    shutil.rmtree(stash_dir(root), ignore_errors=True)


# what the driver prints after `NVRM: Xid (PCI:…): N, ` for a few Xids (driver 535-580 formats)
XID_TEXT = {
    13: "pid=48213, name=python3, Graphics SM Warp Exception on (GPC 0, TPC 1, SM 0): Illegal Instruction "
        "Encoding",
    31: "pid=48213, name=python3, Ch 00000008, intr 00000000. MMU Fault: ENGINE GRAPHICS GPCCLIENT_T1_0 "
        "faulted @ 0x7f3a_2c000000. Fault is of type FAULT_PDE ACCESS_TYPE_VIRT_READ",
    48: "pid='<unknown>', name=<unknown>, An uncorrectable double bit error (DBE) has been detected on GPU "
        "in the framebuffer at partition 0, subpartition 0.",
    79: "pid='<unknown>', name=<unknown>, GPU has fallen off the bus.",
    94: "pid=48213, name=python3, Contained: SM (0x1). RST: No, D-RST: No",
    95: "pid='<unknown>', name=<unknown>, Uncontained: LTC TAG (0x2,0x0). RST: Yes, D-RST: No",
    119: "pid='<unknown>', name=<unknown>, Timeout after 6s of waiting for RPC response from GPU0 GSP! "
         "Expected function 76 (GSP_RM_CONTROL) (0x20800a4c 0x4).",
}
XID_PCI = "PCI:000f:01:00"          # the GB10's bus (nvidia-smi's 0000000F:01:00.0)


def append_xid(root: Path, xid: int, at: float | None = None) -> str:
    """Append one NVRM Xid line to the host's kernel log (what journalctl/dmesg stand-ins print)."""
    import time

    text = XID_TEXT.get(xid, "pid='<unknown>', name=<unknown>")
    msg = f"NVRM: Xid ({XID_PCI}): {xid}, {text}"
    path = layout.run_dir(root) / "kernel.log"
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a") as f:
        f.write(f"{time.time() if at is None else at:.6f}\t{msg}\n")
    return msg


def set_fault(root: Path, name: str, on: bool, params: dict | None = None) -> None:
    """Switch a fault on (with optional JSON params) or off, and apply its on-disk side effects."""
    if name not in layout.FAULTS:
        raise ValueError(f"unknown fault {name!r}; known: {', '.join(layout.FAULTS)}")
    unknown = sorted(set(params or {}) - set(PARAMS.get(name, {})))
    if unknown:
        takes = ", ".join(PARAMS.get(name, {})) or "no params"
        raise ValueError(f"fault {name} takes {takes}, not {', '.join(unknown)}")
    root = Path(root)
    path = layout.faults_dir(root) / name
    path.parent.mkdir(parents=True, exist_ok=True)
    if on:
        tmp = path.with_name(f".{name}.tmp")
        tmp.write_text(json.dumps(params) if params else "")
        tmp.replace(path)
    else:
        path.unlink(missing_ok=True)
    if name in ("rdma-port-down", "wrong-gid"):
        from cockpit.sim.provision import write_fabric_state

        write_fabric_state(root, layout.read_spec(root))
    elif name == "xid" and on:
        append_xid(root, int((params or {}).get("xid", 79)))
    elif name == "low-memory":
        _meminfo.refresh(root)
    elif name == "missing-shard":
        spec = layout.read_spec(root)
        if on:
            _hide_shards(root, spec)
        else:
            _restore_shards(root)


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) not in (3, 4) or args[2] not in ("on", "off"):
        print("usage: python -m cockpit.sim.faults ROOT NAME on|off [JSON]\n\nfaults:", file=sys.stderr)
        for k, v in DESCRIPTIONS.items():
            print(f"  {k:<18} {v}", file=sys.stderr)
        return 2
    try:
        set_fault(Path(args[0]), args[1], args[2] == "on", json.loads(args[3]) if len(args) == 4 else None)
    except ValueError as e:
        print(f"faults: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
