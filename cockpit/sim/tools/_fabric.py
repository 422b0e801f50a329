"""RDMA identity of a simulated host and the sysfs files that carry its state.

sysfs under `<root>/sys/class/infiniband/<hca>/`: `node_guid`, `fw_ver`, `board_id`, `hca_type`,
`ports/1/{state,phys_state,rate,link_layer}`, `ports/1/counters/*`, `ports/1/hw_counters/*`,
`ports/1/gids/<i>`, `ports/1/gid_attrs/{types,ndevs}/<i>`. The HCA `hcas[i]` drives netdev `netdevs[i]`.
Port state and the GID table are (re)written by `provision_host` and `faults.set_fault`; counters are
written in place by the engine. Every stand-in (rdma, ibv_devinfo, ibdev2netdev, ip) reads these files.
"""

from __future__ import annotations

import os

from cockpit.sim.tools import _host

FW_VER = "28.45.1020"
BOARD_ID = "NVD0000000087"
HCA_TYPE = "MT4129"
ZERO_GID = "0000:0000:0000:0000:0000:0000:0000:0000"
NUM_GIDS = 16
# Port state strings exactly as the kernel writes them.
STATE_ACTIVE, STATE_DOWN = "4: ACTIVE", "1: DOWN"
PHYS_LINKUP, PHYS_DISABLED = "5: LinkUp", "3: Disabled"
RATE = "200 Gb/sec (2X NDR)"

HW_COUNTERS = (
    "rx_write_requests",
    "rx_read_requests",
    "rx_atomic_requests",
    "out_of_buffer",
    "out_of_sequence",
    "duplicate_request",
    "rnr_nak_retry_err",
    "packet_seq_err",
    "implied_nak_seq_err",
    "local_ack_timeout_err",
    "resp_local_length_error",
    "resp_cqe_error",
    "req_cqe_error",
    "req_remote_invalid_request",
    "req_remote_access_errors",
    "resp_remote_access_errors",
    "resp_cqe_flush_error",
    "req_cqe_flush_error",
    "roce_adp_retrans",
    "roce_adp_retrans_to",
    "roce_slow_restart",
    "roce_slow_restart_cnps",
    "roce_slow_restart_trans",
    "rp_cnp_ignored",
    "rp_cnp_handled",
    "np_ecn_marked_roce_packets",
    "np_cnp_sent",
)
COUNTERS = ("port_xmit_data", "port_rcv_data", "port_xmit_packets", "port_rcv_packets")


def mac(rank: int, index: int) -> str:
    return ":".join(f"{b:02x}" for b in (0x4C, 0xBB, 0x47, 0x2C, rank & 0xFF, 0x10 + index))


def mgmt_mac(rank: int) -> str:
    return ":".join(f"{b:02x}" for b in (0x3C, 0x6D, 0x66, 0x0A, rank & 0xFF, 0x07))


def _groups(octets: list[int]) -> str:
    return ":".join(f"{octets[i]:02x}{octets[i + 1]:02x}" for i in range(0, len(octets), 2))


def node_guid(rank: int, index: int) -> str:
    b = [int(x, 16) for x in mac(rank, index).split(":")]
    return _groups([b[0], b[1], b[2], 0x03, 0x00, b[3], b[4], b[5]])


def link_local_gid(rank: int, index: int) -> str:
    b = [int(x, 16) for x in mac(rank, index).split(":")]
    return "fe80:0000:0000:0000:" + _groups([b[0] ^ 0x02, b[1], b[2], 0xFF, 0xFE, b[3], b[4], b[5]])


def ipv4_gid(ip: str) -> str:
    a, b, c, d = (int(x) for x in ip.split("."))
    return f"0000:0000:0000:0000:0000:ffff:{a:02x}{b:02x}:{c:02x}{d:02x}"


def ula_gid(rank: int, index: int) -> str:
    return f"fd37:0000:0000:0001:0000:0000:{rank:04x}:{0x100 + index:04x}"


def gid_table(spec: dict, hca_index: int, wrong_gid: bool) -> list[tuple[str, str]]:
    """(gid, type) by GID index for one HCA; the fabric IP only on the fabric interface's HCA.

    Healthy: 0/1 link-local (RoCE v1/v2), 2/3 IPv4-mapped fabric IP (RoCE v1/v2), so index 3 is right.
    `wrong-gid` (on `ib_hca` only): an IPv6 ULA address was added, so 3 is a RoCE v1 ULA GID, 4 the ULA
    RoCE v2 GID and the IPv4-mapped RoCE v2 GID moved to 5.
    """
    rank = int(spec["rank"])
    ll = link_local_gid(rank, hca_index)
    table = [(ll, "IB/RoCE v1"), (ll, "RoCE v2")]
    netdev = spec["netdevs"][hca_index]
    if netdev == spec["fabric_iface"]:
        ip = ipv4_gid(spec["fabric_ip"])
        if wrong_gid and spec["hcas"][hca_index] == spec["ib_hca"]:
            ula = ula_gid(rank, hca_index)
            table += [(ip, "IB/RoCE v1"), (ula, "IB/RoCE v1"), (ula, "RoCE v2"), (ip, "RoCE v2")]
        else:
            table += [(ip, "IB/RoCE v1"), (ip, "RoCE v2")]
    return table


def port_dir(hca: str) -> str:
    return os.path.join(_host.ib_dir(), hca, "ports", "1")


def port_up(hca: str) -> bool:
    return _host.read_first_line(os.path.join(port_dir(hca), "state")).endswith("ACTIVE")


def phys_state(hca: str) -> str:
    return _host.read_first_line(os.path.join(port_dir(hca), "phys_state"))


def hcas(spec: dict) -> list[tuple[str, str]]:
    """(hca, netdev) pairs of the host, in spec order."""
    return list(zip(spec["hcas"], spec["netdevs"], strict=False))


def ifindex(spec: dict, netdev: str) -> int:
    """lo 1, enP7s7 2, the fabric netdevs 3.. in spec order."""
    return 3 + spec["netdevs"].index(netdev)
