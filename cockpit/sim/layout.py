"""The on-disk contract of one simulated host (its *host root*, `$R37_SIM_ROOT`).

Every stand-in, the container shim, the engine and the cluster plumbing find their files through
this module, so the layout is written down once.

    <root>/sim.json                HostSpec as JSON (identity, fabric, mode, python, hub dir, ...)
    <root>/faults/<name>           a file per active fault switch (content: optional JSON params)
    <root>/proc/meminfo            what the host's /proc/meminfo says, kept current (see below)
    <root>/proc/meminfo.base       the idle base it is rendered from (written by `provision_host`)
    <root>/sys/class/infiniband/   sysfs-style RDMA tree (counters, hw_counters, gids, gid_attrs)
    <root>/docker/                 the docker stand-in's images, containers and logs
    <root>/run/                    live readings written by the engine (gpu.json), pid files
    <root>/home/                   HOME of the SSH login (the recipe's working directory lives here)
    <root>/srv/                    what stands for /srv on a demo host (the lab mounts a real tmpfs)

Files the engine writes (atomic replace) and the stand-ins read:

    <root>/run/gpu.json            {"utilization": int %, "power_w": float, "sm_clock_mhz": int,
                                    "apps": [{"pid": int, "used_mib": int, "name"?: str}],
                                    "temperature_c"?: float}; missing = idle (0 %, ~4 W, 208 MHz, P8)
    <root>/run/mem.json            {"used_bytes": N}: subtracted from the base's MemFree/MemAvailable
    <root>/sys/class/infiniband/<hca>/ports/1/counters/<name>, hw_counters/<name>
                                   decimal + "\n", replaced atomically (port_xmit_data/rcv_data are
                                   octets / 4, as in the kernel); while the port is not ACTIVE the data
                                   counters stand still and local_ack_timeout_err/roce_adp_retrans rise
    <root>/docker/containers/<id>/ config.json, state.json (by the container shim), <id>-json.log,
                                   oom_killed (created by the engine just before it dies of OOM)

Files that plain shell builtins read (`read < file`, globs) must hold the current value themselves:
`proc/meminfo` is re-rendered (`cockpit.sim.tools._meminfo.refresh`: base, mem.json, `low-memory`) by
every writer of an input (provisioning, the engine, the container shim, `faults.set_fault`); the `cat`
and `head` stand-ins render the same text at read time.

The container shim gives the engine `R37_SIM_ROOT` and `R37_SIM_CONTAINER_DIR` (= the container dir).
Sysfs port state (`ports/1/state`, `phys_state`) and GID tables (`gids/N`, `gid_attrs/{types,ndevs}/N`;
unused entries hold the zero GID and their attrs read EINVAL through the cat/head stand-ins) are
written by `provision_host` and `faults.set_fault`. Faults with on-disk side effects (rdma-port-down,
wrong-gid, missing-shard) must be switched with `cockpit.sim.faults.set_fault`.
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Literal

ROOT_ENV = "R37_SIM_ROOT"

FAULTS = (
    "no-gpu", "docker-down", "docker-denied", "no-nvidia-runtime", "rdma-port-down", "wrong-gid", "low-disk",
    "low-memory", "slow-clocks", "missing-shard", "wrong-image-id", "nccl-timeout", "oom-at-load",
    "crash-after-ready", "hang", "traceback-on-stop", "lost-during-run", "host-down", "slow-docker",
    "fabric-degraded", "gpu-thermal", "xid", "klog-denied", "tp-deadlock", "no-sigterm-handler",
)


@dataclass
class HostSpec:
    rank: int
    nranks: int
    hostname: str
    mode: Literal["demo", "lab"]
    fabric_ip: str
    peers: list[str]                       # fabric IPs by rank
    fabric_iface: str = "enp1s0f0np0"
    fabric_prefix: int = 24
    hcas: list[str] = field(default_factory=lambda: ["rocep1s0f0", "rocep1s0f1",
                                                     "roceP2p1s0f0", "roceP2p1s0f1"])
    netdevs: list[str] = field(default_factory=lambda: ["enp1s0f0np0", "enp1s0f1np1",
                                                        "enP2p1s0f0np0", "enP2p1s0f1np1"])
    ib_hca: str = "rocep1s0f0"
    gid_index: int = 3
    api_bind: str = "0.0.0.0"              # demo: the host's own 127.x fabric IP (hosts share loopback)
    speed: float = 60.0                    # boot time compression factor of the simulated engine
    python: str = ""                       # interpreter that runs stand-ins and the engine
    hub_dir: str = ""                      # the simulated Hugging Face hub shared by all hosts
    srv_dir: str = "/srv"                  # demo: <root>/srv; lab: /srv (a per-host tmpfs)
    disk_bytes: int = 0                    # demo: the size df reports for srv_dir (0 = real df)
    engine: str = "sim"                    # "vllm": the head's `vllm serve` is the real vLLM (realvllm.py)
    vllm_python: str = ""                  # engine "vllm": the vLLM environment's python
    vllm_model: str = ""                   # engine "vllm": the tiny model's folder


def root_from_env() -> Path:
    return Path(os.environ.get(ROOT_ENV, "/var/lib/r37-sim"))


def spec_path(root: Path) -> Path:
    return root / "sim.json"


def write_spec(root: Path, spec: HostSpec) -> None:
    root.mkdir(parents=True, exist_ok=True)
    tmp = spec_path(root).with_suffix(".tmp")
    tmp.write_text(json.dumps(asdict(spec), indent=2))
    tmp.replace(spec_path(root))


def read_spec(root: Path) -> HostSpec:
    return HostSpec(**json.loads(spec_path(root).read_text()))


def faults_dir(root: Path) -> Path:
    return root / "faults"


def fault_active(root: Path, name: str) -> bool:
    return (faults_dir(root) / name).exists()


def fault_params(root: Path, name: str) -> dict:
    """The JSON params of an active fault ({} when none, empty or unreadable)."""
    try:
        text = (faults_dir(root) / name).read_text().strip()
        value = json.loads(text) if text else {}
    except (OSError, ValueError):
        return {}
    return value if isinstance(value, dict) else {}


def active_faults(root: Path) -> list[str]:
    d = faults_dir(root)
    return sorted(p.name for p in d.iterdir()) if d.is_dir() else []


def meminfo_path(root: Path) -> Path:
    return root / "proc" / "meminfo"


def meminfo_base_path(root: Path) -> Path:
    return root / "proc" / "meminfo.base"


def infiniband_dir(root: Path) -> Path:
    return root / "sys" / "class" / "infiniband"


def docker_dir(root: Path) -> Path:
    return root / "docker"


def run_dir(root: Path) -> Path:
    return root / "run"


def home_dir(root: Path) -> Path:
    return root / "home"


def demo_srv_dir(root: Path) -> Path:
    return root / "srv"


def prompt(hostname: str) -> str:
    """bash's PS1 for a shell on `hostname` (bash's own `\\h` would name the machine the demo runs on):
    the demo's logins and `docker exec -it` into a container both show it."""
    return "\\u@" + re.sub(r"[^A-Za-z0-9._-]", "", hostname)[:64] + ":\\w\\$ "
