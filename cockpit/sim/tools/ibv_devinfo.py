"""`ibv_devinfo` stand-in: the block format of rdma-core for every HCA, or `-d DEV`."""

from __future__ import annotations

import sys

from cockpit.sim.tools import _fabric, _host


def block(spec: dict, idx: int, hca: str) -> str:
    up = _fabric.port_up(hca)
    guid = _fabric.node_guid(spec["rank"], idx)
    state = "PORT_ACTIVE (4)" if up else "PORT_DOWN (1)"
    return (
        f"hca_id:\t{hca}\n"
        "\ttransport:\t\t\tInfiniBand (0)\n"
        f"\tfw_ver:\t\t\t\t{_fabric.FW_VER}\n"
        f"\tnode_guid:\t\t\t{guid}\n"
        f"\tsys_image_guid:\t\t\t{guid}\n"
        "\tvendor_id:\t\t\t0x02c9\n"
        "\tvendor_part_id:\t\t\t4129\n"
        "\thw_ver:\t\t\t\t0x0\n"
        f"\tboard_id:\t\t\t{_fabric.BOARD_ID}\n"
        "\tphys_port_cnt:\t\t\t1\n"
        "\t\tport:\t1\n"
        f"\t\t\tstate:\t\t\t{state}\n"
        "\t\t\tmax_mtu:\t\t4096 (5)\n"
        f"\t\t\tactive_mtu:\t\t{'4096 (5)' if up else '1024 (3)'}\n"
        "\t\t\tsm_lid:\t\t\t0\n"
        "\t\t\tport_lid:\t\t0\n"
        "\t\t\tport_lmc:\t\t0x00\n"
        "\t\t\tlink_layer:\t\tEthernet\n\n"
    )


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    only = None
    for i, a in enumerate(args):
        if a in ("-d", "--ib-dev") and i + 1 < len(args):
            only = args[i + 1]
        elif a.startswith("--ib-dev="):
            only = a.split("=", 1)[1]
    spec = _host.spec()
    pairs = [(i, hca) for i, (hca, _) in enumerate(_fabric.hcas(spec)) if only in (None, hca)]
    if not pairs:
        sys.stderr.write(f"IB device '{only}' wasn't found\n")
        return 255
    sys.stdout.write("".join(block(spec, i, hca) for i, hca in pairs))
    return 0


if __name__ == "__main__":
    sys.exit(main())
