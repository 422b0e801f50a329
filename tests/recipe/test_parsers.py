"""Parsers of real host tool output, on samples in the formats of docs/host-tools.md (and broken variants)."""

from __future__ import annotations

import json

from hypothesis import given
from hypothesis import strategies as st

from cockpit.recipe import containers as dk
from cockpit.recipe import parsers as P

SMI_TABLE = """Mon Nov 24 10:21:33 2025
+-----------------------------------------------------------------------------------------+
| NVIDIA-SMI 580.95.05              Driver Version: 580.95.05      CUDA Version: 13.0     |
+-----------------------------------------+------------------------+----------------------+
| GPU  Name                 Persistence-M | Bus-Id          Disp.A | Volatile Uncorr. ECC |
| Fan  Temp   Perf          Pwr:Usage/Cap |           Memory-Usage | GPU-Util  Compute M. |
|                                         |                        |               MIG M. |
|=========================================+========================+======================|
|   0  NVIDIA GB10                    On  |   0000000F:01:00.0 Off |                  N/A |
| N/A   36C    P8              3W /  N/A  | Not Supported          |      0%      Default |
|                                         |                        |                  N/A |
+-----------------------------------------+------------------------+----------------------+
"""


def test_nvsmi_csv_turns_na_into_none_and_skips_noise() -> None:
    fields = ["name", "driver_version", "clocks.sm", "memory.total", "power.limit"]
    text = "NVIDIA GB10, 580.95.05, 2405, [N/A], [N/A]\nsome warning line\n"
    rows = P.parse_nvsmi_csv(text, fields)
    assert rows == [
        {
            "name": "NVIDIA GB10",
            "driver_version": "580.95.05",
            "clocks.sm": "2405",
            "memory.total": None,
            "power.limit": None,
        }
    ]
    failed = "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver. Make sure..."
    assert P.parse_nvsmi_csv(failed, fields) == []
    assert P.to_int("900 MHz") == 900 and P.to_int("Not Supported") is None and P.to_float("3.5 W") == 3.5


def test_nvsmi_table_versions_and_gpu_row() -> None:
    t = P.parse_nvsmi_table(SMI_TABLE)
    assert (t.driver_version, t.cuda_version) == ("580.95.05", "13.0")
    assert t.gpus == [
        {
            "index": "0",
            "name": "NVIDIA GB10",
            "persistence": "On",
            "bus_id": "0000000F:01:00.0",
            "fan": None,
            "temperature": "36C",
            "pstate": "P8",
            "power": "3W",
            "power_cap": None,
            "memory": None,
            "utilization": "0%",
        }
    ]
    assert P.parse_nvsmi_table("garbage").driver_version is None


def test_meminfo_in_bytes() -> None:
    text = "MemTotal:       127600748 kB\nMemAvailable:   118912344 kB\nHugePages_Total:       0\nbad line\n"
    assert P.parse_meminfo(text) == {
        "MemTotal": 127600748 * 1024,
        "MemAvailable": 118912344 * 1024,
        "HugePages_Total": 0,
    }


DF = """Filesystem         1-blocks        Used   Available Capacity Mounted on
/dev/nvme0n1p2 3936629088256 1022462558208 2714012135424      28% /
/dev/nvme0n1p2 3936629088256 1022462558208 2714012135424      28% /
nfs:/export/models 1000000000000 600000000000 400000000000 60% /mnt/my models
"""


def test_df_rows_errors_and_operand_mapping() -> None:
    rows = P.parse_df(DF)
    assert rows[2] == P.DfRow("nfs:/export/models", 10**12, 6 * 10**11, 4 * 10**11, "/mnt/my models")
    text = (
        "df: /srv/models/x: No such file or directory\n/usr/bin/df: 'rel dir': No such file or directory\n"
        + DF
    )
    assert P.parse_df_errors(text) == {
        "/srv/models/x": "No such file or directory",
        "rel dir": "No such file or directory",
    }
    mapped = P.df_by_path(text, ["/srv/models/x", "/srv/models", "/srv", "rel dir", "/mnt/my models"])
    assert mapped["/srv"].mount == "/" and mapped["/mnt/my models"].avail == 4 * 10**11
    assert "/srv/models/x" not in mapped
    assert P.df_by_path(DF, ["/a"]) == {}  # rows and operands disagree: refuse to guess


IP_J = json.dumps(
    [
        {
            "ifindex": 1,
            "ifname": "lo",
            "flags": ["LOOPBACK", "UP", "LOWER_UP"],
            "operstate": "UNKNOWN",
            "addr_info": [{"family": "inet", "local": "127.0.0.1", "prefixlen": 8}],
        },
        {
            "ifindex": 3,
            "ifname": "enp1s0f0np0",
            "flags": ["BROADCAST", "MULTICAST", "UP", "LOWER_UP"],
            "operstate": "UP",
            "addr_info": [
                {"family": "inet", "local": "192.168.100.10", "prefixlen": 24},
                {"family": "inet6", "local": "fe80::4ebb:47ff:fe2c:10", "prefixlen": 64},
            ],
        },
        {"ifindex": 4, "ifname": "enp1s0f1np1", "flags": ["BROADCAST"], "operstate": "DOWN"},
        {"junk": True},
    ]
)


def test_ip_addr_and_lookup() -> None:
    ifaces = P.parse_ip_addr(IP_J)
    assert [i.name for i in ifaces] == ["lo", "enp1s0f0np0", "enp1s0f1np1"]
    hit = P.iface_with_ip(ifaces, "192.168.100.10")
    assert hit is not None and hit.name == "enp1s0f0np0" and hit.up
    assert P.iface_with_ip(ifaces, "192.168.100.11") is None
    assert not ifaces[2].up and ifaces[2].addrs == []
    assert P.parse_ip_addr('Command "addr" is unknown') == []


def test_rdma_link_json_and_text() -> None:
    j = (
        '[{"ifindex":0,"ifname":"rocep1s0f0","port":1,"state":"ACTIVE","physical_state":"LINK_UP",'
        '"netdev":"enp1s0f0np0","netdev_index":3},{"ifname":"roceP2p1s0f0","port":1,"state":"DOWN",'
        '"physical_state":"DISABLED"}]'
    )
    links = P.parse_rdma_links(j)
    assert links[0] == P.RdmaLink("rocep1s0f0", 1, "ACTIVE", "LINK_UP", "enp1s0f0np0")
    assert links[1].netdev is None and links[1].state == "DOWN"
    text = "link rocep1s0f0/1 state ACTIVE physical_state LINK_UP netdev enp1s0f0np0\n"
    assert P.parse_rdma_links(text) == [P.RdmaLink("rocep1s0f0", 1, "ACTIVE", "LINK_UP", "enp1s0f0np0")]


IBV = (
    "hca_id:\trocep1s0f0\n\ttransport:\t\t\tInfiniBand (0)\n\tfw_ver:\t\t\t\t28.45.1020\n"
    "\tphys_port_cnt:\t\t\t1\n\t\tport:\t1\n\t\t\tstate:\t\t\tPORT_ACTIVE (4)\n"
    "\t\t\tactive_mtu:\t\t4096 (5)\n\t\t\tlink_layer:\t\tEthernet\n\n"
    "hca_id:\troceP2p1s0f0\n\t\tport:\t1\n\t\t\tstate:\t\t\tPORT_DOWN (1)\n\t\t\tlink_layer:\t\tEthernet\n"
)


def test_ibv_devinfo_blocks() -> None:
    devs = P.parse_ibv_devinfo(IBV)
    assert [d.hca_id for d in devs] == ["rocep1s0f0", "roceP2p1s0f0"]
    assert devs[0].fields["fw_ver"] == "28.45.1020"
    assert devs[0].ports[1] == P.IbvPort(1, "PORT_ACTIVE", "4096 (5)", "Ethernet")
    assert devs[1].ports[1].state == "PORT_DOWN"
    assert P.parse_ibv_devinfo("IB device 'x' wasn't found\n") == []


def test_head_verbose_with_unreadable_files() -> None:
    text = (
        "==> /s/gids/0 <==\nfe80:0000:0000:0000:4ebb:47ff:fe2c:0010\n\n"
        "==> /s/gids/4 <==\nhead: error reading '/s/gid_attrs/types/4': Invalid argument\n"
        "head: cannot open '/s/gids/9' for reading: No such file or directory\n"
        "==> /s/empty <==\n\n==> /s/gid_attrs/types/0 <==\nRoCE v2\n"
    )
    got = P.parse_head_verbose(text)
    assert got == {
        "/s/gids/0": "fe80:0000:0000:0000:4ebb:47ff:fe2c:0010",
        "/s/gids/4": None,
        "/s/gid_attrs/types/4": None,
        "/s/gids/9": None,
        "/s/empty": None,
        "/s/gid_attrs/types/0": "RoCE v2",
    }
    assert P.parse_read_files("/a\tRoCE v2\n/b\t\nnoise\n") == {"/a": "RoCE v2", "/b": ""}


def test_gid_table_and_ipv4_mapping() -> None:
    d = "/sys/class/infiniband/rocep1s0f0/ports/1"
    gid = P.ipv4_mapped_gid("192.168.3.72")
    assert gid == "0000:0000:0000:0000:0000:ffff:c0a8:0348"
    values = {
        f"{d}/gids/0": "fe80:0000:0000:0000:4ebb:47ff:fe2c:0010",
        f"{d}/gid_attrs/types/0": "IB/RoCE v1",
        f"{d}/gids/3": gid,
        f"{d}/gid_attrs/types/3": "RoCE v2",
        f"{d}/gid_attrs/ndevs/3": "enp1s0f0np0",
        f"{d}/gids/4": P.ZERO_GID,
    }
    table = P.gid_table(values, d, 16)
    assert [(e.index, e.type, e.ipv4) for e in table] == [
        (0, "IB/RoCE v1", None),
        (3, "RoCE v2", "192.168.3.72"),
    ]
    assert P.gid_ipv4("not a gid") is None


@given(st.ip_addresses(v=4))
def test_ipv4_gid_round_trip(ip) -> None:  # type: ignore[no-untyped-def]
    assert P.gid_ipv4(P.ipv4_mapped_gid(str(ip))) == str(ip)


def test_docker_info_ok_down_and_missing_keys() -> None:
    ok = json.dumps(
        {
            "ServerVersion": "28.3.3",
            "Runtimes": {"nvidia": {"path": "nvidia-container-runtime"}, "runc": {"path": "runc"}},
            "DefaultRuntime": "runc",
            "DockerRootDir": "/var/lib/docker",
        }
    )
    info = P.parse_docker_info(ok)
    assert info is not None and info.ok and info.runtimes == ["nvidia", "runc"]
    down = (
        '{"ID":"","ServerVersion":"","ServerErrors":["Cannot connect to the Docker daemon at '
        'unix:///var/run/docker.sock. Is the docker daemon running?"]}\n'
    )
    d = P.parse_docker_info(down)
    assert d is not None and not d.ok and d.errors[0].startswith("Cannot connect")
    assert P.parse_docker_info("permission denied while trying to connect") is None
    bare = P.parse_docker_info('{"ServerVersion": "27.0.1", "Runtimes": null}')
    assert bare is not None and bare.ok and bare.runtimes == []


def test_docker_ps_lines_and_container_lookup() -> None:
    text = (
        '{"ID":"abc","Names":"ds41_r37","State":"exited","Status":"Exited (1) 3 minutes ago",'
        '"Image":"local/ds41-r37-spark:runtime"}\n{"ID":"def","Names":"other,alias","State":"running"}\n'
    )
    exited = dk.ps_named(text, "ds41_r37")
    assert exited is not None and exited.state == "exited" and exited.image == "local/ds41-r37-spark:runtime"
    alias = dk.ps_named(text, "alias")
    assert alias is not None and alias.id == "def" and alias.names == ("other", "alias")
    assert dk.ps_named(text, "ds41") is None  # exact names only (docker's filter matches substrings)
    assert dk.parse_ps("") == []
    assert P.parse_image_id("sha256:" + "a" * 64 + "\n") == "sha256:" + "a" * 64
    assert P.parse_image_id("Error: No such image: local/x") is None


def test_ss_listeners() -> None:
    text = (
        "LISTEN 0      4096         0.0.0.0:8000      0.0.0.0:*\n"
        "LISTEN 0      128             [::]:22           [::]:*\n"
        "LISTEN 0      4096   127.0.0.53%lo:53        0.0.0.0:*\n"
        'LISTEN 0      511                *:29543           *:*    users:(("python3",pid=1,fd=3))\n'
        "garbage\n"
    )
    assert P.parse_ss_listeners(text) == [
        P.Listener("0.0.0.0", 8000),
        P.Listener("::", 22),
        P.Listener("127.0.0.53", 53),
        P.Listener("*", 29543),
    ]


def test_safetensors_index_find_sizes_and_revision() -> None:
    index = json.dumps(
        {
            "metadata": {"total_size": 123},
            "weight_map": {
                "a.weight": "model-00001-of-00002.safetensors",
                "b.weight": "model-00002-of-00002.safetensors",
                "c.weight": "model-00001-of-00002.safetensors",
            },
        }
    )
    got = P.parse_safetensors_index(index)
    assert got == P.SafetensorsIndex(
        ["model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors"], 123
    )
    assert P.parse_safetensors_index('{"metadata": {}}') is None
    assert P.parse_safetensors_index("not json") is None
    assert P.parse_find_sizes("a\t10\nname with\ttab\t20\nbad\n") == {"a": 10, "name with\ttab": 20}
    assert P.parse_revision_file('{"repo": "o/n", "revision": "abc"}\n') == P.Revision("o/n", "abc")
    assert P.parse_revision_file("o/n@abc") == P.Revision("o/n", "abc")
    assert P.parse_revision_file("abc\n") == P.Revision(None, "abc")
    assert P.parse_revision_file("  ") is None


def test_tcp_probe_outcomes() -> None:
    assert P.parse_tcp_probe(0, "") == "open"
    assert (
        P.parse_tcp_probe(
            1, "bash: connect: Connection refused\nbash: line 1: /dev/tcp/x: Connection refused"
        )
        == "refused"
    )
    assert P.parse_tcp_probe(124, "") == "timeout"
    assert P.parse_tcp_probe(1, "bash: connect: No route to host") == "unreachable"


def test_split_sections_handles_cut_off_output() -> None:
    text = "@@m begin a\nhello\n\n@@m end a 0\n@@m begin b\npartial"
    got = P.split_sections(text, "@@m")
    assert got["a"] == P.Section("a", "hello\n", 0)
    assert got["b"] == P.Section("b", "partial", None)


@given(st.text(max_size=200))
def test_parsers_never_raise_on_junk(text: str) -> None:
    P.parse_meminfo(text)
    P.parse_df(text)
    P.parse_df_errors(text)
    P.parse_ip_addr(text)
    P.parse_rdma_links(text)
    P.parse_ibv_devinfo(text)
    P.parse_head_verbose(text)
    P.parse_docker_info(text)
    dk.parse_ps(text)
    P.parse_ss_listeners(text)
    P.parse_safetensors_index(text)
    P.parse_find_sizes(text)
    P.parse_revision_file(text)
    P.parse_nvsmi_table(text)
    P.parse_nvsmi_csv(text, ["a", "b"])
    P.split_sections(text, "@@m")
