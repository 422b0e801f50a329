"""The ib_write_bw / ib_write_lat stand-ins print perftest's real report layout (the header lines of real
perftest output, byte for byte), really connect over TCP on the fabric IP, and a peer that never answers
is a real timeout (the caller's `timeout` ends it, exit 124)."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from pathlib import Path

from simcluster import SimCluster

from cockpit.recipe.fabric import parse_bw, parse_lat

SAMPLES = Path(__file__).resolve().parents[1] / "fixtures" / "samples" / "perftest"


def tool(cluster: SimCluster, rank: int, name: str, *args: str, deadline: int = 20
         ) -> subprocess.Popen[str]:
    env = dict(os.environ, R37_SIM_ROOT=str(cluster.root(rank)))
    code = f"import sys; from cockpit.sim.tools.{name} import main; sys.exit(main())"
    return subprocess.Popen(["timeout", str(deadline), sys.executable, "-c", code, *args], env=env, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_banner(proc: subprocess.Popen[str]) -> str:
    assert proc.stdout is not None
    seen = ""
    while "Waiting for client to connect" not in seen:
        line = proc.stdout.readline()
        assert line, f"the server ended: {seen}"
        seen += line
    return seen


def test_bw_and_lat_print_the_real_layout(demo_cluster: SimCluster) -> None:
    cfg = demo_cluster.config
    port = str(free_port())
    for name, parse, sample in (("ib_write_bw", parse_bw, "ib_write_bw.txt"),
                                ("ib_write_lat", parse_lat, "ib_write_lat.txt")):
        common = ["-d", "rocep1s0f0", "-x", "3", "-p", port, "-s", "4096", "-F"]
        if name == "ib_write_bw":
            common.append("--report_gbits")
        server = tool(demo_cluster, 0, name, *common)
        wait_banner(server)
        client = tool(demo_cluster, 1, name, *common, cfg.host(0).fabric_ip)
        out, err = client.communicate(timeout=30)
        server.communicate(timeout=30)
        assert client.returncode == 0, err
        real_header = next(ln for ln in (SAMPLES / sample).read_text().splitlines() if "#bytes" in ln)
        assert real_header in out.splitlines()
        row = parse(out)
        assert row is not None and row.size == 4096
        assert " GID: 00:00:00:00:00:00:00:00:00:00:255:255:" in out and "GID index       : 3" in out


def test_no_server_is_couldnt_connect(demo_cluster: SimCluster) -> None:
    cfg = demo_cluster.config
    port = free_port()
    client = tool(demo_cluster, 1, "ib_write_bw", "-d", "rocep1s0f0", "-x", "3", "-p", str(port),
                  cfg.host(0).fabric_ip)
    _, err = client.communicate(timeout=30)
    assert client.returncode == 1
    assert f"Couldn't connect to {cfg.host(0).fabric_ip}:{port}" in err


def test_a_peer_that_never_answers_is_a_real_timeout(demo_cluster: SimCluster) -> None:
    with socket.socket() as silent:           # accepts TCP, never speaks: a hung perftest server
        silent.bind(("127.0.0.1", 0))
        silent.listen()
        port = silent.getsockname()[1]
        t0 = time.monotonic()
        client = tool(demo_cluster, 1, "ib_write_bw", "-d", "rocep1s0f0", "-x", "3", "-p", str(port),
                      "127.0.0.1", deadline=2)
        client.communicate(timeout=30)
    assert client.returncode == 124 and time.monotonic() - t0 >= 1.5
