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
    "low-disk": "df reports only 30 GB available on srv_dir (demo; the lab shrinks the tmpfs)",
    "low-memory": '/proc/meminfo MemAvailable is capped at 40 GiB (params: {"available_gib": N})',
    "slow-clocks": 'nvidia-smi SM clock latched at 900 MHz whatever the load (params: {"mhz": N})',
    "missing-shard": "checkpoint shard 17 is absent: hf never fetches it, existing copies are hidden",
    "wrong-image-id": "docker load gives the runtime image a different ID than the card's",
    "nccl-timeout": "the engine fails at NCCL init with ibv_modify_qp ... Connection timed out",
    "oom-at-load": "the engine is OOM-killed while loading weights (OOMKilled, exit 137)",
    "crash-after-ready": "the engine dies with a Traceback some time after it became ready",
    "hang": "the engine stops producing tokens while requests stay running",
    "traceback-on-stop": "the engine prints a Python traceback while it shuts down on SIGTERM (still exit 0)",
    "lost-during-run": "docker run starts the container, then the host vanishes (host-down) before answering",
    "host-down": "the host vanishes: SSH refused/unreachable (handled by the demo server and the lab)",
    "slow-docker": 'a busy host: docker inspect answers late and docker logs lags its log by that long '
                   '(params: {"delay_s": N}, default 8)',
    "fabric-degraded": 'ib_write_bw/ib_write_lat through ib_hca run at a lower rate (params: {"gbps": N}, '
                       'default 50) and a higher latency: a bad cable, port or PFC',
    "no-sigterm-handler": "the engine (PID 1 of its container) catches no SIGTERM: `docker stop` waits its "
                          "whole timeout, then SIGKILL (exit 137)",
}
assert set(DESCRIPTIONS) == set(layout.FAULTS), "every fault needs a description"

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


def set_fault(root: Path, name: str, on: bool, params: dict | None = None) -> None:
    """Switch a fault on (with optional JSON params) or off, and apply its on-disk side effects."""
    if name not in layout.FAULTS:
        raise ValueError(f"unknown fault {name!r}; known: {', '.join(layout.FAULTS)}")
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
