"""Command output on the demo cluster: bad UTF-8 and floods never drop the connection nor grow memory;
the tunnel listens on 127.0.0.1 only; a host that accepts TCP and says nothing times out."""

from __future__ import annotations

import asyncio
import contextlib
import time
from pathlib import Path

from cockpit.hosts import Fleet, Host, HostState, command
from cockpit.hosts.host import describe_connect_error
from cockpit.hosts.output import LINE_CUT, MAX_LINE, MAX_OUTPUT


async def test_invalid_utf8_keeps_the_connection_and_a_concurrent_stream(demo_cluster) -> None:
    async with Fleet(demo_cluster.config) as fleet:
        assert await fleet.wait_connected(15)
        host = fleet[0]
        conn = host._conn
        stream = host.stream(command(["sh", "-c", "i=0; while [ $i -lt 40 ]; do echo tick$i; i=$((i+1)); "
                                                  "sleep 0.05; done"]))
        first = await anext(stream)
        res = await host.run(["sh", "-c", r"printf 'caf\351\n'; printf 'err\377\n' >&2"])
        assert res.ok and res.stdout == "caf\ufffd\n" and res.stderr == "err\ufffd\n"
        rest = [line async for line in stream]
        assert [first, *rest] == [f"tick{i}" for i in range(40)], "the stream was interrupted"
        assert host._conn is conn and host.status.state is HostState.CONNECTED
        lines = [line async for line in host.stream(["sh", "-c", r"printf 'na\357ve\nok\n'"])]
        assert lines == ["na\ufffdve", "ok"]
        assert (await host.run(["echo", "still"])).stdout == "still\n"


async def test_a_flood_is_truncated_and_the_host_stays_connected(demo_cluster) -> None:
    async with Fleet(demo_cluster.config) as fleet:
        assert await fleet.wait_connected(15)
        host = fleet[1]
        res = await host.run(["sh", "-c", "head -c 50000000 /dev/zero | tr '\\0' x; echo done >&2"],
                             timeout=120)
        assert res.ok and res.truncated
        dropped = 50_000_000 - MAX_OUTPUT
        assert res.stdout == "x" * MAX_OUTPUT + f"\n… [truncated: {dropped} bytes not shown]\n"
        assert res.stderr == "done\n"
        small = await host.run(["sh", "-c", "seq 1 100000"], max_output=1000)
        assert small.truncated and small.stdout.startswith("1\n2\n") and "[truncated: " in small.stdout
        assert len(small.stdout) < 1100
        assert host.status.state is HostState.CONNECTED
        exact = await host.run(["echo", "abc"], max_output=4)
        assert exact.stdout == "abc\n" and not exact.truncated


async def test_an_endless_line_streams_bounded_lines(demo_cluster) -> None:
    async with Fleet(demo_cluster.config) as fleet:
        assert await fleet.wait_connected(15)
        host = fleet[2]
        lines = [line async for line in host.stream(
            ["sh", "-c", "head -c 300000 /dev/zero | tr '\\0' y; echo; echo after"])]
        assert lines == ["y" * MAX_LINE + LINE_CUT.format(n=MAX_LINE), "after"]
        endless = host.stream(["sh", "-c", "tr '\\0' z < /dev/zero"], max_line=1000)
        first = await anext(endless)
        await endless.aclose()
        assert first == "z" * 1000 + LINE_CUT.format(n=1000)
        assert (await host.run(["echo", "ok"])).stdout == "ok\n"


def _listening(port: int) -> set[str]:
    """Addresses (hex, as /proc/net shows them) with a TCP socket listening on `port`."""
    found = set()
    for name in ("tcp", "tcp6"):
        with contextlib.suppress(FileNotFoundError):
            for row in Path(f"/proc/net/{name}").read_text().splitlines()[1:]:
                local, state = row.split()[1], row.split()[3]
                addr, hexport = local.rsplit(":", 1)
                if state == "0A" and int(hexport, 16) == port:
                    found.add(addr)
    return found


async def test_the_tunnel_listens_on_loopback_only(demo_cluster) -> None:
    async with Fleet(demo_cluster.config) as fleet:
        assert await fleet.wait_connected(15)
        local = await fleet[0].forward_local("127.0.0.1", 9)
        assert _listening(local) == {"0100007F"}  # 127.0.0.1, and no other address, v4 or v6


async def test_a_host_that_never_speaks_ssh_times_out(demo_cluster, tmp_path) -> None:
    async def silent(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.read()  # accept, say nothing
        writer.close()

    server = await asyncio.start_server(silent, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    cfg = demo_cluster.config
    known = tmp_path / "known_hosts"
    known.write_text((demo_cluster.dir / "known_hosts").read_text())
    entry = cfg.hosts[0].model_copy(update={"ssh": "127.0.0.1", "port": port})
    ssh = cfg.ssh.model_copy(update={"connect_timeout": 1.0, "known_hosts": str(known)})
    host = Host(entry, ssh)
    try:
        host.start()
        t0 = time.monotonic()
        while host.status.state is HostState.CONNECTING and time.monotonic() - t0 < 15:
            await asyncio.sleep(0.05)
        assert host.status.state is HostState.TIMEOUT
        assert host.status.code == "host-timeout"
        assert "never spoke SSH" in (host.status.error or "")
    finally:
        await host.close()
        server.close()
    assert "no SSH answer within 2 s" in describe_connect_error(TimeoutError(), "h", 2)
