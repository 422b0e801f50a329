"""`ib_write_bw` / `ib_write_lat` stand-ins: perftest's report format, a real TCP connection between server
and client on the fabric IP and port (perftest's out-of-band exchange), and the host's faults.

Server: `ib_write_bw -d HCA -x GID -p PORT -s SIZE [-n ITERS] [-F] [--report_gbits]`; client: the same
and the server's fabric IP. As in perftest, the device and its port are checked first (`rdma-port-down`:
"Port number 1 state is Down", exit 1), then the server prints its "Waiting for client to connect" banner
and listens; the client connects (refused or unreachable: "Couldn't connect to IP:PORT", exit 1; a peer
that never answers blocks until the caller's `timeout`). Both sides exchange their GID and link rate
over the socket; a GID index whose entry is not RoCE v2 on either side (`wrong-gid`) fails the run the
way a real mismatched GID does (the client's "Completion with error … Failed status 12", exit 1).
Otherwise both print the report: the bandwidth follows the slower side's port rate (`fabric-degraded`:
its `gbps`, default 50, and +3 µs latency), the message size and a little deterministic jitter.
"""

from __future__ import annotations

import os
import socket
import sys
import zlib
from typing import BinaryIO

from cockpit.sim.tools import _fabric, _host

DASH = "-" * 87
BANNER = ("\n************************************\n* Waiting for client to connect... *\n"
          "************************************\n")
BW_HEAD = " #bytes     #iterations    BW peak[Gb/sec]    BW average[Gb/sec]   MsgRate[Mpps]"
LAT_HEAD = (" #bytes #iterations    t_min[usec]    t_max[usec]  t_typical[usec]    t_avg[usec]    "
            "t_stdev[usec]   99% percentile[usec]   99.9% percentile[usec]")
DEGRADED_GBPS = 50.0


class Args:
    def __init__(self, argv: list[str], lat: bool) -> None:
        self.dev = ""
        self.gid = 0
        self.port = 18515
        self.size = 2 if lat else 65536
        self.iters = 1000 if lat else 5000
        self.gbits = False
        self.server: str | None = None
        it = iter(argv)
        for a in it:
            if a in ("-d", "--ib-dev"):
                self.dev = next(it, "")
            elif a in ("-x", "--gid-index"):
                self.gid = int(next(it, "0"))
            elif a in ("-p", "--port"):
                self.port = int(next(it, "18515"))
            elif a in ("-s", "--size"):
                self.size = int(next(it, "2"))
            elif a in ("-n", "--iters"):
                self.iters = int(next(it, "1000"))
            elif a in ("-i", "--ib-port"):
                next(it, "")
            elif a == "--report_gbits":
                self.gbits = True
            elif a.startswith("-"):
                continue                       # -F and the like: accepted, nothing to do
            else:
                self.server = a


def _gid_bytes(gid: str) -> str:
    raw = bytes.fromhex(gid.replace(":", ""))
    return ":".join(f"{b:02d}" for b in raw)


def _rate_gbps(hca: str) -> float:
    text = _host.read_first_line(os.path.join(_fabric.port_dir(hca), "rate"), "0 Gb/sec")
    try:
        rate = float(text.split()[0])
    except (ValueError, IndexError):
        rate = 0.0
    if _host.fault("fabric-degraded"):
        rate = min(rate, float(_host.fault_params("fabric-degraded").get("gbps", DEGRADED_GBPS)))
    return rate


def _gid(hca: str, index: int) -> tuple[str, str]:
    port = _fabric.port_dir(hca)
    gid = _host.read_first_line(os.path.join(port, "gids", str(index)), _fabric.ZERO_GID)
    gtype = _host.read_first_line(os.path.join(port, "gid_attrs", "types", str(index)))
    return gid, gtype


def _header(title: str, a: Args, lat: bool) -> str:
    rows = [DASH, f"                    RDMA_Write {title} Test",
            f" Dual-port       : OFF\t\tDevice         : {a.dev}",
            " Number of qps   : 1\t\tTransport type : IB",
            " Connection type : RC\t\tUsing SRQ      : OFF",
            " PCIe relax order: ON", " ibv_wr* API     : ON",
            f" TX depth        : {1 if lat else 128}"]
    if not lat:
        rows.append(" CQ Moderation   : 1")
    rows += [" Mtu             : 4096[B]", " Link type       : Ethernet", f" GID index       : {a.gid}",
             f" Max inline data : {220 if lat else 0}[B]", " rdma_cm QPs\t : OFF",
             " Data ex. method : Ethernet", DASH]
    return "\n".join(rows) + "\n"


def _address(tag: str, seed: int, gid: str) -> str:
    qpn, psn = 0x100 + seed % 64, (seed * 2654435761) & 0xFFFFFF
    return (f" {tag} address: LID 0000 QPN {qpn:#06x} PSN {psn:#08x} RKey 0x1fffbd "
            f"VAddr 0x007f{(seed * 7919) & 0xFFFFFFFF:08x}00\n GID: {_gid_bytes(gid)}\n")


def _jitter(key: str) -> float:
    return 1.0 + ((zlib.crc32(key.encode()) % 1000) / 1000.0 - 0.5) * 0.01


def _bw_line(a: Args, gbps: float, key: str) -> str:
    avg = gbps * 0.985 * a.size / (a.size + 256) * _jitter(key)
    peak = avg * 1.002
    mpps = avg * 1e9 / 8 / max(1, a.size) / 1e6
    unit = 1.0 if a.gbits else 1e9 / 8 / 1048576          # Gb/s, or MiB/s without --report_gbits
    return (f" {a.size:<10} {a.iters:<10}       {peak * unit:<7.2f}            {avg * unit:<7.2f}  "
            f"\t\t   {mpps:.6f}\n")


def _lat_line(a: Args, gbps: float, degraded: bool, key: str) -> str:
    t = (1.62 + a.size * 8 / max(1.0, gbps * 1e3) + (3.0 if degraded else 0.0)) * _jitter(key)
    return (f" {a.size:<7} {a.iters:<10}    {t * 0.97:<7.2f}        {t * 3.3:<7.2f}      {t:<7.2f}"
            f"            {t * 1.01:<7.2f}          {0.05:<5.2f}           {t * 1.1:<7.2f}"
            f"                 {t * 3.3:<7.2f}\n")


def _exchange(sock: socket.socket, reader: BinaryIO, mine: str) -> str:
    """Send one line, read the peer's one line (buffered: what follows it stays in `reader`)."""
    sock.sendall(mine.encode() + b"\n")
    line = reader.readline(4096)
    if not line.endswith(b"\n"):
        raise ConnectionError("peer closed")
    return line.decode().strip()


def main_for(lat: bool, argv: list[str] | None = None) -> int:
    a = Args(sys.argv[1:] if argv is None else argv, lat)
    spec = _host.spec()
    out = sys.stdout
    if a.dev not in spec["hcas"]:
        _host.err(" Unable to find the Infiniband/RoCE device")
        return 1
    if not _fabric.port_up(a.dev):
        _host.err(" Port number 1 state is Down\n Couldn't set the link layer\n"
                  " Couldn't get context for the device")
        return 1
    gid, gtype = _gid(a.dev, a.gid)
    rate = _rate_gbps(a.dev)
    mine = f"{gid} {gtype.replace(' ', '_') or '-'} {rate:g} {int(_host.fault('fabric-degraded'))}"
    title = "Latency" if lat else "BW"
    if a.server is None:
        lsock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        lsock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            lsock.bind((spec["fabric_ip"], a.port))
            lsock.listen(1)
        except OSError:
            _host.err(f"Couldn't listen to port {a.port}")
            return 1
        out.write(BANNER)
        out.flush()
        conn, _ = lsock.accept()
        lsock.close()
    else:
        conn = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        try:
            conn.connect((a.server, a.port))
        except OSError:
            _host.err(f"Couldn't connect to {a.server}:{a.port}\n"
                      "Unable to open file descriptor for socket connection Unable to init the socket "
                      "connection")
            return 1
    with conn:
        try:
            reader = conn.makefile("rb")
            peer = _exchange(conn, reader, mine).split()
            payload = min(a.size, 1 << 20)                   # one message over the link, then an ack
            if a.server is not None:
                conn.sendall(b"\0" * payload)
                if reader.readline(64) != b"done\n":
                    raise ConnectionError("peer closed")
            else:
                if len(reader.read(payload)) != payload:
                    raise ConnectionError("peer closed")
                conn.sendall(b"done\n")
            peer_gid, peer_type, peer_rate, peer_degraded = peer[0], peer[1], float(peer[2]), peer[3] == "1"
        except (OSError, ValueError, IndexError):
            _host.err(" Failed to exchange data between server and clients")
            return 1
        out.write(_header(title, a, lat))
        seed = spec["rank"] * 31 + a.port
        out.write(_address("local", seed, gid))
        out.write(_address("remote", seed + 17, peer_gid))
        out.write(DASH + "\n")
        out.write((LAT_HEAD if lat else BW_HEAD) + "\n")
        out.flush()
        if gtype != "RoCE v2" or peer_type != "RoCE_v2":
            if a.server is not None:
                fn = "run_iter_lat_write" if lat else "run_iter_bw"
                _host.err(" Completion with error at client\n Failed status 12: wr_id 0 syndrom 0x81\n"
                          f"scnt=128, ccnt=0\n Failed to complete {fn} function successfully")
            else:
                _host.err(" Failed to exchange data between server and clients")
            return 1
        gbps = min(rate, peer_rate)
        key = f"{min(a.server or spec['fabric_ip'], spec['fabric_ip'])}-{a.size}"
        degraded = peer_degraded or _host.fault("fabric-degraded")
        if lat:
            if a.server is not None:
                out.write(_lat_line(a, gbps, degraded, key))
        else:
            out.write(_bw_line(a, gbps, key))
        out.write(DASH + "\n")
        out.flush()
    return 0
