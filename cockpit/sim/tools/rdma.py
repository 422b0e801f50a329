"""`rdma` (iproute2) stand-in: `[-j] [-p] link [show [DEV[/PORT]]]`, `[-j] statistic [show]`, `dev`.

State comes from the host's sysfs tree (`_fabric`), so faults written there show up here.
"""

from __future__ import annotations

import json
import os
import sys

from cockpit.sim.tools import _fabric, _host


def _links(spec: dict, only: str | None) -> list[dict]:
    out = []
    for idx, (hca, netdev) in enumerate(_fabric.hcas(spec)):
        if only and only.split("/")[0] != hca:
            continue
        up = _fabric.port_up(hca)
        out.append(
            {
                "ifindex": idx,
                "ifname": hca,
                "port": 1,
                "state": "ACTIVE" if up else "DOWN",
                "physical_state": "LINK_UP" if up else "DISABLED",
                "netdev": netdev,
                "netdev_index": _fabric.ifindex(spec, netdev),
            }
        )
    return out


def _stats(spec: dict, only: str | None) -> list[dict]:
    out = []
    for link in _links(spec, only):
        d = os.path.join(_fabric.port_dir(link["ifname"]), "hw_counters")
        row: dict = {"ifname": link["ifname"], "port": 1}
        for name in _fabric.HW_COUNTERS:
            row[name] = int(_host.read_first_line(os.path.join(d, name), "0") or 0)
        out.append(row)
    return out


def _emit(rows: list[dict], as_json: bool, pretty: bool, text) -> None:
    if as_json:
        sys.stdout.write(
            json.dumps(rows, indent=4 if pretty else None, separators=None if pretty else (",", ":")) + "\n"
        )
    else:
        for row in rows:
            sys.stdout.write(text(row) + "\n")


def main(argv: list[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    as_json = pretty = False
    while args and args[0].startswith("-"):
        flag = args.pop(0)
        as_json |= flag in ("-j", "-json", "--json")
        pretty |= flag in ("-p", "-pretty", "--pretty")
        if flag not in ("-j", "-json", "--json", "-p", "-pretty", "--pretty", "-d", "-details"):
            sys.stderr.write(f'Option "{flag}" is unknown, try "rdma -help".\n')
            return 1
    spec = _host.spec()
    obj = args.pop(0) if args else "help"
    cmd = args.pop(0) if args else "show"
    if cmd == "list":
        cmd = "show"
    if obj in ("link", "l") and cmd == "show":
        only = args[0] if args else None
        rows = _links(spec, only)
        if only and not rows:
            sys.stderr.write("Wrong device name\n")
            return 1
        _emit(
            rows,
            as_json,
            pretty,
            lambda r: (
                f"link {r['ifname']}/{r['port']} state {r['state']} physical_state {r['physical_state']} "
                f"netdev {r['netdev']}"
            ),
        )
        return 0
    if obj in ("statistic", "stat", "s") and cmd == "show":
        only = args[1] if len(args) > 1 and args[0] == "link" else None
        rows = _stats(spec, only)
        _emit(
            rows,
            as_json,
            pretty,
            lambda r: (
                f"link {r['ifname']}/{r['port']} "
                + " ".join(f"{k} {v}" for k, v in r.items() if k not in ("ifname", "port"))
            ),
        )
        return 0
    if obj in ("dev", "d") and cmd == "show":
        rows = [
            {
                "ifindex": i,
                "ifname": hca,
                "node_type": "ca",
                "fw": _fabric.FW_VER,
                "node_guid": _fabric.node_guid(spec["rank"], i),
                "sys_image_guid": _fabric.node_guid(spec["rank"], i),
            }
            for i, (hca, _) in enumerate(_fabric.hcas(spec))
        ]
        _emit(
            rows,
            as_json,
            pretty,
            lambda r: (
                f"{r['ifindex']}: {r['ifname']}: node_type {r['node_type']} fw {r['fw']} "
                f"node_guid {r['node_guid']} sys_image_guid {r['sys_image_guid']}"
            ),
        )
        return 0
    sys.stderr.write(
        "Usage: rdma [ OPTIONS ] OBJECT { COMMAND | help }\n"
        "where  OBJECT := { dev | link | resource | system | statistic | help }\n"
    )
    return 0 if obj == "help" else 1


if __name__ == "__main__":
    sys.exit(main())
