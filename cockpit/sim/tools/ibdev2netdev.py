"""`ibdev2netdev` stand-in (Mellanox OFED script): `HCA port 1 ==> NETDEV (Up|Down)`, `-v` long form."""

from __future__ import annotations

import sys

from cockpit.sim.tools import _fabric, _host

PCI = {
    "rocep1s0f0": "0000:01:00.0",
    "rocep1s0f1": "0000:01:00.1",
    "roceP2p1s0f0": "0002:01:00.0",
    "roceP2p1s0f1": "0002:01:00.1",
}


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    verbose = "-v" in args
    spec = _host.spec()
    for hca, netdev in _fabric.hcas(spec):
        up = _fabric.port_up(hca)
        link = "Up" if up else "Down"
        if verbose:
            pci = PCI.get(hca, "0000:00:00.0")
            sys.stdout.write(
                f"{pci} {hca} ({_fabric.HCA_TYPE} - {_fabric.BOARD_ID}) NVIDIA ConnectX-7 "
                f"fw {_fabric.FW_VER} port 1 ({'ACTIVE' if up else 'DOWN'}) ==> {netdev} ({link})\n"
            )
        else:
            sys.stdout.write(f"{hca} port 1 ==> {netdev} ({link})\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
