"""The network-namespace lab (root, Linux): real OpenSSH `sshd`s in network namespaces on two bridges.

Each simulated host N gets

    netns  r37lab-<id>-N          its own network stack: lo, enP7s7 (management), enp1s0f0np0 (fabric)
    mount + UTS namespace          hostname spark-N, a tmpfs on /srv, its host root on /var/lib/r37-sim,
                                   the cluster's stand-ins (DIR/bin) on /usr/local/bin
    /usr/sbin/sshd                 listening on its management IP only, port 22; every session gets
                                   R37_SIM_ROOT=/var/lib/r37-sim (sshd_config SetEnv)

The management bridge `r37m-<id>` holds the admin address (.1 of the management /24), so the cockpit in
the root namespace reaches host N at .(10+N):22. The fabric bridge `r37f-<id>` joins the hosts' fabric
links and has no address: the root namespace cannot reach the fabric. Nothing is routed, NATed or
forwarded outside our own namespaces and bridges.

A watcher (`python -m cockpit.sim.lab watch DIR`, started by `lab_up`) turns the faults that live below
the host's software into real events: `host-down` takes both of the host's links down, `low-disk`
shrinks the host's /srv tmpfs to just above what it holds. Everything else is read by the stand-ins.
"""

from __future__ import annotations

import contextlib
import fcntl
import ipaddress
import json
import os
import random
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from cockpit.sim import layout
from cockpit.sim.cluster import (
    DEMO_SPEED,
    NO_REAL_ENGINE,
    HostPlan,
    Manifest,
    SimError,
    claim_dir,
    generate_keys,
    host_root,
    own_dir,
    prepare_hosts,
    real_engine,
    start_manifest,
    write_client_files,
)
from cockpit.sim.procs import alive, reap, terminate
from cockpit.sim.size import DEFAULT_HOSTS, check_host_count

PREFIX = "r37lab"
MGMT_IFACE = "enP7s7"
SSHD = "/usr/sbin/sshd"
HOST_ROOT_MOUNT = "/var/lib/r37-sim"   # layout.root_from_env() without R37_SIM_ROOT; sshd sets it anyway
BIN_MOUNT = "/usr/local/bin"           # on sshd's default PATH, before /usr/bin
SRV_MOUNT = "/srv"
RECIPE_DIR = "/srv/r37-recipe"         # per host: /srv is each host's own tmpfs, HOME (/root) is shared
DEFAULT_SRV_BYTES = 512 << 20
LOW_DISK_HEADROOM = 1 << 20            # free bytes left on /srv while `low-disk` is active
WATCH_POLL = 0.3
READY_TIMEOUT = 20.0
LOCK_FILE = "/run/r37lab.lock"

# Runs inside the host's fresh mount + UTS namespace, then becomes its sshd (same pid).
HOST_INIT = (
    'set -e; hostname "$1"; mount -t tmpfs -o "size=$2,mode=0755" r37lab-srv "$3"; '
    'mount --bind "$4" "$5"; mount --bind "$6" "$7"; '
    'if [ -f "${11}" ]; then mount --bind "${10}" "${11}"; fi; exec "$8" -D -e -f "$9"'
)
# root's ~/.bashrc on this machine may put pyenv/cargo dirs before sshd's PATH for every ssh command
# (Debian's bash reads ~/.bashrc under sshd). A host sees a plain one instead, like a fresh DGX OS root:
# non-interactive sessions keep sshd's PATH with the stand-ins in /usr/local/bin ahead of /usr/bin.
ROOT_BASHRC = "/root/.bashrc"
HOST_BASHRC = """\
# ~/.bashrc of a simulated lab host (bind-mounted over /root/.bashrc inside that host only).
case $- in *i*) ;; *) return ;; esac
HISTCONTROL=ignoreboth
PS1='\\u@\\h:\\w\\$ '
"""


@dataclass(frozen=True)
class LabNames:
    """Every name the lab creates, derived from one short random id (so `lab_down` removes only ours)."""

    lab_id: str
    n: int

    def netns(self, rank: int) -> str:
        return f"{PREFIX}-{self.lab_id}-{rank}"

    @property
    def mgmt_bridge(self) -> str:
        return f"r37m-{self.lab_id}"

    @property
    def fabric_bridge(self) -> str:
        return f"r37f-{self.lab_id}"

    def mgmt_veth(self, rank: int) -> str:
        """Root-namespace end of host `rank`'s management link."""
        return f"r37m-{self.lab_id}-{rank}"

    def fabric_veth(self, rank: int) -> str:
        """Root-namespace end of host `rank`'s fabric link."""
        return f"r37f-{self.lab_id}-{rank}"

    @property
    def all_netns(self) -> list[str]:
        return [self.netns(r) for r in range(self.n)]

    @property
    def bridges(self) -> list[str]:
        return [self.mgmt_bridge, self.fabric_bridge]

    @property
    def veths(self) -> list[str]:
        return [v for r in range(self.n) for v in (self.mgmt_veth(r), self.fabric_veth(r))]


@dataclass(frozen=True)
class AddressPlan:
    """Management /24 (admin .1, hosts .10+N) and fabric /24 (hosts .10+N, nothing for the root ns)."""

    mgmt: ipaddress.IPv4Network
    fabric: ipaddress.IPv4Network

    @property
    def admin_ip(self) -> str:
        return str(self.mgmt.network_address + 1)

    def mgmt_ip(self, rank: int) -> str:
        return str(self.mgmt.network_address + 10 + rank)

    def fabric_ip(self, rank: int) -> str:
        return str(self.fabric.network_address + 10 + rank)


# --- small helpers ------------------------------------------------------------------------------------

def _run(argv: list[str], *, check: bool = True) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run(argv, capture_output=True, text=True, stdin=subprocess.DEVNULL)
    if check and proc.returncode != 0:
        raise SimError(f"`{' '.join(argv)}` failed ({proc.returncode}): {proc.stderr.strip()}")
    return proc


def _ip(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    return _run(["ip", *args], check=check)


def _ip_json(*args: str) -> list[dict]:
    out = _ip("-j", *args, check=False).stdout.strip()
    try:
        data = json.loads(out) if out else []
    except ValueError:
        return []
    return data if isinstance(data, list) else []


def link_exists(name: str) -> bool:
    return _ip("link", "show", "dev", name, check=False).returncode == 0


def netns_list() -> list[str]:
    return [entry["name"] for entry in _ip_json("netns", "list") if "name" in entry]


def netns_pids(ns: str) -> list[int]:
    out = _ip("netns", "pids", ns, check=False).stdout
    return [int(tok) for tok in out.split() if tok.isdigit()]


@contextlib.contextmanager
def _lock() -> Iterator[None]:
    """Serialise address picking between labs started at the same time."""
    with open(LOCK_FILE, "a") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


# --- address plan -------------------------------------------------------------------------------------

def used_networks() -> list[ipaddress.IPv4Network]:
    """Every IPv4 network this machine routes or has an address in (all routing tables)."""
    nets: list[ipaddress.IPv4Network] = []
    for route in _ip_json("-4", "route", "show", "table", "all"):
        dst = route.get("dst", "")
        if dst and dst != "default":
            with contextlib.suppress(ValueError):
                nets.append(ipaddress.IPv4Network(dst, strict=False))
    for link in _ip_json("-4", "addr", "show"):
        for info in link.get("addr_info", []):
            with contextlib.suppress(ValueError, KeyError):
                nets.append(ipaddress.IPv4Interface(f"{info['local']}/{info['prefixlen']}").network)
    return nets


def pick_addresses(used: list[ipaddress.IPv4Network], rng: random.Random | None = None) -> AddressPlan:
    """A management /24 in 10.64-127.x and a fabric /24 in 192.168.100-249, neither overlapping `used`."""
    rng = rng or random.Random()

    def free(candidates: list[ipaddress.IPv4Network]) -> ipaddress.IPv4Network:
        rng.shuffle(candidates)
        for net in candidates:
            if not any(net.overlaps(u) for u in used):
                return net
        raise SimError("no free private /24 for the lab network; every candidate is already routed here")

    mgmt = free([ipaddress.IPv4Network(f"10.{a}.{b}.0/24") for a in range(64, 128) for b in range(256)])
    fabric = free([ipaddress.IPv4Network(f"192.168.{c}.0/24") for c in range(100, 250)])
    return AddressPlan(mgmt, fabric)


# --- sshd ---------------------------------------------------------------------------------------------

def sshd_config(cluster_dir: Path, rank: int, listen: str) -> str:
    """The config of host `rank`'s sshd: key-only root login on its management IP, nothing else."""
    lab = cluster_dir / "lab"
    return "\n".join([
        "# Written by r37-cockpit `sim up --lab`; removed with the cluster directory.",
        f"ListenAddress {listen}:22",
        "AddressFamily inet",
        f"HostKey {cluster_dir / 'hostkeys' / f'rank-{rank}'}",
        f"AuthorizedKeysFile {cluster_dir / 'id_ed25519.pub'}",
        "PermitRootLogin prohibit-password",
        "PubkeyAuthentication yes",
        "PasswordAuthentication no",
        "KbdInteractiveAuthentication no",
        "UsePAM no",
        "StrictModes no",
        "AllowTcpForwarding yes",
        "X11Forwarding no",
        "PrintMotd no",
        f"PidFile {lab / f'sshd-{rank}.pid'}",
        "LogLevel INFO",
        "Subsystem sftp internal-sftp",
        # Every session's environment, whatever the shell reads: host scripts find their root through it.
        f"SetEnv {layout.ROOT_ENV}={HOST_ROOT_MOUNT}",
        "",
    ])


def _host_argv(ns: str, hostname: str, srv_bytes: int, root: Path, bin_dir: Path, config: Path,
               bashrc: Path) -> list[str]:
    return ["ip", "netns", "exec", ns, "unshare", "--mount", "--uts", "--propagation", "private", "--",
            "/bin/sh", "-c", HOST_INIT, "r37lab-host", hostname, str(srv_bytes), SRV_MOUNT,
            str(root), HOST_ROOT_MOUNT, str(bin_dir), BIN_MOUNT, SSHD, str(config), str(bashrc), ROOT_BASHRC]


def _wait_for_sshd(ip: str, proc: subprocess.Popen[bytes], log: Path, timeout: float = READY_TIMEOUT) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            tail = log.read_text(errors="replace")[-2000:] if log.exists() else ""
            raise SimError(f"sshd for {ip} exited with {proc.returncode}:\n{tail}")
        with contextlib.suppress(OSError), socket.create_connection((ip, 22), timeout=1) as s:
            s.settimeout(2)
            if s.recv(64).startswith(b"SSH-"):
                return
        time.sleep(0.1)
    raise SimError(f"sshd on {ip}:22 did not answer within {timeout:g} s (see {log})")


# --- network ------------------------------------------------------------------------------------------

def _make_bridge(name: str, addr: str | None) -> None:
    _ip("link", "add", name, "type", "bridge")
    _ip("link", "set", "dev", name, "addrgenmode", "none")  # no IPv6 link-local for the root namespace
    if addr:
        _ip("addr", "add", addr, "dev", name)
    _ip("link", "set", "dev", name, "up")


def _make_link(root_end: str, bridge: str, ns: str, iface: str, addr: str) -> None:
    _ip("link", "add", root_end, "type", "veth", "peer", "name", iface, "netns", ns)
    _ip("link", "set", "dev", root_end, "addrgenmode", "none")
    _ip("link", "set", "dev", root_end, "master", bridge)
    _ip("link", "set", "dev", root_end, "up")
    _ip("-n", ns, "addr", "add", addr, "dev", iface)
    _ip("-n", ns, "link", "set", "dev", iface, "up")


def _build_network(names: LabNames, plan: AddressPlan, specs: list[layout.HostSpec]) -> None:
    _make_bridge(names.mgmt_bridge, f"{plan.admin_ip}/{plan.mgmt.prefixlen}")
    _make_bridge(names.fabric_bridge, None)
    for spec in specs:
        ns = names.netns(spec.rank)
        _ip("netns", "add", ns)
        _ip("-n", ns, "link", "set", "dev", "lo", "up")
        _make_link(names.mgmt_veth(spec.rank), names.mgmt_bridge, ns, MGMT_IFACE,
                   f"{plan.mgmt_ip(spec.rank)}/{plan.mgmt.prefixlen}")
        _make_link(names.fabric_veth(spec.rank), names.fabric_bridge, ns, spec.fabric_iface,
                   f"{spec.fabric_ip}/{spec.fabric_prefix}")


def _check_machine() -> None:
    if os.geteuid() != 0:
        raise SimError("the lab needs root (network namespaces, mounts); use `sim up` for the demo cluster")
    missing = [tool for tool in ("ip", "unshare", "nsenter", "mount") if shutil.which(tool) is None]
    if not Path(SSHD).is_file():
        missing.append(SSHD + " (openssh-server)")
    if missing:
        raise SimError(f"the lab needs {', '.join(missing)}")
    if _ip("netns", "list", check=False).returncode != 0:
        raise SimError("`ip netns` does not work on this machine; the lab needs network namespaces")
    if Path(os.path.realpath(sys.executable)).is_relative_to(BIN_MOUNT):
        raise SimError(f"{sys.executable} lives in {BIN_MOUNT}, which the lab hosts replace by the stand-ins;"
                       " run the cockpit from a Python installed elsewhere (a venv, pyenv)")


def _running(manifest: Manifest | None) -> bool:
    if manifest is None:
        return False
    existing = set(netns_list())
    return any(alive(p) for p in manifest.pids) or any(ns in existing for ns in manifest.netns)


# --- up / down ----------------------------------------------------------------------------------------

def lab_specs(cluster_dir: Path, n: int, plan: AddressPlan, speed: float,
              real: tuple[str, str, str] = NO_REAL_ENGINE) -> list[layout.HostSpec]:
    peers = [plan.fabric_ip(r) for r in range(n)]
    return [layout.HostSpec(rank=r, nranks=n, hostname=f"spark-{r}", mode="lab", fabric_ip=peers[r],
                            peers=peers, fabric_prefix=plan.fabric.prefixlen, api_bind="0.0.0.0",
                            speed=speed, python=sys.executable, hub_dir=str(cluster_dir / "hub"),
                            srv_dir=SRV_MOUNT, disk_bytes=0,
                            engine=real[0], vllm_python=real[1], vllm_model=real[2])
            for r in range(n)]


def new_manifest(cluster_dir: Path, names: LabNames, plan: AddressPlan, specs: list[layout.HostSpec],
                 srv_bytes: int, prev: Manifest | None = None) -> Manifest:
    """The manifest of a lab about to be built: every name it will create, so `lab_down` can undo it
    (and the files and directories an earlier `sim up` wrote in `cluster_dir`, from `prev`)."""
    return start_manifest(cluster_dir, "lab", prev, pids=[], netns=names.all_netns, extra={
        "lab_id": names.lab_id, "bridges": names.bridges, "veths": names.veths,
        "mgmt_subnet": str(plan.mgmt), "fabric_subnet": str(plan.fabric), "admin_ip": plan.admin_ip,
        "mgmt_ips": [plan.mgmt_ip(s.rank) for s in specs], "fabric_ips": [s.fabric_ip for s in specs],
        "host_roots": [str(host_root(cluster_dir, s.rank)) for s in specs],
        "srv_bytes": srv_bytes, "sshd_pids": [], "watcher_pid": None,
    })


def build_network(cluster_dir: Path, specs: list[layout.HostSpec], *, srv_bytes: int,
                  names_plan: tuple[LabNames, AddressPlan], prev: Manifest | None = None) -> Manifest:
    """Save the manifest, then create bridges, namespaces and links (undone again on failure)."""
    names, plan = names_plan
    manifest = new_manifest(cluster_dir, names, plan, specs, srv_bytes, prev)
    try:
        _build_network(names, plan, specs)
    except BaseException:
        lab_down(cluster_dir, manifest)
        raise
    return manifest


def start_hosts(cluster_dir: Path, manifest: Manifest, specs: list[layout.HostSpec]) -> None:
    """Each host's sshd in its namespaces (host roots and DIR/bin must exist), then the watcher."""
    extra = manifest.extra
    names = LabNames(str(extra["lab_id"]), len(manifest.netns))
    mgmt_ips = [str(ip) for ip in extra["mgmt_ips"]]
    srv_bytes = int(extra["srv_bytes"])
    lab = own_dir(cluster_dir, manifest, "lab")
    Path("/run/sshd").mkdir(mode=0o755, exist_ok=True)        # sshd's privilege separation dir
    Path(HOST_ROOT_MOUNT).mkdir(parents=True, exist_ok=True)  # mount points (left empty in the root ns)
    Path(SRV_MOUNT).mkdir(exist_ok=True)
    bashrc = lab / "bashrc"
    bashrc.write_text(HOST_BASHRC)
    procs = []
    for spec in specs:
        config = lab / f"sshd_config-{spec.rank}"
        config.write_text(sshd_config(cluster_dir, spec.rank, mgmt_ips[spec.rank]))
        log = lab / f"sshd-{spec.rank}.log"
        with open(log, "ab") as out:
            proc = subprocess.Popen(
                _host_argv(names.netns(spec.rank), spec.hostname, srv_bytes,
                           host_root(cluster_dir, spec.rank), cluster_dir / "bin", config, bashrc),
                stdin=subprocess.DEVNULL, stdout=out, stderr=out, start_new_session=True)
        procs.append((proc, log))
        extra["sshd_pids"].append(proc.pid)
        manifest.save(cluster_dir)
    for spec, (proc, log) in zip(specs, procs, strict=True):
        _wait_for_sshd(mgmt_ips[spec.rank], proc, log)
    with open(lab / "watch.log", "ab") as out:
        watcher = subprocess.Popen([sys.executable, "-m", "cockpit.sim.lab", "watch", str(cluster_dir)],
                                   stdin=subprocess.DEVNULL, stdout=out, stderr=out,
                                   start_new_session=True, env=_watcher_env())
    manifest.pids = [watcher.pid]
    extra["watcher_pid"] = watcher.pid
    manifest.save(cluster_dir)


def _watcher_env() -> dict[str, str]:
    env = dict(os.environ)
    env.pop(layout.ROOT_ENV, None)
    package_parent = str(Path(__file__).resolve().parents[2])
    env["PYTHONPATH"] = os.pathsep.join(p for p in (package_parent, env.get("PYTHONPATH", "")) if p)
    return env


def lab_up(cluster_dir: Path, *, n: int = DEFAULT_HOSTS, speed: float = DEMO_SPEED,
           srv_bytes: int = DEFAULT_SRV_BYTES, engine: str = "sim") -> Path:
    """Start a lab cluster of `n` hosts (root, Linux); returns DIR/cluster.toml. engine "vllm": rank 0's
    `vllm serve` is the real vLLM on 127.0.0.1 of its namespace (realvllm.py)."""
    check_host_count(n)
    cluster_dir = cluster_dir.resolve()
    _check_machine()
    real = real_engine() if engine == "vllm" else NO_REAL_ENGINE
    if _running(Manifest.load(cluster_dir)):
        raise SimError(f"a simulated cluster is already running from {cluster_dir}; "
                       f"`r37-cockpit sim down --dir {cluster_dir}` stops it")
    prev = claim_dir(cluster_dir)        # DirInUse if a name the lab writes is not the sim's own
    names = LabNames(secrets.token_hex(3), n)
    with _lock():  # the management /24 is taken once its bridge has its address
        plan = pick_addresses(used_networks())
        specs = lab_specs(cluster_dir, n, plan, speed, real)
        manifest = build_network(cluster_dir, specs, srv_bytes=srv_bytes, names_plan=(names, plan),
                                 prev=prev)
    try:
        generate_keys(cluster_dir, n, manifest)
        hub = prepare_hosts(cluster_dir, specs, demo=False, manifest=manifest)
        start_hosts(cluster_dir, manifest, specs)
        plans = [HostPlan(s.rank, plan.mgmt_ip(s.rank), 22, "root", host_root(cluster_dir, s.rank), s)
                 for s in specs]
        return write_client_files(cluster_dir, plans, hub, per_host_paths=False, speed=speed,
                                  manifest=manifest, recipe_dir=RECIPE_DIR)

    except BaseException:
        lab_down(cluster_dir, manifest)
        raise


def _is_watcher(pid: int, cluster_dir: Path) -> bool:
    try:
        argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return False
    return b"cockpit.sim.lab" in argv and b"watch" in argv and str(cluster_dir).encode() in argv


def lab_down(cluster_dir: Path, manifest: Manifest) -> list[str]:
    """Remove exactly what the lab of `manifest` created: its processes, namespaces, links and bridges.

    Idempotent: what is already gone is skipped. Returns what was removed.
    """
    cluster_dir = cluster_dir.resolve()
    removed: list[str] = []
    extra = manifest.extra
    watcher = extra.get("watcher_pid")
    if isinstance(watcher, int) and _is_watcher(watcher, cluster_dir):
        terminate([watcher])
        removed.append(f"watcher {watcher}")
    ours = [ns for ns in manifest.netns if ns.startswith(PREFIX + "-")]
    existing = set(netns_list())
    for ns in ours:
        if ns not in existing:
            continue
        for _ in range(5):  # sshd may fork while we kill: repeat until the namespace is empty
            pids = [p for p in netns_pids(ns) if p != os.getpid()]
            if not pids:
                break
            terminate(pids)
            removed += [f"process {p} in {ns}" for p in pids]
        _ip("netns", "del", ns, check=False)
        removed.append(f"netns {ns}")
    reap([p for p in extra.get("sshd_pids", []) or [] if isinstance(p, int)])
    links = [*(extra.get("veths") or []), *(extra.get("bridges") or [])]
    for link in links:
        if not (isinstance(link, str) and link.startswith(("r37m-", "r37f-")) and link_exists(link)):
            continue  # a host's veth also goes away with its namespace
        if _ip("link", "del", "dev", link, check=False).returncode == 0:
            removed.append(f"link {link}")
    return removed


# --- watcher ------------------------------------------------------------------------------------------

@dataclass
class WatchedHost:
    rank: int
    root: Path
    netns: str
    links: list[str]
    sshd_pid: int
    down: bool = False
    low: bool = False


def _srv_used(pid: int) -> int:
    st = os.statvfs(f"/proc/{pid}/root{SRV_MOUNT}")
    return (st.f_blocks - st.f_bfree) * st.f_frsize


def _remount_srv(pid: int, size: int) -> None:
    _run(["nsenter", "--mount", f"--target={pid}", "--", "mount", "-o", f"remount,size={size}", SRV_MOUNT])


def low_disk_size(used: int, params: dict[str, object]) -> int:
    """The /srv size while `low-disk` is active: what is used plus a little (or the fault's `free_bytes`)."""
    free = params.get("free_bytes", LOW_DISK_HEADROOM)
    free = free if isinstance(free, int) and free >= 0 else LOW_DISK_HEADROOM
    page = 4096
    return -(-(used + max(free, page)) // page) * page


def _fault_params(root: Path, name: str) -> dict[str, object]:
    try:
        text = (layout.faults_dir(root) / name).read_text().strip()
        value = json.loads(text) if text else {}
    except (OSError, ValueError):
        return {}
    return value if isinstance(value, dict) else {}


def _log(msg: str) -> None:
    print(f"{time.strftime('%H:%M:%S')} {msg}", flush=True)


def apply_faults(host: WatchedHost, srv_bytes: int) -> None:
    """Bring host's links and /srv size in line with its `host-down` and `low-disk` switches."""
    down = layout.fault_active(host.root, "host-down")
    if down != host.down:
        for link in host.links:
            _ip("link", "set", "dev", link, "down" if down else "up")
        host.down = down
        _log(f"rank {host.rank}: links {'down' if down else 'up'}")
    low = layout.fault_active(host.root, "low-disk")
    if low != host.low:
        size = srv_bytes
        if low:
            size = low_disk_size(_srv_used(host.sshd_pid), _fault_params(host.root, "low-disk"))
        _remount_srv(host.sshd_pid, size)
        host.low = low
        _log(f"rank {host.rank}: /srv size {size}")


def watch(cluster_dir: Path) -> int:
    """Poll every host's fault switches until SIGTERM or until the lab's namespaces are gone."""
    cluster_dir = cluster_dir.resolve()
    manifest = Manifest.load(cluster_dir)
    if manifest is None or manifest.kind != "lab":
        print(f"no lab cluster in {cluster_dir}", file=sys.stderr)
        return 2
    extra = manifest.extra
    lab_id = str(extra["lab_id"])
    names = LabNames(lab_id, len(manifest.netns))
    hosts = [WatchedHost(rank=r, root=Path(str(root)), netns=names.netns(r),
                         links=[names.mgmt_veth(r), names.fabric_veth(r)], sshd_pid=int(pid))
             for r, (root, pid) in enumerate(zip(extra["host_roots"], extra["sshd_pids"], strict=True))]
    srv_bytes = int(extra["srv_bytes"])
    stop = False

    def on_term(signum: int, frame: object) -> None:
        nonlocal stop
        stop = True

    signal.signal(signal.SIGTERM, on_term)
    signal.signal(signal.SIGINT, on_term)
    _log(f"watching {len(hosts)} hosts of lab {lab_id}")
    polls = 0
    while not stop:
        if polls % 20 == 0 and not set(manifest.netns) & set(netns_list()):
            _log("the lab's namespaces are gone; stopping")
            break
        for host in hosts:
            try:
                apply_faults(host, srv_bytes)
            except (SimError, OSError) as exc:
                _log(f"rank {host.rank}: {exc}")
        polls += 1
        time.sleep(WATCH_POLL)
    return 0


def main(argv: list[str] | None = None) -> int:
    args = argv if argv is not None else sys.argv[1:]
    if len(args) != 2 or args[0] != "watch":
        print("usage: python -m cockpit.sim.lab watch CLUSTER_DIR", file=sys.stderr)
        return 2
    return watch(Path(args[1]))


if __name__ == "__main__":
    raise SystemExit(main())
