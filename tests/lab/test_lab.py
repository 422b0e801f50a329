"""The network-namespace lab: real sshd per namespace, per-host /srv, private fabric, real link faults."""

from __future__ import annotations

import ipaddress
import json
import os
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import asyncssh
import pytest

from cockpit.sim import layout
from cockpit.sim.cluster import Manifest, SimError, down
from cockpit.sim.lab import (
    BIN_MOUNT,
    HOST_ROOT_MOUNT,
    LOW_DISK_HEADROOM,
    PREFIX,
    SSHD,
    LabNames,
    lab_down,
    lab_up,
    low_disk_size,
    netns_list,
    pick_addresses,
    sshd_config,
)

pytestmark = pytest.mark.lab


def _unavailable() -> str | None:
    if sys.platform != "linux":
        return "the lab needs Linux network namespaces"
    if os.geteuid() != 0:
        return "the lab needs root (network namespaces, mounts)"
    missing = [t for t in ("ip", "unshare", "nsenter", "ssh") if shutil.which(t) is None]
    if missing:
        return f"the lab needs {', '.join(missing)}"
    if not Path(SSHD).is_file():
        return f"the lab needs OpenSSH's {SSHD} (openssh-server)"
    if subprocess.run(["ip", "netns", "list"], capture_output=True).returncode != 0:
        return "`ip netns` is unavailable on this machine"
    return None


needs_lab = pytest.mark.skipif(_unavailable() is not None, reason=_unavailable() or "")


# --- pure parts (no root needed) ----------------------------------------------------------------------

def test_addresses_avoid_every_routed_network() -> None:
    mgmt_free = ipaddress.IPv4Network("10.99.7.0/24")
    fabric_free = ipaddress.IPv4Network("192.168.200.0/24")
    used = [*ipaddress.IPv4Network("10.64.0.0/10").address_exclude(mgmt_free),
            *ipaddress.IPv4Network("192.168.0.0/16").address_exclude(fabric_free)]
    plan = pick_addresses(used)
    assert (plan.mgmt, plan.fabric) == (mgmt_free, fabric_free)
    assert plan.admin_ip == "10.99.7.1"
    assert [plan.mgmt_ip(r) for r in range(4)] == [f"10.99.7.{10 + r}" for r in range(4)]
    assert plan.fabric_ip(3) == "192.168.200.13"
    with pytest.raises(SimError, match="no free private /24"):
        pick_addresses([ipaddress.IPv4Network("10.0.0.0/8")])


def test_lab_names_fit_linux_interface_names() -> None:
    names = LabNames("a1b2c3", 4)
    links = [*names.bridges, *names.veths]
    assert all(len(name) <= 15 for name in links)
    assert len(set(links)) == len(links)
    assert names.all_netns == [f"{PREFIX}-a1b2c3-{r}" for r in range(4)]


def test_sshd_config_is_key_only_on_the_management_ip(tmp_path: Path) -> None:
    text = sshd_config(tmp_path, 2, "10.99.7.12")
    lines = text.splitlines()
    assert [ln for ln in lines if ln.startswith(("ListenAddress", "Port"))] == ["ListenAddress 10.99.7.12:22"]
    for expected in ("PermitRootLogin prohibit-password", "PasswordAuthentication no",
                     "KbdInteractiveAuthentication no", "UsePAM no", "StrictModes no",
                     "AllowTcpForwarding yes", "LogLevel INFO",
                     f"HostKey {tmp_path / 'hostkeys' / 'rank-2'}",
                     f"AuthorizedKeysFile {tmp_path / 'id_ed25519.pub'}"):
        assert expected in lines
    assert any(ln.startswith(f"PidFile {tmp_path / 'lab'}/") for ln in lines)


def test_low_disk_size_leaves_only_a_little_room() -> None:
    size = low_disk_size(5_000_000, {})
    assert size % 4096 == 0
    assert 5_000_000 + LOW_DISK_HEADROOM <= size < 5_000_000 + LOW_DISK_HEADROOM + 4096
    assert low_disk_size(5_000_000, {"free_bytes": 64 << 10}) < size
    assert low_disk_size(0, {"free_bytes": "lots"}) == LOW_DISK_HEADROOM


def test_lab_root_mount_is_the_stand_ins_default_root(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(layout.ROOT_ENV, raising=False)
    assert str(layout.root_from_env()) == HOST_ROOT_MOUNT


# --- a running lab ------------------------------------------------------------------------------------

class Lab:
    """What the tests need of a running lab: its directory, manifest, and ssh/ip helpers."""

    def __init__(self, cluster_dir: Path):
        self.dir = cluster_dir
        manifest = Manifest.load(cluster_dir)
        assert manifest is not None and manifest.kind == "lab"
        self.manifest = manifest
        self.names = LabNames(str(manifest.extra["lab_id"]), len(manifest.netns))

    def extra(self, key: str) -> list[str]:
        return [str(v) for v in self.manifest.extra[key]]  # type: ignore[union-attr]

    def ssh(self, rank: int, command: str, *extra: str,
            timeout: float = 20) -> subprocess.CompletedProcess[str]:
        return subprocess.run(["ssh", "-F", str(self.dir / "ssh_config"), "-o", "BatchMode=yes",
                               "-o", "ConnectTimeout=5", *extra, f"spark-{rank}", command],
                              capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL)

    def fault(self, rank: int, name: str, on: bool) -> None:
        path = layout.faults_dir(Path(self.extra("host_roots")[rank])) / name
        if on:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text("")
        else:
            path.unlink(missing_ok=True)


def _ip_json(*args: str) -> list[dict]:
    out = subprocess.run(["ip", "-j", *args], capture_output=True, text=True).stdout.strip()
    return json.loads(out) if out else []


def _eventually(check: Callable[[], bool], timeout: float = 15.0, every: float = 0.2) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check():
            return True
        time.sleep(every)
    return check()


def _df_srv(lab: Lab, rank: int) -> tuple[int, int, int]:
    out = lab.ssh(rank, "df -P -B1 /srv")
    assert out.returncode == 0, out.stderr
    fields = out.stdout.splitlines()[1].split()
    return int(fields[1]), int(fields[2]), int(fields[3])


@pytest.fixture(scope="module")
def lab(lab_cluster) -> Lab:  # type: ignore[no-untyped-def]
    return Lab(lab_cluster.dir)


@needs_lab
def test_plain_ssh_reaches_every_host_with_strict_host_key_checking(lab: Lab) -> None:
    assert "StrictHostKeyChecking yes" in (lab.dir / "ssh_config").read_text()
    for rank in range(4):
        out = lab.ssh(rank, 'hostname; echo "$HOSTNAME"')
        assert out.returncode == 0, out.stderr
        assert out.stdout.split() == [f"spark-{rank}", f"spark-{rank}"]
    # a wrong key for spark-0 in known_hosts is refused, never skipped
    wrong = lab.dir / "known_hosts.wrong"
    lines = (lab.dir / "known_hosts").read_text().splitlines()
    wrong.write_text(f"{lines[0].split()[0]} {' '.join(lines[1].split()[1:])}\n")
    out = lab.ssh(0, "true", "-o", f"UserKnownHostsFile={wrong}")
    assert out.returncode == 255
    assert "host key" in out.stderr.lower()


@needs_lab
async def test_asyncssh_reaches_hosts_with_the_clusters_known_hosts(lab: Lab) -> None:
    ips = lab.extra("mgmt_ips")
    for rank in (0, 3):
        async with asyncssh.connect(ips[rank], 22, username="root", known_hosts=str(lab.dir / "known_hosts"),
                                    client_keys=[str(lab.dir / "id_ed25519")]) as conn:
            result = await conn.run('echo "$HOSTNAME"', check=True)
            assert str(result.stdout).strip() == f"spark-{rank}"
    lines = (lab.dir / "known_hosts").read_text().splitlines()
    wrong = lab.dir / "known_hosts.asyncssh-wrong"
    wrong.write_text(f"{ips[0]} {' '.join(lines[1].split()[1:])}\n")
    with pytest.raises(asyncssh.HostKeyNotVerifiable):
        async with asyncssh.connect(ips[0], 22, username="root", known_hosts=str(wrong),
                                    client_keys=[str(lab.dir / "id_ed25519")]):
            pass


@needs_lab
def test_hosts_see_their_own_root_and_the_stand_ins_first_on_path(lab: Lab) -> None:
    tools = sorted(p.name for p in (lab.dir / "bin").iterdir() if os.access(p, os.X_OK) and p.is_file())
    assert tools
    probe = "; ".join(f"command -v {t}" for t in tools)
    read_rank = f"grep -o '\"rank\": [0-9]*' {HOST_ROOT_MOUNT}/sim.json | tr -dc 0-9"
    for rank in (0, 2):
        out = lab.ssh(rank, f"{probe}; {read_rank}")
        assert out.returncode == 0, out.stderr
        *found, spec_rank = out.stdout.split()
        assert found == [f"{BIN_MOUNT}/{t}" for t in tools]
        assert spec_rank == str(rank)


@needs_lab
def test_srv_is_a_per_host_tmpfs_of_the_chosen_size(lab: Lab) -> None:
    srv_bytes = int(lab.manifest.extra["srv_bytes"])  # type: ignore[arg-type]
    for rank in range(4):
        size, _used, _avail = _df_srv(lab, rank)
        assert size == srv_bytes
    assert lab.ssh(0, "stat -f -c %T /srv").stdout.strip() == "tmpfs"
    assert lab.ssh(0, "echo only-on-0 > /srv/marker").returncode == 0
    try:
        assert lab.ssh(1, "test -e /srv/marker").returncode == 1
        assert not Path("/srv/marker").exists()
        assert "r37lab-srv" not in Path("/proc/self/mounts").read_text()  # nothing leaks to the root ns
    finally:
        lab.ssh(0, "rm -f /srv/marker")


@needs_lab
def test_fabric_joins_the_hosts_and_only_them(lab: Lab) -> None:
    fabric = lab.extra("fabric_ips")
    port = 40000 + os.getpid() % 20000
    listener = ("import socket; s=socket.socket(); s.setsockopt(socket.SOL_SOCKET,socket.SO_REUSEADDR,1); "
                f"s.bind(({fabric[1]!r},{port})); s.listen(); print('ready',flush=True); s.settimeout(20); "
                "c,a=s.accept(); c.sendall(('hello from '+a[0]+'\\n').encode()); c.close()")
    proc = subprocess.Popen(["ip", "netns", "exec", lab.names.netns(1), sys.executable, "-c", listener],
                            stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
        out = lab.ssh(0, f"timeout 5 bash -c 'exec 3<>/dev/tcp/{fabric[1]}/{port}; cat <&3'")
        assert out.stdout.strip() == f"hello from {fabric[0]}", out.stderr
    finally:
        proc.kill()
        proc.wait()
    # The root namespace holds no fabric address and no route into the fabric (checked without sending).
    ours = {*lab.extra("bridges"), *lab.extra("veths")}
    fabric_bridge = _ip_json("addr", "show", "dev", lab.names.fabric_bridge)
    assert len(fabric_bridge) == 1 and fabric_bridge[0].get("addr_info", []) == []
    routes = _ip_json("-4", "route", "get", fabric[1])
    assert all(r.get("dev") not in ours for r in routes)
    # and the hosts have no way out: no default route in any namespace
    for ns in lab.manifest.netns:
        assert all(r.get("dst") != "default" for r in _ip_json("-n", ns, "-4", "route"))


def _tcp_answers(ip: str, timeout: float = 1.5) -> bool:
    try:
        with socket.create_connection((ip, 22), timeout=timeout) as s:
            s.settimeout(timeout)
            return s.recv(8).startswith(b"SSH-")
    except OSError:
        return False


@needs_lab
def test_host_down_takes_the_links_down_and_healing_restores_them(lab: Lab) -> None:
    ip = lab.extra("mgmt_ips")[3]
    veths = [lab.names.mgmt_veth(3), lab.names.fabric_veth(3)]

    def links_state() -> set[str]:
        return {_ip_json("link", "show", "dev", v)[0]["operstate"] for v in veths}

    lab.fault(3, "host-down", True)
    try:
        assert _eventually(lambda: links_state() == {"DOWN"})
        assert not _tcp_answers(ip)
        assert lab.ssh(3, "true", "-o", "ConnectTimeout=2").returncode == 255
        inside = _ip_json("-n", lab.names.netns(3), "link", "show", "dev", "enP7s7")[0]
        assert "NO-CARRIER" in inside["flags"]
    finally:
        lab.fault(3, "host-down", False)
    assert _eventually(lambda: _tcp_answers(ip))
    assert lab.ssh(3, "hostname").stdout.strip() == "spark-3"
    assert links_state() == {"UP"}


@needs_lab
def test_low_disk_shrinks_srv_and_healing_gives_it_back(lab: Lab) -> None:
    srv_bytes = int(lab.manifest.extra["srv_bytes"])  # type: ignore[arg-type]
    assert lab.ssh(2, "head -c 3000000 /dev/zero > /srv/fill").returncode == 0
    lab.fault(2, "low-disk", True)
    try:
        assert _eventually(lambda: _df_srv(lab, 2)[0] < srv_bytes)
        _size, used, avail = _df_srv(lab, 2)
        assert used >= 3_000_000
        assert avail <= LOW_DISK_HEADROOM + 4096
        out = lab.ssh(2, "head -c 3000000 /dev/zero > /srv/more")
        assert out.returncode != 0 and "No space left" in out.stderr
        assert _df_srv(lab, 1)[0] == srv_bytes  # other hosts keep their disk
    finally:
        lab.fault(2, "low-disk", False)
    assert _eventually(lambda: _df_srv(lab, 2)[0] == srv_bytes)
    lab.ssh(2, "rm -f /srv/fill /srv/more")


@needs_lab
def test_lab_up_refuses_a_directory_whose_lab_runs(lab: Lab) -> None:
    with pytest.raises(SimError, match="already running"):
        lab_up(lab.dir)


# --- down ---------------------------------------------------------------------------------------------

@pytest.fixture
def small_lab(tmp_path: Path) -> Iterator[Path]:
    lab_up(tmp_path, n=2, srv_bytes=16 << 20)
    try:
        yield tmp_path
    finally:
        if (m := Manifest.load(tmp_path)) is not None:
            lab_down(tmp_path, m)


def _lab_processes(pids: list[int]) -> list[int]:
    alive = []
    for pid in pids:
        try:
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if state != "Z":
            alive.append(pid)
    return alive


@needs_lab
def test_down_removes_namespaces_processes_links_and_mounts(small_lab: Path) -> None:
    lab = Lab(small_lab)
    assert lab.ssh(1, "hostname").stdout.strip() == "spark-1"
    # a long-running session process inside a host, like an engine would be
    assert lab.ssh(1, "setsid sleep 300 >/dev/null 2>&1 < /dev/null &").returncode == 0
    in_ns = [int(p) for p in subprocess.run(["ip", "netns", "pids", lab.names.netns(1)],
                                            capture_output=True, text=True).stdout.split()]
    watcher = int(lab.manifest.extra["watcher_pid"])  # type: ignore[arg-type]
    tracked = [*in_ns, watcher, *(int(p) for p in lab.extra("sshd_pids"))]
    assert len(in_ns) >= 2 and _lab_processes(tracked)

    stopped = down(small_lab)

    assert any(s.startswith("netns ") for s in stopped)
    assert not set(lab.manifest.netns) & set(netns_list())
    assert not [n for n in netns_list() if lab.names.lab_id in n]
    assert _lab_processes(tracked) == []
    for link in (*lab.extra("bridges"), *lab.extra("veths")):
        assert subprocess.run(["ip", "link", "show", "dev", link], capture_output=True).returncode != 0
    assert all(lab.manifest.extra["admin_ip"] not in json.dumps(a) for a in _ip_json("-4", "addr"))
    assert lab_down(small_lab, lab.manifest) == []  # idempotent
