"""Golden-format tests of the host tool stand-ins (run through their wrappers, as a host shell would)."""

from __future__ import annotations

import json
import os
import queue
import re
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import IO

import pytest

from cockpit.sim import layout, provision
from cockpit.sim.engine.hostio import HostIO
from cockpit.sim.faults import DESCRIPTIONS, set_fault
from cockpit.sim.hub import build_hub
from cockpit.sim.provision import provision_host
from cockpit.sim.tools import install_tools

PEERS = ["192.168.100.10", "192.168.100.11", "192.168.100.12", "192.168.100.13"]


@dataclass
class ToolHost:
    root: Path
    bin: Path
    spec: layout.HostSpec

    def env(self) -> dict[str, str]:
        return {
            "PATH": f"{self.bin}:{os.environ['PATH']}",
            layout.ROOT_ENV: str(self.root),
            "HOME": str(layout.home_dir(self.root)),
            "LANG": "C.UTF-8",
        }

    def sh(self, cmd: str, check: bool = False, timeout: float = 30) -> subprocess.CompletedProcess[str]:
        r = subprocess.run(
            ["bash", "-c", cmd],
            env=self.env(),
            cwd=layout.home_dir(self.root),
            text=True,
            capture_output=True,
            timeout=timeout,
        )
        if check:
            assert r.returncode == 0, (cmd, r.stdout, r.stderr)
        return r

    def fault(self, name: str, on: bool = True, params: dict | None = None) -> None:
        set_fault(self.root, name, on, params)


def make_host(base: Path, hub_dir: Path | None = None, rank: int = 1) -> ToolHost:
    root = base / f"host{rank}"
    spec = layout.HostSpec(
        rank=rank,
        nranks=4,
        hostname=f"spark-{rank}",
        mode="demo",
        fabric_ip=PEERS[rank],
        peers=PEERS,
        api_bind=f"127.0.37.{rank + 1}",
        python=sys.executable,
        hub_dir=str(hub_dir or ""),
        srv_dir=str(root / "srv"),
        disk_bytes=4_000_000_000_000,
    )
    provision_host(root, spec)
    install_tools(base / "bin", sys.executable, demo=True)
    return ToolHost(root, base / "bin", spec)


@pytest.fixture
def host(tmp_path: Path) -> ToolHost:
    return make_host(tmp_path)


@pytest.fixture(scope="session")
def hub(tmp_path_factory: pytest.TempPathFactory):
    d = tmp_path_factory.mktemp("hub")
    return d, build_hub(d)


# --- nvidia-smi -------------------------------------------------------------------------------


def test_nvidia_smi_table_is_gb10_style(host: ToolHost) -> None:
    out = host.sh("nvidia-smi", check=True).stdout
    lines = out.splitlines()
    assert "| NVIDIA-SMI 580.95.05" in out and "CUDA Version: 13.0" in out
    row1 = next(line for line in lines if "NVIDIA GB10" in line)
    assert (
        row1 == "|   0  NVIDIA GB10                    On  |   0000000F:01:00.0 Off |                  N/A |"
    )
    row2 = lines[lines.index(row1) + 1]
    assert re.fullmatch(
        r"\| N/A   \d\dC    P8 +\dW /  N/A  \| Not Supported          \|      0%      Default \|", row2
    ), row2
    assert all(len(line) == 91 for line in lines[1:] if line.startswith(("|", "+")))
    assert "No running processes found" in out


def test_nvidia_smi_query_and_engine_readings(host: ToolHost) -> None:
    q = "nvidia-smi --query-gpu=name,utilization.gpu,power.draw,power.limit,clocks.sm,memory.total,pstate"
    out = host.sh(q + " --format=csv", check=True).stdout.splitlines()
    assert out[0] == (
        "name, utilization.gpu [%], power.draw [W], power.limit [W], clocks.current.sm [MHz], "
        "memory.total [MiB], pstate"
    )
    assert out[1].startswith("NVIDIA GB10, 0 %, ") and ", [N/A], 208 MHz, [N/A], P8" in out[1]
    (host.root / "run" / "gpu.json").write_text(
        json.dumps(
            {
                "utilization": 97,
                "power_w": 83.5,
                "sm_clock_mhz": 2405,
                "apps": [{"pid": 4242, "used_mib": 98000}],
            }
        )
    )
    out = host.sh(q + " --format=csv,noheader,nounits", check=True).stdout
    assert out == "NVIDIA GB10, 97, 83.50, [N/A], 2405, [N/A], P0\n"
    apps = host.sh("nvidia-smi --query-compute-apps=pid,process_name,used_memory --format=csv", check=True)
    assert apps.stdout == "pid, process_name, used_gpu_memory [MiB]\n4242, python3, 98000 MiB\n"
    assert "4242      C   python3" in host.sh("nvidia-smi").stdout
    host.fault("slow-clocks")
    assert host.sh("nvidia-smi --query-gpu=clocks.sm --format=csv,noheader,nounits").stdout == "900\n"


def test_nvidia_smi_loop_and_errors(host: ToolHost) -> None:
    r = host.sh(
        "nvidia-smi --query-gpu=utilization.gpu --format=csv,noheader -lms 20 | head -n 3", check=True
    )
    assert r.stdout == "0 %\n0 %\n0 %\n" and r.stderr == ""
    r = host.sh("nvidia-smi --query-gpu=utilization.gpu --format=csv -lms 20 | head -n 3", check=True)
    assert r.stdout == "utilization.gpu [%]\n0 %\n0 %\n"  # the header once, as the real tool
    bad = host.sh("nvidia-smi --query-gpu=bogus --format=csv")
    assert bad.returncode == 2 and 'Field "bogus" is not a valid field to query.' in bad.stdout
    host.fault("no-gpu")
    r = host.sh("nvidia-smi")
    assert r.returncode == 9 and r.stdout.startswith("NVIDIA-SMI has failed because it couldn't communicate")


STATS_GPU_QUERY = (
    "timestamp,index,name,utilization.gpu,clocks.sm,clocks.max.sm,power.draw,temperature.gpu,pstate,"
    "memory.total,memory.used"
)


def test_nvidia_smi_timestamp_field(host: ToolHost) -> None:
    q = f"nvidia-smi --query-gpu={STATS_GPU_QUERY}"
    head = host.sh(f"{q} --format=csv", check=True).stdout.splitlines()[0]
    assert head.startswith("timestamp, index, name, utilization.gpu [%], clocks.current.sm [MHz]")
    before = time.time()
    out = host.sh(f"{q} --format=csv,noheader,nounits", check=True).stdout
    stamp, *rest = out.rstrip("\n").split(", ")
    assert re.fullmatch(r"\d{4}/\d\d/\d\d \d\d:\d\d:\d\d\.\d{3}", stamp), stamp
    when = time.mktime(time.strptime(stamp[:19], "%Y/%m/%d %H:%M:%S")) + int(stamp[20:]) / 1000
    assert before - 1 <= when <= time.time() + 1
    assert rest == ["0", "NVIDIA GB10", "0", "208", "3003", "4.10", rest[6], "P8", "[N/A]", "[N/A]"]
    assert rest[6].isdigit()


def _lines(stream: IO[str], into: queue.Queue[str]) -> None:
    for line in stream:
        into.put(line)


def _next(lines: queue.Queue[str], timeout: float = 5.0) -> str:
    return lines.get(timeout=timeout)


def test_nvidia_smi_compute_apps_loop_follows_gpu_json(host: ToolHost) -> None:
    gpu = host.root / "run" / "gpu.json"

    def apps(*pids: int) -> None:
        gpu.write_text(json.dumps({"utilization": 50, "power_w": 40.0, "sm_clock_mhz": 2000,
                                   "apps": [{"pid": p, "used_mib": 1000 + p} for p in pids]}))

    proc = subprocess.Popen(
        ["nvidia-smi", "--query-compute-apps=pid,process_name,used_memory", "--format=csv,noheader,nounits",
         "-lms", "40"],
        env=host.env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )
    lines: queue.Queue[str] = queue.Queue()
    threading.Thread(target=_lines, args=(proc.stdout, lines), daemon=True).start()
    try:
        time.sleep(0.3)
        assert lines.empty()  # no process: rounds print nothing
        apps(11, 22)
        block = [_next(lines), _next(lines)]
        assert block == ["11, python3, 1011\n", "22, python3, 1022\n"]
        apps()
        time.sleep(0.2)
        while not lines.empty():  # drain rounds that ran before the change
            assert _next(lines) in block
        apps(33)
        assert _next(lines) == "33, python3, 1033\n"
    finally:
        proc.terminate()
        _, err = proc.communicate(timeout=5)
    assert proc.returncode == -15 and err == ""


# --- RDMA -------------------------------------------------------------------------------------


def test_rdma_tools_formats(host: ToolHost) -> None:
    assert host.sh("rdma link show", check=True).stdout.splitlines()[0] == (
        "link rocep1s0f0/1 state ACTIVE physical_state LINK_UP netdev enp1s0f0np0"
    )
    links = json.loads(host.sh("rdma -j link show", check=True).stdout)
    assert [lk["ifname"] for lk in links] == ["rocep1s0f0", "rocep1s0f1", "roceP2p1s0f0", "roceP2p1s0f1"]
    assert links[0] == {
        "ifindex": 0,
        "ifname": "rocep1s0f0",
        "port": 1,
        "state": "ACTIVE",
        "physical_state": "LINK_UP",
        "netdev": "enp1s0f0np0",
        "netdev_index": 3,
    }
    stat = host.sh("rdma statistic show", check=True).stdout.splitlines()[0]
    assert stat.startswith("link rocep1s0f0/1 rx_write_requests ") and " out_of_sequence 0 " in stat
    assert stat.endswith(" np_cnp_sent 0")
    assert (
        host.sh("ibdev2netdev", check=True).stdout.splitlines()[0] == "rocep1s0f0 port 1 ==> enp1s0f0np0 (Up)"
    )
    info = host.sh("ibv_devinfo", check=True).stdout
    assert info.count("hca_id:\t") == 4 and "hca_id:\trocep1s0f0\n" in info
    assert "\t\t\tstate:\t\t\tPORT_ACTIVE (4)\n" in info and "\t\t\tactive_mtu:\t\t4096 (5)\n" in info
    assert "\t\t\tlink_layer:\t\tEthernet\n" in info
    one = host.sh("ibv_devinfo -d roceP2p1s0f1", check=True).stdout
    assert one.count("hca_id:") == 1 and "roceP2p1s0f1" in one
    assert host.sh("ibv_devinfo -d nope").returncode != 0


def test_rdma_port_down_fault_everywhere(host: ToolHost) -> None:
    host.fault("rdma-port-down")
    assert (
        "link rocep1s0f0/1 state DOWN physical_state DISABLED netdev enp1s0f0np0"
        in host.sh("rdma link show").stdout
    )
    assert "rocep1s0f0 port 1 ==> enp1s0f0np0 (Down)" in host.sh("ibdev2netdev").stdout
    assert "PORT_DOWN (1)" in host.sh("ibv_devinfo -d rocep1s0f0").stdout
    assert host.sh("cat /sys/class/infiniband/rocep1s0f0/ports/1/state").stdout == "1: DOWN\n"
    dev = json.loads(host.sh("ip -j addr show dev enp1s0f0np0", check=True).stdout)[0]
    assert dev["operstate"] == "DOWN" and dev["addr_info"][0]["local"] == PEERS[1]
    host.fault("rdma-port-down", on=False)
    assert host.sh("cat /sys/class/infiniband/rocep1s0f0/ports/1/state").stdout == "4: ACTIVE\n"


def test_gid_table_and_wrong_gid(host: ToolHost) -> None:
    base = "/sys/class/infiniband/rocep1s0f0/ports/1"
    assert host.sh(f"cat {base}/gids/3").stdout == "0000:0000:0000:0000:0000:ffff:c0a8:640b\n"
    assert host.sh(f"cat {base}/gid_attrs/types/3").stdout == "RoCE v2\n"
    assert host.sh(f"cat {base}/gid_attrs/ndevs/3").stdout == "enp1s0f0np0\n"
    assert host.sh(f"cat {base}/gid_attrs/types/0").stdout == "IB/RoCE v1\n"
    unused = host.sh(f"cat {base}/gid_attrs/types/9")
    assert unused.returncode == 1 and unused.stderr == f"cat: {base}/gid_attrs/types/9: Invalid argument\n"
    assert host.sh(f"cat {base}/gids/9").stdout == "0000:0000:0000:0000:0000:0000:0000:0000\n"
    other = host.sh("cat /sys/class/infiniband/rocep1s0f1/ports/1/gids/3").stdout
    assert other == "0000:0000:0000:0000:0000:0000:0000:0000\n"
    host.fault("wrong-gid")
    assert host.sh(f"cat {base}/gid_attrs/types/3").stdout == "IB/RoCE v1\n"
    assert host.sh(f"cat {base}/gid_attrs/types/5").stdout == "RoCE v2\n"
    assert host.sh(f"cat {base}/gids/5").stdout == "0000:0000:0000:0000:0000:ffff:c0a8:640b\n"


# --- cat / head / meminfo -----------------------------------------------------------------------


def _meminfo(host: ToolHost) -> dict[str, int]:
    out = host.sh("cat /proc/meminfo", check=True).stdout
    return {line.split(":")[0]: int(line.split()[1]) for line in out.splitlines()}


def test_meminfo_is_dynamic(host: ToolHost) -> None:
    idle = _meminfo(host)
    assert idle["MemTotal"] == 127600748 and len(idle) >= 45
    assert 100 * 2**20 < idle["MemAvailable"] < idle["MemTotal"]
    (host.root / "run" / "mem.json").write_text(json.dumps({"used_bytes": 90 * 2**30}))
    busy = _meminfo(host)
    assert busy["MemAvailable"] == idle["MemAvailable"] - 90 * 2**20
    host.fault("low-memory")
    assert _meminfo(host)["MemAvailable"] <= 40 * 2**20
    assert host.sh("head -n 3 /proc/meminfo").stdout.splitlines()[0] == "MemTotal:       127600748 kB"


def test_meminfo_file_itself_is_live(host: ToolHost) -> None:
    """Builtins read <root>/proc/meminfo directly: it follows mem.json and low-memory like `cat` does."""
    live = layout.meminfo_path(host.root)
    builtin = ('while read -r k v _; do if [[ $k == MemAvailable: ]]; then printf "%s\\n" "$v"; fi; done'
               ' < "$R37_SIM_ROOT/proc/meminfo"')

    def available() -> int:
        text = live.read_text()
        assert host.sh("cat /proc/meminfo", check=True).stdout == text
        assert int(host.sh(builtin, check=True).stdout) == int(text.split("MemAvailable:")[1].split()[0])
        return int(text.split("MemAvailable:")[1].split()[0])

    assert layout.meminfo_base_path(host.root).read_text() == provision.meminfo_base_text()
    idle = available()
    io = HostIO(host.root, host.spec.ib_hca)
    io.set_memory(90 * 2**30)
    assert available() == idle - 90 * 2**20
    host.fault("low-memory", params={"available_gib": 12})
    assert available() == 12 * 2**20
    host.fault("low-memory", on=False)
    assert available() == idle - 90 * 2**20
    io.cleanup()
    assert available() == idle
    io.set_memory(2**30)
    provision_host(host.root, host.spec)  # re-provisioning renders the live text again, not the base
    assert available() == idle - 2**20


def test_cat_and_head_delegate_everything_else(host: ToolHost, tmp_path: Path) -> None:
    f = tmp_path / "x.txt"
    f.write_text("a\nb\nc\n")
    assert host.sh(f"cat -n {f}").stdout == "     1\ta\n     2\tb\n     3\tc\n"
    assert host.sh(f"echo hi | cat - {f}").stdout == "hi\na\nb\nc\n"
    missing = host.sh("cat /nonexistent/file")
    assert missing.returncode == 1 and missing.stderr == "cat: /nonexistent/file: No such file or directory\n"
    assert host.sh(f"head -n 1 {f}").stdout == "a\n"
    gone = host.sh("head -n 1 /sys/class/infiniband/nope/ports/1/state")
    assert gone.returncode == 1 and "No such file or directory" in gone.stderr
    glob = host.sh("cat /sys/class/infiniband/*/ports/1/counters/port_xmit_data", check=True)
    assert len(glob.stdout.split()) == 4 and all(int(v) > 0 for v in glob.stdout.split())


# --- identity, ip, ss, df ----------------------------------------------------------------------


def test_uname_and_hostname(host: ToolHost) -> None:
    assert host.sh("uname -m").stdout == "aarch64\n"
    assert host.sh("uname -r").stdout == "6.11.0-1016-nvidia\n"
    assert host.sh("uname -a").stdout.startswith("Linux spark-1 6.11.0-1016-nvidia #")
    assert host.sh("uname -a").stdout.endswith(" aarch64 aarch64 aarch64 GNU/Linux\n")
    assert host.sh("uname").stdout == "Linux\n"
    assert host.sh("uname -q").returncode == 1
    assert host.sh("hostname").stdout == "spark-1\n"


def test_ip_brief_and_json(host: ToolHost) -> None:
    lines = host.sh("ip -br address", check=True).stdout.splitlines()
    assert lines[0].startswith("lo               UNKNOWN        127.0.0.1/8")
    assert f"enp1s0f0np0      UP             {PEERS[1]}/24 " in lines
    links = json.loads(host.sh("ip -j link", check=True).stdout)
    assert [d["ifname"] for d in links] == [
        "lo",
        "enP7s7",
        "enp1s0f0np0",
        "enp1s0f1np1",
        "enP2p1s0f0np0",
        "enP2p1s0f1np1",
    ]
    assert "addr_info" not in links[0]
    assert host.sh("ip -j addr show dev nope").returncode == 1


def test_ss_reports_only_this_hosts_listeners(host: ToolHost) -> None:
    import socket

    with socket.socket() as mine, socket.socket() as other:
        mine.bind((host.spec.api_bind, 0))
        mine.listen()
        other.bind(("127.0.37.99", 0))
        other.listen()
        port = mine.getsockname()[1]
        out = host.sh("ss -H -l -t -n", check=True).stdout
        assert f"0.0.0.0:{port} " in out
        assert f":{other.getsockname()[1]} " not in out
        assert out.split()[0] == "LISTEN"
        assert host.sh(f"ss -Hltn sport = :{port + 1}").stdout == ""


def test_df_counts_allocated_bytes_and_low_disk(host: ToolHost) -> None:
    srv = host.spec.srv_dir
    before = host.sh(f"df -P -B1 {srv}", check=True).stdout.splitlines()
    assert before[0].split() == ["Filesystem", "1-blocks", "Used", "Available", "Capacity", "Mounted", "on"]
    size, used, avail = (int(x) for x in before[1].split()[1:4])
    assert size == 4_000_000_000_000 and used + avail == size
    sparse = Path(srv) / "models" / "sparse.bin"
    with open(sparse, "wb") as f:
        f.write(b"x" * 1_000_000)
        f.truncate(10_000_000_000)
    after = host.sh(f"df -P -B1 {srv}/models", check=True).stdout.splitlines()[1].split()
    assert 1_000_000 <= int(after[2]) - used < 2_000_000  # sparse: allocated, not apparent size
    host.fault("low-disk")
    low = host.sh(f"df -P -B1 {srv}", check=True).stdout.splitlines()[1].split()
    assert int(low[3]) == min(30_000_000_000, size // 256)
    assert host.sh(f"df -h {srv}", check=True).stdout.splitlines()[1].split()[1] == "3.7T"
    assert host.sh("df -P -B1 /", check=True).stdout.splitlines()[1].split()[-1] == "/"


def test_fault_switches_validate() -> None:
    assert set(DESCRIPTIONS) == set(layout.FAULTS)
    with pytest.raises(ValueError, match="unknown fault"):
        set_fault(Path("/nonexistent"), "gremlins", True)


def test_sim_faults_lists_only_the_params_sim_fault_takes(tmp_path: Path) -> None:
    from cockpit.sim.faults import PARAMS

    for name, keys in PARAMS.items():           # every listed param is taken ...
        for key in keys:
            set_fault(tmp_path, name, True, {key: 1})
            assert json.loads((layout.faults_dir(tmp_path) / name).read_text()) == {key: 1}
            set_fault(tmp_path, name, False)
    # ... and any other is refused, naming the ones the fault takes
    with pytest.raises(ValueError, match="fault low-disk takes avail_bytes, free_bytes, not gib"):
        set_fault(tmp_path, "low-disk", True, {"gib": 1})
    with pytest.raises(ValueError, match="fault no-gpu takes no params, not mhz"):
        set_fault(tmp_path, "no-gpu", True, {"mhz": 1})
    assert not (layout.faults_dir(tmp_path) / "low-disk").exists()
    argv = [sys.executable, "-m", "cockpit", "sim", "faults", "--dir", str(tmp_path / "none")]
    shown = subprocess.run(argv, capture_output=True, text=True, timeout=120, check=True).stdout
    listed = set(re.findall(r'--params \'\{"(\w+)"', shown))
    assert listed == {k for keys in PARAMS.values() for k in keys}
    assert "params:" not in "".join(DESCRIPTIONS.values())     # params are listed from PARAMS only
    assert "30 GB available" not in shown       # low-disk: 1/256 of the simulated disk, at most 30 GB


def test_nvidia_smi_clock_event_reasons_and_gpu_thermal(host: ToolHost) -> None:
    q = "nvidia-smi --query-gpu=clocks_event_reasons.active,clocks_event_reasons.hw_thermal_slowdown"
    head = host.sh(q + " --format=csv", check=True).stdout.splitlines()
    assert head == ["clocks_event_reasons.active, clocks_event_reasons.hw_thermal_slowdown",
                    "0x0000000000000001, Not Active"]                  # idle, as the real idle H200
    old = host.sh("nvidia-smi --query-gpu=clocks_throttle_reasons.active --format=csv,noheader", check=True)
    assert old.stdout == "0x0000000000000001\n"
    host.fault("gpu-thermal")
    assert host.sh(q + " --format=csv,noheader,nounits", check=True).stdout == "0x0000000000000061, Active\n"
    report = host.sh("nvidia-smi -q", check=True).stdout
    section = report.split("    Clocks Event Reasons\n")[1].split("    Temperature\n")[0].splitlines()
    assert section[0] == f"{'        Idle':<42}: Active"
    assert f"{'            HW Thermal Slowdown':<42}: Active" in section
    assert f"{'        SW Power Cap':<42}: Not Active" in section and len(section) == 9
    assert f"{'        GPU Current Temp':<42}: 92 C" in report
    host.fault("gpu-thermal", params={"reasons": ["hw_power_brake_slowdown", "hw_slowdown"]})
    out = host.sh("nvidia-smi --query-gpu=clocks_event_reasons.active --format=csv,noheader", check=True)
    assert out.stdout == "0x0000000000000089\n"


def test_journalctl_kernel_log_xid_and_denied(host: ToolHost) -> None:
    from cockpit.sim.faults import XID_PCI

    out = host.sh("journalctl -k -b -n 1 -o short-iso --no-pager", check=True).stdout
    stamp = r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d[+-]\d\d:\d\d"
    assert re.fullmatch(stamp + r" spark-1 kernel: Linux version .*\n", out), out
    host.fault("xid", params={"xid": 79})
    host.fault("xid", params={"xid": 13})
    out = host.sh("journalctl -k -o short-iso --no-pager --since=-60s", check=True).stdout.splitlines()
    assert [line.split(" kernel: ", 1)[1] for line in out[-2:]] == [
        f"NVRM: Xid ({XID_PCI}): 79, pid='<unknown>', name=<unknown>, GPU has fallen off the bus.",
        f"NVRM: Xid ({XID_PCI}): 13, pid=48213, name=python3, Graphics SM Warp Exception on (GPC 0, TPC 1, "
        "SM 0): Illegal Instruction Encoding"]
    host.fault("xid", on=False)                                        # kernel messages stay
    assert "Xid" in host.sh("journalctl -k --no-pager -n 1", check=True).stdout
    assert host.sh("journalctl -k --since=-1s --no-pager -n 0").stdout == "-- No entries --\n"
    assert host.sh("journalctl --since=yesterdayish").returncode == 1
    host.fault("klog-denied")
    denied = host.sh("journalctl -k -n 1 --no-pager")
    assert denied.returncode == 0 and denied.stdout == "-- No entries --\n"
    assert denied.stderr.startswith("Hint: You are currently not seeing messages from other users and the "
                                    "system.")
