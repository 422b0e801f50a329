"""`sim up` / `sim down`: build a simulated cluster directory and start or stop its hosts.

A cluster directory holds everything a cockpit (or plain `ssh`) needs to reach the simulated hosts:

    DIR/cluster.toml          the cockpit's config for this cluster
    DIR/id_ed25519[.pub]      the client identity the hosts accept
    DIR/known_hosts           the hosts' keys (so nothing ever skips host key checking)
    DIR/ssh_config            `ssh -F DIR/ssh_config spark-0` works
    DIR/hostkeys/rank-N       each host's private host key
    DIR/bin/                  stand-in tools (first on every host's PATH)
    DIR/hub/                  the simulated Hugging Face hub
    DIR/hosts/rank-N/         each host's root ($R37_SIM_ROOT, see layout.py)
    DIR/sim-cluster.json      what `sim up` started (kind, pids, namespaces), read by `sim down`
"""

from __future__ import annotations

import getpass
import json
import os
import random
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import asyncssh

from cockpit import constants as C
from cockpit.sim import layout
from cockpit.sim.procs import alive, terminate

DEMO_SPEED = 45.0          # a ~15 min boot shown in ~20 s
DEMO_HANG_AFTER_S = 15.0   # [engine] hang_after_s of a simulated cluster (see cluster_toml)
DEMO_DISK_BYTES = 512 << 20
MANIFEST = "sim-cluster.json"


class SimError(Exception):
    """A simulated cluster could not be started or stopped; the message says why and what to do."""


@dataclass
class HostPlan:
    rank: int
    ssh_host: str
    ssh_port: int
    user: str
    root: Path
    spec: layout.HostSpec


@dataclass
class Manifest:
    kind: str
    dir: str
    pids: list[int] = field(default_factory=list)
    netns: list[str] = field(default_factory=list)
    extra: dict[str, object] = field(default_factory=dict)

    def save(self, cluster_dir: Path) -> None:
        _atomic_write(cluster_dir / MANIFEST, json.dumps(self.__dict__, indent=2))

    @classmethod
    def load(cls, cluster_dir: Path) -> Manifest | None:
        try:
            return cls(**json.loads((cluster_dir / MANIFEST).read_text()))
        except (OSError, ValueError, TypeError):
            return None


def _atomic_write(path: Path, text: str, mode: int | None = None) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text)
    if mode is not None:
        tmp.chmod(mode)
    tmp.replace(path)


def host_root(cluster_dir: Path, rank: int) -> Path:
    return cluster_dir / "hosts" / f"rank-{rank}"


def host_roots(cluster_dir: Path) -> list[Path]:
    return sorted((cluster_dir / "hosts").glob("rank-*"), key=lambda p: int(p.name.split("-")[1]))


def generate_keys(cluster_dir: Path, n: int) -> None:
    """The client identity and one host key per host (kept if already there)."""
    cluster_dir.mkdir(parents=True, exist_ok=True)
    ident = cluster_dir / "id_ed25519"
    if not ident.exists():
        key = asyncssh.generate_private_key("ssh-ed25519", comment="r37-cockpit-sim")
        key.write_private_key(str(ident))
        key.write_public_key(str(ident) + ".pub")
        ident.chmod(0o600)
    keys = cluster_dir / "hostkeys"
    keys.mkdir(exist_ok=True)
    for rank in range(n):
        path = keys / f"rank-{rank}"
        if not path.exists():
            asyncssh.generate_private_key("ssh-ed25519").write_private_key(str(path))
            path.chmod(0o600)


def demo_fabric_ips(n: int) -> list[str]:
    """Each demo host owns one 127.x address (all of 127/8 is loopback on Linux)."""
    a, b = random.randint(40, 250), random.randint(1, 250)
    return [f"127.{a}.{b}.{10 + r}" for r in range(n)]


def prepare_hosts(cluster_dir: Path, specs: list[layout.HostSpec], demo: bool):
    """Stand-in tools, the simulated hub and every host root. Returns the hub's info."""
    from cockpit.sim.hub import build_hub
    from cockpit.sim.provision import provision_host
    from cockpit.sim.tools import install_tools

    cluster_dir.mkdir(parents=True, exist_ok=True)
    hub = build_hub(cluster_dir / "hub")
    install_tools(cluster_dir / "bin", specs[0].python, demo=demo)
    for spec in specs:
        provision_host(host_root(cluster_dir, spec.rank), spec)
    return hub


def write_client_files(cluster_dir: Path, plans: list[HostPlan], hub: object, *, per_host_paths: bool,
                       speed: float, recipe_dir: str = "r37-recipe") -> Path:
    """cluster.toml, known_hosts and ssh_config for the cockpit (and plain ssh)."""
    known = []
    for p in plans:
        pub = asyncssh.read_private_key(str(cluster_dir / "hostkeys" / f"rank-{p.rank}")).export_public_key()
        host = p.ssh_host if p.ssh_port == 22 else f"[{p.ssh_host}]:{p.ssh_port}"
        known.append(f"{host} {pub.decode().strip()}")
    _atomic_write(cluster_dir / "known_hosts", "\n".join(known) + "\n")
    ssh_cfg = []
    for p in plans:
        ssh_cfg += [f"Host {p.spec.hostname}", f"  HostName {p.ssh_host}", f"  Port {p.ssh_port}",
                    f"  User {p.user}", f"  IdentityFile {cluster_dir / 'id_ed25519'}",
                    f"  UserKnownHostsFile {cluster_dir / 'known_hosts'}", "  StrictHostKeyChecking yes",
                    "  IdentitiesOnly yes", ""]
    _atomic_write(cluster_dir / "ssh_config", "\n".join(ssh_cfg))
    _atomic_write(cluster_dir / "cluster.toml", cluster_toml(cluster_dir, plans, hub,
                                                             per_host_paths=per_host_paths, speed=speed,
                                                             recipe_dir=recipe_dir))
    return cluster_dir / "cluster.toml"


def _q(value: str) -> str:
    return json.dumps(value)  # a JSON string is a valid TOML basic string


def cluster_toml(cluster_dir: Path, plans: list[HostPlan], hub: object, *, per_host_paths: bool,
                 speed: float, recipe_dir: str = "r37-recipe") -> str:
    ckpt = C.DEALIGNAI_REPO
    repo_info = getattr(hub, "repos", {}).get(ckpt)
    revision = repo_info.commit if repo_info else None
    lines = [
        "# Written by `r37-cockpit sim up` for a simulated cluster. Safe to edit; `sim down` removes it.",
        "",
        "[cluster]",
        f"name = {_q('sim-' + plans[0].spec.mode)}",
        "",
        "[model]",
        f"repo = {_q(ckpt)}",
        *([f"revision = {_q(revision)}"] if revision else []),
        'path = "/srv/models/DeepSeek-V4.1-Flash-dealignai"',
        "",
        "[runtime]",
        f"sha256 = {_q(getattr(hub, 'archive_sha256', C.ARCHIVE_SHA256))}",
        f"size_bytes = {int(getattr(hub, 'archive_size', C.ARCHIVE_SIZE))}",
        "",
        "[paths]",
        'engram = "/srv/engram-local/DeepSeek-V4.1-Flash"',
        'cache = "/srv/cache"',
        f"recipe_dir = {_q(recipe_dir)}",
        "",
        "# The simulated checkpoint, archive and Engram rows are tiny: budgets scaled to match.",
        "[budget]",
        f"checkpoint_bytes = {16 << 20}",
        f"engram_bytes = {4 << 20}",
        f"runtime_bytes = {32 << 20}",
        f"min_mem_available_bytes = {C.MIN_MEM_AVAILABLE}",
        "",
        "[ssh]",
        f"known_hosts = {_q(str(cluster_dir / 'known_hosts'))}",
        f"identity_file = {_q(str(cluster_dir / 'id_ed25519'))}",
        "",
        "# The simulated engine boots time-compressed but serves in real time (about 50 tok/s, a step every",
        "# 44-77 ms; prefill chunks count in vllm:prompt_tokens_total as they go), so between two of the",
        "# cockpit's /metrics probes (every 2 s) a healthy engine's counters always move. 90 s / speed would",
        "# be a single probe interval; 15 s spans seven, and the `hang` fault is reported 15 s after it.",
        "[engine]",
        f"hang_after_s = {DEMO_HANG_AFTER_S:g}",
        "",
    ]
    for p in plans:
        s = p.spec
        lines += [
            "[[hosts]]",
            f"rank = {p.rank}",
            f"ssh = {_q(p.ssh_host)}",
            f"user = {_q(p.user)}",
            f"port = {p.ssh_port}",
            f"fabric_ip = {_q(s.fabric_ip)}",
            f"fabric_iface = {_q(s.fabric_iface)}",
            f"ib_hca = [{_q(s.ib_hca)}]",
            f"gid_index = {s.gid_index}",
        ]
        if per_host_paths:
            srv = s.srv_dir
            lines += [
                f"model_path = {_q(srv + '/models/DeepSeek-V4.1-Flash-dealignai')}",
                f"engram_path = {_q(srv + '/engram-local/DeepSeek-V4.1-Flash')}",
                f"cache_path = {_q(srv + '/cache')}",
            ]
        lines.append("")
    return "\n".join(lines)


def _wait_for(path: Path, timeout: float, proc: subprocess.Popen[bytes] | None, log: Path) -> dict:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if path.exists():
            return json.loads(path.read_text())
        if proc is not None and proc.poll() is not None:
            tail = log.read_text(errors="replace")[-2000:] if log.exists() else ""
            raise SimError(f"the demo cluster process exited with {proc.returncode}:\n{tail}")
        time.sleep(0.05)
    raise SimError(f"the demo cluster did not come up within {timeout:g} s (see {log})")


def demo_up(cluster_dir: Path, *, n: int = 4, speed: float = DEMO_SPEED) -> Path:
    """Start the demo cluster (no root) in a background process; returns DIR/cluster.toml."""
    cluster_dir = cluster_dir.resolve()
    if (m := Manifest.load(cluster_dir)) and any(alive(pid) for pid in m.pids):
        raise SimError(f"a simulated cluster is already running from {cluster_dir}; "
                       f"`r37-cockpit sim down --dir {cluster_dir}` stops it")
    ips = demo_fabric_ips(n)
    specs = [layout.HostSpec(rank=r, nranks=n, hostname=f"spark-{r}", mode="demo", fabric_ip=ips[r],
                             peers=ips, api_bind=ips[r], speed=speed, python=sys.executable,
                             hub_dir=str(cluster_dir / "hub"),
                             srv_dir=str(layout.demo_srv_dir(host_root(cluster_dir, r))),
                             disk_bytes=DEMO_DISK_BYTES)
             for r in range(n)]
    generate_keys(cluster_dir, n)
    hub = prepare_hosts(cluster_dir, specs, demo=True)
    plan = {
        "user": getpass.getuser(),
        "authorized_keys": str(cluster_dir / "id_ed25519.pub"),
        "path_dirs": [str(cluster_dir / "bin")],
        "hosts": [{"root": str(host_root(cluster_dir, s.rank)),
                   "host_key": str(cluster_dir / "hostkeys" / f"rank-{s.rank}")} for s in specs],
    }
    _atomic_write(cluster_dir / "demo-plan.json", json.dumps(plan, indent=2))
    ready_file = cluster_dir / "demo-ready.json"
    ready_file.unlink(missing_ok=True)
    log = cluster_dir / "demo.log"
    with open(log, "ab") as out:
        proc = subprocess.Popen([sys.executable, "-m", "cockpit.sim.demo", str(cluster_dir)],
                                stdin=subprocess.DEVNULL, stdout=out, stderr=out, start_new_session=True)
    Manifest("demo", str(cluster_dir), pids=[proc.pid]).save(cluster_dir)
    ready = _wait_for(ready_file, 30, proc, log)
    plans = [HostPlan(s.rank, "127.0.0.1", ready["ports"][s.rank], plan["user"],
                      host_root(cluster_dir, s.rank), s) for s in specs]
    return write_client_files(cluster_dir, plans, hub, per_host_paths=True, speed=speed)


def sim_processes(cluster_dir: Path) -> list[int]:
    """Every process whose R37_SIM_ROOT lies in this cluster directory (shells, shims, engines)."""
    prefix = f"{layout.ROOT_ENV}={cluster_dir.resolve()}/".encode()
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            env = (entry / "environ").read_bytes()
        except OSError:
            continue
        if any(item.startswith(prefix) for item in env.split(b"\0")):
            found.append(int(entry.name))
    return found


def down(cluster_dir: Path) -> list[str]:
    """Stop exactly what `sim up` started in this directory; returns what was stopped."""
    cluster_dir = cluster_dir.resolve()
    manifest = Manifest.load(cluster_dir)
    if manifest is None:
        raise SimError(f"no simulated cluster in {cluster_dir} (no {MANIFEST})")
    stopped: list[str] = []
    if manifest.kind == "lab":
        from cockpit.sim.lab import lab_down
        stopped += lab_down(cluster_dir, manifest)
    terminate(manifest.pids)
    stopped += [f"process {p}" for p in manifest.pids]
    leftovers = sim_processes(cluster_dir)
    terminate(leftovers)
    stopped += [f"host process {p}" for p in leftovers]
    (cluster_dir / MANIFEST).unlink(missing_ok=True)
    for name in ("demo-ready.json", "cluster.toml"):
        (cluster_dir / name).unlink(missing_ok=True)
    return stopped
