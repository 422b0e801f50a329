"""`hostname` stand-in (demo hosts share one kernel): the host's simulated name and addresses."""

from __future__ import annotations

import sys

from cockpit.sim.tools import _host


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    spec = _host.spec()
    name = spec["hostname"]
    if any(a in ("-I", "--all-ip-addresses", "-i", "--ip-address") for a in args):
        from cockpit.sim.tools.ip import mgmt_ip

        print(f"{mgmt_ip(spec)} {spec['fabric_ip']} ")
        return 0
    if any(a in ("-s", "--short") for a in args):
        name = name.split(".")[0]
    for a in args:
        if not a.startswith("-"):
            sys.stderr.write("hostname: you must be root to change the host name\n")
            return 1
    print(name)
    return 0


if __name__ == "__main__":
    sys.exit(main())
