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
    DIR/sim-cluster.json      what `sim up` started (kind, pids, namespaces) and the files and
                              directories it wrote (each file's sha256), read by `sim down`

`sim up` never overwrites what it did not write: a DIR holding any of these names that the manifest does
not record (or a recorded file changed since) is refused (`DirInUse`). `sim down` deletes only
cluster.toml and demo-ready.json, and only when they are what `sim up` wrote; it never deletes a
directory. The manifest stays (state "down") so that `sim up` on the same DIR reuses its own files.
"""

from __future__ import annotations

import getpass
import hashlib
import json
import os
import secrets
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import asyncssh

from cockpit import constants
from cockpit.sim import layout
from cockpit.sim.demo_addresses import BLOCK_KEY, block_ips, claim_block, release_block
from cockpit.sim.procs import alive, terminate
from cockpit.sim.size import DEFAULT_HOSTS, check_host_count

DEMO_SPEED = 45.0          # a ~15 min boot shown in ~20 s
DEMO_HANG_AFTER_S = 15.0   # [engine] hang_after_s of a simulated cluster (see cluster_toml)
DEMO_DISK_BYTES = 512 << 20
MANIFEST = "sim-cluster.json"


OWN_FILES = ("cluster.toml", "known_hosts", "ssh_config", "id_ed25519", "id_ed25519.pub", "demo-plan.json",
             "demo-ready.json")
OWN_LOGS = ("demo.log",)            # appended to by the simulated cluster: recorded without a digest
OWN_DIRS = ("hostkeys", "bin", "hub", "hosts", "lab")
DOWN_REMOVES = ("cluster.toml", "demo-ready.json")


class SimError(Exception):
    """A simulated cluster could not be started or stopped; the message says why and what to do."""


class DirInUse(SimError):
    """The cluster directory holds a file or directory `sim up` would write but did not write itself."""

    def __init__(self, path: Path, why: str):
        self.path = path
        super().__init__(f"{path} {why}: `sim up` never overwrites what it did not write; "
                         "pass --dir with a new or empty directory")


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
    extra: dict[str, Any] = field(default_factory=dict)  # JSON, keys per kind (lab: see lab.new_manifest)
    files: dict[str, str | None] = field(default_factory=dict)   # name -> sha256 of what the sim wrote
    dirs: list[str] = field(default_factory=list)                # directories the sim made (or reuses)
    state: str = "up"

    def save(self, cluster_dir: Path) -> None:
        _atomic_write(cluster_dir / MANIFEST, json.dumps(self.__dict__, indent=2).encode())

    @classmethod
    def load(cls, cluster_dir: Path) -> Manifest | None:
        try:
            m = cls(**json.loads((cluster_dir / MANIFEST).read_text()))
        except (OSError, ValueError, TypeError, RecursionError):
            return None
        if not (isinstance(m.files, dict) and isinstance(m.dirs, list) and isinstance(m.pids, list)):
            return None
        return m


def _atomic_write(path: Path, data: bytes, mode: int = 0o666) -> None:
    """A unique temp file (created with `mode` less the umask), fsync, rename over `path`."""
    tmp = path.with_name(f".{path.name}.{secrets.token_hex(4)}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, mode)
    try:
        with os.fdopen(fd, "wb") as out:
            out.write(data)
            out.flush()
            os.fsync(out.fileno())
        tmp.replace(path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def sha256_file(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def claim_dir(cluster_dir: Path) -> Manifest | None:
    """Check that `sim up` may write into `cluster_dir`; returns the earlier manifest there (if any).

    Every name `sim up` writes must be absent, or recorded in the manifest and (for a file) unchanged.
    Raises DirInUse naming the first one that is not.
    """
    if os.path.lexists(cluster_dir) and not cluster_dir.is_dir():
        raise DirInUse(cluster_dir, "exists and is not a directory")
    prev = Manifest.load(cluster_dir)
    if prev is None and os.path.lexists(cluster_dir / MANIFEST):
        raise DirInUse(cluster_dir / MANIFEST, "exists and is not the manifest of a simulated cluster")
    files = prev.files if prev else {}
    dirs = prev.dirs if prev else []
    for name in (*OWN_FILES, *OWN_LOGS):
        path = cluster_dir / name
        if not os.path.lexists(path):
            continue
        if path.is_symlink() or not path.is_file():
            raise DirInUse(path, "exists and is not a file `sim up` wrote")
        if name not in files:
            raise DirInUse(path, "exists and was not written by `sim up`")
        digest = files[name]
        if digest is not None and sha256_file(path) != digest:
            raise DirInUse(path, "was changed since `sim up` wrote it (move it away to keep it)")
    for name in OWN_DIRS:
        path = cluster_dir / name
        if os.path.lexists(path) and (name not in dirs or path.is_symlink() or not path.is_dir()):
            raise DirInUse(path, "exists and was not made by `sim up`")
    return prev


def start_manifest(cluster_dir: Path, kind: str, prev: Manifest | None, **kw: object) -> Manifest:
    """The manifest of a cluster about to start in `cluster_dir`, carrying what an earlier one wrote
    (only names that still exist), saved before anything else is written."""
    cluster_dir.mkdir(parents=True, exist_ok=True)
    files = {k: v for k, v in (prev.files if prev else {}).items() if os.path.lexists(cluster_dir / k)}
    dirs = [d for d in (prev.dirs if prev else []) if (cluster_dir / d).is_dir()]
    manifest = Manifest(kind, str(cluster_dir), files=files, dirs=dirs, **kw)  # type: ignore[arg-type]
    manifest.save(cluster_dir)
    return manifest


def write_owned(cluster_dir: Path, manifest: Manifest, name: str, data: bytes, mode: int = 0o666) -> Path:
    """Write one of the sim's own files: its digest is recorded in the manifest before the file exists."""
    manifest.files[name] = hashlib.sha256(data).hexdigest()
    manifest.save(cluster_dir)
    _atomic_write(cluster_dir / name, data, mode)
    return cluster_dir / name


def own_dir(cluster_dir: Path, manifest: Manifest, name: str) -> Path:
    """Make (or reuse) one of the sim's own directories, recorded in the manifest first."""
    if name not in manifest.dirs:
        manifest.dirs.append(name)
        manifest.save(cluster_dir)
    path = cluster_dir / name
    path.mkdir(exist_ok=True)
    return path


def record_written(cluster_dir: Path, manifest: Manifest, name: str) -> None:
    """Record a file another process of the sim wrote (demo-ready.json, from the demo process)."""
    manifest.files[name] = sha256_file(cluster_dir / name)
    manifest.save(cluster_dir)


def host_root(cluster_dir: Path, rank: int) -> Path:
    return cluster_dir / "hosts" / f"rank-{rank}"


def cluster_size(cluster_dir: Path) -> int | None:
    """How many hosts the cluster last started in `cluster_dir` has (rank 0's spec), None if unknown."""
    try:
        n = layout.read_spec(host_root(cluster_dir, 0)).nranks
    except (OSError, ValueError, TypeError):
        return None
    return n if isinstance(n, int) and n > 0 else None


def host_roots(cluster_dir: Path) -> list[Path]:
    """The host roots of the cluster's ranks, in rank order. A DIR reused with fewer hosts keeps the
    roots of the earlier, larger cluster: those ranks are not part of it and are left out."""
    n = cluster_size(cluster_dir)
    roots = [p for p in (cluster_dir / "hosts").glob("rank-*") if p.name[5:].isdigit()]
    return sorted((p for p in roots if n is None or int(p.name[5:]) < n), key=lambda p: int(p.name[5:]))


def generate_keys(cluster_dir: Path, n: int, manifest: Manifest) -> None:
    """The client identity and one host key per host (kept if already there: claim_dir checked them)."""
    cluster_dir.mkdir(parents=True, exist_ok=True)
    ident = cluster_dir / "id_ed25519"
    if not (ident.exists() and (cluster_dir / "id_ed25519.pub").exists()):
        key = asyncssh.generate_private_key("ssh-ed25519", comment="r37-cockpit-sim")
        write_owned(cluster_dir, manifest, "id_ed25519", key.export_private_key(), 0o600)
        write_owned(cluster_dir, manifest, "id_ed25519.pub", key.export_public_key())
    keys = own_dir(cluster_dir, manifest, "hostkeys")
    for rank in range(n):
        path = keys / f"rank-{rank}"
        if not path.exists():
            asyncssh.generate_private_key("ssh-ed25519").write_private_key(str(path))
            path.chmod(0o600)


def holds_block(cluster_dir: Path, block: str) -> bool:
    """Whether the demo cluster in `cluster_dir` is up and was given `block` (demo_addresses)."""
    m = Manifest.load(cluster_dir)
    return m is not None and m.kind == "demo" and m.state == "up" and m.extra.get(BLOCK_KEY) == block


def prepare_hosts(cluster_dir: Path, specs: list[layout.HostSpec], demo: bool, manifest: Manifest):
    """Stand-in tools, the simulated hub and every host root. Returns the hub's info."""
    from cockpit.sim.hub import build_hub
    from cockpit.sim.provision import provision_host
    from cockpit.sim.tools import install_tools

    cluster_dir.mkdir(parents=True, exist_ok=True)
    for name in ("hub", "bin", "hosts"):
        own_dir(cluster_dir, manifest, name)
    hub = build_hub(cluster_dir / "hub")
    install_tools(cluster_dir / "bin", specs[0].python, demo=demo)
    for spec in specs:
        provision_host(host_root(cluster_dir, spec.rank), spec)
    return hub


def write_client_files(cluster_dir: Path, plans: list[HostPlan], hub: object, *, per_host_paths: bool,
                       speed: float, manifest: Manifest, recipe_dir: str = "r37-recipe") -> Path:
    """cluster.toml, known_hosts and ssh_config for the cockpit (and plain ssh)."""
    known = []
    for p in plans:
        pub = asyncssh.read_private_key(str(cluster_dir / "hostkeys" / f"rank-{p.rank}")).export_public_key()
        host = p.ssh_host if p.ssh_port == 22 else f"[{p.ssh_host}]:{p.ssh_port}"
        known.append(f"{host} {pub.decode().strip()}")
    write_owned(cluster_dir, manifest, "known_hosts", ("\n".join(known) + "\n").encode())
    ssh_cfg = []
    for p in plans:
        ssh_cfg += [f"Host {p.spec.hostname}", f"  HostName {p.ssh_host}", f"  Port {p.ssh_port}",
                    f"  User {p.user}", f"  IdentityFile {cluster_dir / 'id_ed25519'}",
                    f"  UserKnownHostsFile {cluster_dir / 'known_hosts'}", "  StrictHostKeyChecking yes",
                    "  IdentitiesOnly yes", ""]
    write_owned(cluster_dir, manifest, "ssh_config", "\n".join(ssh_cfg).encode())
    text = cluster_toml(cluster_dir, plans, hub, per_host_paths=per_host_paths, speed=speed,
                        recipe_dir=recipe_dir)
    return write_owned(cluster_dir, manifest, "cluster.toml", text.encode())


def _q(value: str) -> str:
    return json.dumps(value)  # a JSON string is a valid TOML basic string


def cluster_toml(cluster_dir: Path, plans: list[HostPlan], hub: object, *, per_host_paths: bool,
                 speed: float, recipe_dir: str = "r37-recipe") -> str:
    ckpt = constants.DEALIGNAI_REPO
    repo_info = getattr(hub, "repos", {}).get(ckpt)
    revision = repo_info.commit if repo_info else None
    lines = [
        "# Written by `r37-cockpit sim up` for a simulated cluster. `sim down` removes it unless it was",
        "# edited (then it is kept, and `sim up` refuses to overwrite it).",

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
        f"sha256 = {_q(getattr(hub, 'archive_sha256', constants.ARCHIVE_SHA256))}",
        f"size_bytes = {int(getattr(hub, 'archive_size', constants.ARCHIVE_SIZE))}",
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
        f"min_mem_available_bytes = {constants.MIN_MEM_AVAILABLE}",
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


NO_REAL_ENGINE = ("sim", "", "")


def real_engine() -> tuple[str, str, str]:
    """The HostSpec fields of `--engine vllm`: the vLLM environment and the tiny model (built on first
    use). SimError naming scripts/vllm-venv.sh when the environment is not installed."""
    from cockpit.sim import realvllm
    try:
        py = realvllm.find_python()
    except realvllm.NotInstalled as exc:
        raise SimError(str(exc)) from None
    try:
        model = realvllm.tiny_model(py)
    except (OSError, subprocess.SubprocessError) as exc:
        raise SimError(f"the tiny model for the real vLLM could not be built with {py}: {exc}") from None
    return ("vllm", str(py), str(model))   # HostSpec's engine, vllm_python, vllm_model


def demo_up(cluster_dir: Path, *, n: int = DEFAULT_HOSTS, speed: float = DEMO_SPEED,
            engine: str = "sim") -> Path:
    """Start a demo cluster of `n` hosts (no root) in a background process; returns DIR/cluster.toml.
    engine "vllm": rank 0's `vllm serve` is the real vLLM (realvllm.py); the workers stay simulated."""
    check_host_count(n)
    real = real_engine() if engine == "vllm" else NO_REAL_ENGINE
    cluster_dir = cluster_dir.resolve()
    if (m := Manifest.load(cluster_dir)) and any(alive(pid) for pid in m.pids):
        raise SimError(f"a simulated cluster is already running from {cluster_dir}; "
                       f"`r37-cockpit sim down --dir {cluster_dir}` stops it")
    manifest = start_manifest(cluster_dir, "demo", claim_dir(cluster_dir))
    try:
        block = claim_block(cluster_dir, holds_block)
    except RuntimeError as exc:
        raise SimError(str(exc)) from None
    manifest.extra[BLOCK_KEY] = block
    manifest.save(cluster_dir)
    ips = block_ips(block, n)
    specs = [layout.HostSpec(rank=r, nranks=n, hostname=f"spark-{r}", mode="demo", fabric_ip=ips[r],
                             peers=ips, api_bind=ips[r], speed=speed, python=sys.executable,
                             hub_dir=str(cluster_dir / "hub"),
                             srv_dir=str(layout.demo_srv_dir(host_root(cluster_dir, r))),
                             disk_bytes=DEMO_DISK_BYTES,
                             engine=real[0], vllm_python=real[1], vllm_model=real[2])
             for r in range(n)]
    generate_keys(cluster_dir, n, manifest)
    hub = prepare_hosts(cluster_dir, specs, demo=True, manifest=manifest)
    user = getpass.getuser()
    plan = {
        "user": user,
        "authorized_keys": str(cluster_dir / "id_ed25519.pub"),
        "path_dirs": [str(cluster_dir / "bin")],
        "hosts": [{"root": str(host_root(cluster_dir, s.rank)),
                   "host_key": str(cluster_dir / "hostkeys" / f"rank-{s.rank}")} for s in specs],
    }
    write_owned(cluster_dir, manifest, "demo-plan.json", json.dumps(plan, indent=2).encode())
    ready_file = cluster_dir / "demo-ready.json"
    ready_file.unlink(missing_ok=True)               # claim_dir: absent, or the sim's own and unchanged
    # the demo process writes these two: recorded as the sim's before it starts (no digest yet)
    manifest.files.update({"demo-ready.json": None, "demo.log": None})
    manifest.save(cluster_dir)
    log = cluster_dir / "demo.log"
    with open(log, "ab") as out:
        proc = subprocess.Popen([sys.executable, "-m", "cockpit.sim.demo", str(cluster_dir)],
                                stdin=subprocess.DEVNULL, stdout=out, stderr=out, start_new_session=True)
    manifest.pids = [proc.pid]
    manifest.save(cluster_dir)
    ready = _wait_for(ready_file, 30, proc, log)
    record_written(cluster_dir, manifest, "demo-ready.json")
    plans = [HostPlan(s.rank, "127.0.0.1", ready["ports"][s.rank], user,
                      host_root(cluster_dir, s.rank), s) for s in specs]
    return write_client_files(cluster_dir, plans, hub, per_host_paths=True, speed=speed, manifest=manifest)


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
    """Stop exactly what `sim up` started in this directory; returns what was stopped (and, as
    "kept …" entries, the files it left because they changed since `sim up` wrote them)."""
    cluster_dir = cluster_dir.resolve()
    manifest = Manifest.load(cluster_dir)
    if manifest is None:
        raise SimError(f"no simulated cluster in {cluster_dir} (no {MANIFEST})")
    if manifest.state == "down" and not sim_processes(cluster_dir):
        raise SimError(f"no simulated cluster running in {cluster_dir} (it is down already; "
                       f"`r37-cockpit sim up --dir {cluster_dir}` starts it again)")
    stopped: list[str] = []
    if manifest.kind == "lab":
        from cockpit.sim.lab import lab_down
        stopped += lab_down(cluster_dir, manifest)
    terminate(manifest.pids)
    stopped += [f"process {p}" for p in manifest.pids]
    leftovers = sim_processes(cluster_dir)
    terminate(leftovers)
    stopped += [f"host process {p}" for p in leftovers]
    stopped += remove_own_files(cluster_dir, manifest)
    manifest.pids = []
    manifest.state = "down"
    manifest.save(cluster_dir)        # kept: it says which files here are the sim's for the next `sim up`
    if isinstance(block := manifest.extra.get(BLOCK_KEY), str):
        release_block(cluster_dir, block)
    return stopped


def remove_own_files(cluster_dir: Path, manifest: Manifest) -> list[str]:
    """Delete DOWN_REMOVES where they are exactly what the sim wrote; returns "kept …" notes for the
    ones that changed. A name the manifest does not record is never touched; no directory is deleted."""
    kept: list[str] = []
    for name in DOWN_REMOVES:
        path = cluster_dir / name
        if not os.path.lexists(path):
            manifest.files.pop(name, None)
            continue
        if name not in manifest.files:
            continue
        digest = manifest.files[name]
        if path.is_symlink() or not path.is_file() or (digest is not None and sha256_file(path) != digest):
            kept.append(f"kept {path} (changed since `sim up` wrote it)")
            continue
        path.unlink()
        del manifest.files[name]
    return kept

