"""`ss` stand-in for demo hosts: TCP sockets bound to this host's `api_bind` address (demo hosts share
127.0.0.1), from /proc/net/tcp, shown as `0.0.0.0:PORT` like the real host's wildcard listener.

Options: -t -l -n -a -H (any combination, e.g. `-Hltn`), -p/-e ignored, filter `sport = :PORT`.
"""

from __future__ import annotations

import re
import socket
import struct
import sys

from cockpit.sim.tools import _host

STATES = {
    "01": "ESTAB",
    "02": "SYN-SENT",
    "03": "SYN-RECV",
    "04": "FIN-WAIT-1",
    "05": "FIN-WAIT-2",
    "06": "TIME-WAIT",
    "07": "UNCONN",
    "08": "CLOSE-WAIT",
    "09": "LAST-ACK",
    "0A": "LISTEN",
    "0B": "CLOSING",
}


def _addr(hexaddr: str) -> tuple[str, int]:
    ip_hex, port_hex = hexaddr.split(":")
    ip = socket.inet_ntoa(struct.pack("<I", int(ip_hex, 16)))
    return ip, int(port_hex, 16)


def sockets(bind: str) -> list[dict]:
    out: list[dict] = []
    try:
        with open("/proc/net/tcp") as f:
            rows = f.read().splitlines()[1:]
    except OSError:
        return out
    for row in rows:
        parts = row.split()
        (lip, lport), (rip, rport) = _addr(parts[1]), _addr(parts[2])
        if lip != bind:
            continue
        tx, rx = (int(x, 16) for x in parts[4].split(":"))
        out.append(
            {
                "state": STATES.get(parts[3], "UNKNOWN"),
                "lport": lport,
                "rip": rip,
                "rport": rport,
                "recvq": rx,
                "sendq": tx,
            }
        )
    return out


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    flags = set()
    filt: list[str] = []
    for a in args:
        if a.startswith("--"):
            flags.add(
                {"--listening": "l", "--tcp": "t", "--numeric": "n", "--all": "a", "--no-header": "H"}.get(
                    a, ""
                )
            )
        elif a.startswith("-"):
            flags.update(a[1:])
        else:
            filt.append(a)
    spec = _host.spec()
    bind = spec.get("api_bind") or "0.0.0.0"
    m = re.search(r"sport\s*(?:=|==|eq)\s*:?(\d+)", " ".join(filt))
    port = int(m.group(1)) if m else None
    rows = []
    for s in sockets(bind):
        listening = s["state"] == "LISTEN"
        if "a" not in flags and ("l" in flags) != listening:
            continue
        if port is not None and s["lport"] != port:
            continue
        peer = "0.0.0.0:*" if listening else f"{s['rip']}:{s['rport']}"
        recvq, sendq = (s["recvq"], s["sendq"]) if not listening else (0, 4096)
        rows.append((s["state"], str(recvq), str(sendq), f"0.0.0.0:{s['lport']}", peer))
    if "H" not in flags:
        sys.stdout.write(
            f"{'State':<6} {'Recv-Q':<6} {'Send-Q':<6} {'Local Address:Port':>20} "
            f"{'Peer Address:Port':<18}Process\n"
        )
    for st, rq, sq, local, peer in rows:
        sys.stdout.write(f"{st:<6} {rq:<6} {sq:<6} {local:>20} {peer:<18}\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
