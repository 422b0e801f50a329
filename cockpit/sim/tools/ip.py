"""`ip` stand-in for demo hosts (they share the machine's interfaces): `[-j] [-br] addr|link [show [dev X]]`.

Interfaces: lo, enP7s7 (management, 10.37.0.10+rank/24) and the four fabric netdevs, the fabric IP on
`fabric_iface`. The netdev of a down RDMA port (sysfs state, e.g. the `rdma-port-down` fault) is DOWN
with NO-CARRIER and keeps its address.
"""

from __future__ import annotations

import json
import sys

from cockpit.sim.tools import _fabric, _host

FOREVER = 4294967295


def mgmt_ip(spec: dict) -> str:
    return f"10.37.0.{10 + int(spec['rank'])}"


def interfaces(spec: dict) -> list[dict]:
    rank = int(spec["rank"])
    lo = {
        "ifindex": 1,
        "ifname": "lo",
        "flags": ["LOOPBACK", "UP", "LOWER_UP"],
        "mtu": 65536,
        "qdisc": "noqueue",
        "operstate": "UNKNOWN",
        "group": "default",
        "txqlen": 1000,
        "link_type": "loopback",
        "address": "00:00:00:00:00:00",
        "broadcast": "00:00:00:00:00:00",
        "addr_info": [
            {
                "family": "inet",
                "local": "127.0.0.1",
                "prefixlen": 8,
                "scope": "host",
                "label": "lo",
                "valid_life_time": FOREVER,
                "preferred_life_time": FOREVER,
            },
            {
                "family": "inet6",
                "local": "::1",
                "prefixlen": 128,
                "scope": "host",
                "valid_life_time": FOREVER,
                "preferred_life_time": FOREVER,
            },
        ],
    }
    out = [lo, _eth(2, "enP7s7", _fabric.mgmt_mac(rank), True, 1500, mgmt_ip(spec), 24)]
    for i, (hca, netdev) in enumerate(_fabric.hcas(spec)):
        ip = spec["fabric_ip"] if netdev == spec["fabric_iface"] else None
        out.append(
            _eth(
                _fabric.ifindex(spec, netdev),
                netdev,
                _fabric.mac(rank, i),
                _fabric.port_up(hca),
                9000,
                ip,
                int(spec.get("fabric_prefix", 24)),
            )
        )
    return out


def _eth(index: int, name: str, mac: str, up: bool, mtu: int, ip: str | None, prefix: int) -> dict:
    flags = (
        ["BROADCAST", "MULTICAST", "UP", "LOWER_UP"] if up else ["NO-CARRIER", "BROADCAST", "MULTICAST", "UP"]
    )
    addr_info: list[dict] = []
    d = {
        "ifindex": index,
        "ifname": name,
        "flags": flags,
        "mtu": mtu,
        "qdisc": "mq",
        "operstate": "UP" if up else "DOWN",
        "group": "default",
        "txqlen": 1000,
        "link_type": "ether",
        "address": mac,
        "broadcast": "ff:ff:ff:ff:ff:ff",
        "addr_info": addr_info,
    }
    if ip:
        octets = [int(x) for x in ip.split(".")]
        host_bits = 32 - prefix
        n = int.from_bytes(bytes(octets), "big") | ((1 << host_bits) - 1)
        brd = ".".join(str(b) for b in n.to_bytes(4, "big"))
        addr_info.append(
            {
                "family": "inet",
                "local": ip,
                "prefixlen": prefix,
                "broadcast": brd,
                "scope": "global",
                "label": name,
                "valid_life_time": FOREVER,
                "preferred_life_time": FOREVER,
            }
        )
    return d


def _text(ifs: list[dict], with_addr: bool) -> str:
    lines = []
    for d in ifs:
        state = d["operstate"]
        lines.append(
            f"{d['ifindex']}: {d['ifname']}: <{','.join(d['flags'])}> mtu {d['mtu']} qdisc {d['qdisc']} "
            f"state {state} group default qlen {d['txqlen']}"
        )
        lines.append(f"    link/{d['link_type']} {d['address']} brd {d['broadcast']}")
        for a in d["addr_info"] if with_addr else []:
            fam = "inet" if a["family"] == "inet" else "inet6"
            brd = f" brd {a['broadcast']}" if "broadcast" in a else ""
            label = f" {a['label']}" if fam == "inet" else ""
            lines.append(f"    {fam} {a['local']}/{a['prefixlen']}{brd} scope {a['scope']}{label}")
            lines.append("       valid_lft forever preferred_lft forever")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    as_json = brief = False
    while args and args[0].startswith("-"):
        flag = args.pop(0)
        if flag in ("-j", "-json"):
            as_json = True
        elif flag in ("-br", "-brief"):
            brief = True
        elif flag in ("-p", "-pretty", "-4", "-o", "-oneline", "-c", "-color", "-d", "-details"):
            continue
        else:
            sys.stderr.write(f'Option "{flag}" is unknown, try "ip -help".\n')
            return 255
    obj = args.pop(0) if args else ""
    if not any(obj and full.startswith(obj) for full in ("address", "link")):
        sys.stderr.write(
            f'Object "{obj}" is unknown, try "ip help".\n'
            if obj
            else "Usage: ip [ OPTIONS ] OBJECT { COMMAND | help }\n"
        )
        return 255 if obj else 0
    with_addr = "address".startswith(obj)
    if args and args[0] in ("show", "list", "ls", "sh"):
        args.pop(0)
    dev = None
    if args:
        dev = args[1] if args[0] == "dev" and len(args) > 1 else args[0]
    ifs = interfaces(_host.spec())
    if dev is not None:
        ifs = [d for d in ifs if d["ifname"] == dev]
        if not ifs:
            sys.stderr.write(f'Device "{dev}" does not exist.\n')
            return 1
    if not with_addr:
        for d in ifs:
            d.pop("addr_info")
    if as_json:
        sys.stdout.write(json.dumps(ifs, separators=(",", ":")) + "\n")
    elif brief:
        for d in ifs:
            if with_addr:
                addrs = "".join(f"{a['local']}/{a['prefixlen']} " for a in d["addr_info"])
                sys.stdout.write(f"{d['ifname']:<16} {d['operstate']:<14} {addrs}\n")
            else:
                sys.stdout.write(
                    f"{d['ifname']:<16} {d['operstate']:<14} {d['address']} <{','.join(d['flags'])}> \n"
                )
    else:
        sys.stdout.write(_text(ifs, with_addr))
    return 0


if __name__ == "__main__":
    sys.exit(main())
