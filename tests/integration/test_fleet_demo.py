"""The SSH fleet against the demo cluster: real asyncssh servers running real shells."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import time

import asyncssh

from cockpit.hosts import Fleet, HostState, command
from cockpit.sim.cluster import sim_processes


async def test_run_stream_and_forward(demo_cluster) -> None:
    async with Fleet(demo_cluster.config) as fleet:
        assert await fleet.wait_connected(15)
        assert [s.hostname for s in fleet.statuses] == [f"spark-{r}" for r in range(4)]
        res = await fleet[0].run(["sh", "-c", "echo out; echo err >&2; exit 3"])
        assert (res.exit_status, res.stdout, res.stderr) == (3, "out\n", "err\n")
        lines = [line async for line in fleet[1].stream(["sh", "-c", "for i in 1 2 3; do echo l$i; done"])]
        assert lines == ["l1", "l2", "l3"]
        results = await fleet.run_all(["uname", "-m"])
        assert {r: v.stdout.strip() for r, v in results.items()} == dict.fromkeys(range(4), "aarch64")
        assert any("uname -m" in rec.command for rec in fleet.command_log)


async def test_stream_close_stops_remote_process(demo_cluster) -> None:
    marker = f"tick-{time.monotonic_ns()}"
    async with Fleet(demo_cluster.config) as fleet:
        assert await fleet.wait_connected(15)
        stream = fleet[2].stream(command(["sh", "-c", f"while :; do echo {marker}; sleep 0.05; done"]))
        got = [await anext(stream) for _ in range(3)]
        await stream.aclose()
        assert got == [marker] * 3
        for _ in range(50):
            ps = subprocess.run(["pgrep", "-f", f"echo {marker}"], capture_output=True, text=True)
            if not ps.stdout.strip():
                break
            await asyncio.sleep(0.1)
        assert not ps.stdout.strip(), "the remote loop kept running after the stream closed"


async def test_forward_reaches_only_the_hosts_own_port(demo_cluster) -> None:
    """127.0.0.1:PORT on a demo host is that host's own address, not the admin box's loopback."""
    async with Fleet(demo_cluster.config) as fleet:
        assert await fleet.wait_connected(15)
        spec_ip = demo_cluster.config.hosts[0].fabric_ip
        server = await asyncio.start_server(lambda r, w: w.close(), spec_ip, 0)
        port = server.sockets[0].getsockname()[1]
        try:
            local = await fleet[0].forward_local("127.0.0.1", port)
            _, writer = await asyncio.open_connection("127.0.0.1", local)
            writer.close()
        finally:
            server.close()


async def test_host_down_is_lost_within_10s_and_comes_back(demo_cluster) -> None:
    async with Fleet(demo_cluster.config) as fleet:
        assert await fleet.wait_connected(15)
        demo_cluster.fault(3, "host-down")
        try:
            t0 = time.monotonic()
            while fleet[3].status.state is HostState.CONNECTED:
                await asyncio.sleep(0.1)
                assert time.monotonic() - t0 < 12, "host-down not noticed"
            lost_after = time.monotonic() - t0
            assert fleet[3].status.state is HostState.LOST
            assert all(fleet[r].status.connected for r in range(3)), "one lost host disturbed the others"
            res = await fleet[0].run(["true"])
            assert res.ok
        finally:
            demo_cluster.fault(3, "host-down", on=False)
        assert await fleet[3].wait_connected(30)
        assert lost_after <= 10.5


async def test_unknown_host_key_is_refused_with_fingerprint(demo_cluster, tmp_path) -> None:
    cfg = demo_cluster.config
    entry = cfg.hosts[0]
    wrong = asyncssh.generate_private_key("ssh-ed25519").export_public_key().decode().strip()
    known = tmp_path / "known_hosts"
    known.write_text(f"[127.0.0.1]:{entry.port} {wrong}\n")
    bad = cfg.model_copy(update={"ssh": cfg.ssh.model_copy(update={"known_hosts": str(known)}),
                                 "hosts": [entry]})
    real = asyncssh.read_private_key(str(demo_cluster.dir / "hostkeys" / "rank-0")).get_fingerprint("sha256")
    async with Fleet(bad) as fleet:
        for _ in range(100):
            if fleet[0].status.state is HostState.KEY_CHANGED:
                break
            await asyncio.sleep(0.1)
        st = fleet[0].status
        assert st.state is HostState.KEY_CHANGED
        assert st.fingerprint == real
        assert "ssh-keyscan" not in (st.remedy or "") and real in (st.remedy or "")


def cli(*args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "cockpit", *args], capture_output=True, text=True,
                          timeout=timeout)


def process_state(pid: int) -> str:
    """The state letter in /proc/PID/stat (R, S, Z, …), or "gone"."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0]
    except OSError:
        return "gone"


def test_sim_up_hosts_down_leaves_nothing(tmp_path) -> None:
    d = tmp_path / "c"
    up = cli("sim", "up", "--dir", str(d), "--json")
    assert up.returncode == 0, up.stderr
    toml = json.loads(up.stdout)["config"]
    try:
        hosts = cli("--config", toml, "hosts", "--json")
        assert hosts.returncode == 0, hosts.stdout + hosts.stderr
        data = json.loads(hosts.stdout)
        assert data["connected"] == 4
        assert {h["state"] for h in data["hosts"]} == {"connected"}
        assert all(h["fingerprint"].startswith("SHA256:") for h in data["hosts"])
        ssh = subprocess.run(["ssh", "-F", str(d / "ssh_config"), "-o", "BatchMode=yes", "spark-2",
                              "hostname"], capture_output=True, text=True, timeout=30)
        assert ssh.stdout.strip() == "spark-2", ssh.stderr
        pid = json.loads((d / "sim-cluster.json").read_text())["pids"][0]
    finally:
        down = cli("sim", "down", "--dir", str(d))
    assert down.returncode == 0, down.stderr
    time.sleep(0.2)
    assert not sim_processes(d)
    assert process_state(pid) in ("gone", "Z")  # exited; a zombie waits for PID 1, not for us
    again = cli("sim", "down", "--dir", str(d))
    assert again.returncode == 1 and "no simulated cluster" in again.stderr


def test_the_host_down_switch_holds_for_the_next_connection(demo_cluster) -> None:
    """A connection made once the switch is set is never answered, and one made once it is cleared is:
    before, the demo host read its switch every 0.3 s, so a command run at once still reached the host."""
    for _ in range(5):
        demo_cluster.fault(2, "host-down")
        try:
            silent = not demo_cluster.answers(2, wait=1.0)
        finally:
            demo_cluster.fault(2, "host-down", on=False)
        assert silent, "rank 2 answered a connection made after host-down was set"
        assert demo_cluster.answers(2), "rank 2 stayed silent after host-down was cleared"


def test_hosts_exit_nonzero_when_a_host_is_down(demo_cluster) -> None:
    demo_cluster.fault(1, "host-down")
    try:
        res = cli("--config", str(demo_cluster.config_path), "hosts", "--timeout", "4")
    finally:
        demo_cluster.fault(1, "host-down", on=False)
    assert res.returncode == 1
    assert "rank 1" in res.stdout and "remedy" in res.stdout



async def test_ciphers_follow_the_configs_preference(demo_cluster) -> None:
    """AES-GCM by default (cheaper per packet than ChaCha20); `[ssh] ciphers` is honoured as given."""
    from asyncssh.encryption import get_encryption_algs

    from cockpit.config import SSH_CIPHERS

    assert {c.encode() for c in SSH_CIPHERS} <= set(get_encryption_algs())
    cfg = demo_cluster.config
    async with Fleet(cfg) as fleet:
        assert await fleet.wait_connected(15)
        conn = fleet[0]._conn  # the negotiated cipher is only on the connection itself
        assert conn is not None and conn.get_extra_info("send_cipher") == "aes128-gcm@openssh.com"
    only_chacha = cfg.ssh.model_copy(update={"ciphers": ["chacha20-poly1305@openssh.com"]})
    chacha = cfg.model_copy(update={"ssh": only_chacha})
    async with Fleet(chacha) as fleet:
        assert await fleet.wait_connected(15)
        conn = fleet[0]._conn
        assert conn is not None and conn.get_extra_info("recv_cipher") == "chacha20-poly1305@openssh.com"
