"""Faults on the lab (real OpenSSH sshd in network namespaces): the management link to one host goes down
during preflight, a setup job, the boot of a launch, a log follow and a streamed chat through the tunnel;
sshd is killed and restarted on one host; a host accepts TCP but never says a word of SSH.

Each time that host is marked (lost / unreachable / unknown, with the reason), the other hosts keep
working, nothing is launched twice, and it recovers once the link is back. Only the management veth is
taken down (`ip link set … down` on the root namespace's end, as a pulled cable would): the fabric stays, so
the engine keeps serving while the cockpit cannot see the host. One launched cluster serves the log and chat
tests; the module stops and archives it at the end (the next lab tests start from no container).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import re
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from simcluster import SimCluster, prepare_hosts

from cockpit.api import ChatSession, ChatSettings, ContentDelta, Finished, ReasoningDelta, StreamError
from cockpit.api.endpoint import ApiEndpoint
from cockpit.api.stream import StreamDeadlines
from cockpit.config import ClusterConfig, load_config
from cockpit.hosts import Fleet, HostState, HostUnavailable, Result, command
from cockpit.recipe import launch as L
from cockpit.recipe.checks import Verdict
from cockpit.recipe.ledger import Ledger
from cockpit.recipe.preflight import preflight_results
from cockpit.recipe.replace import execute_replace, plan_replace
from cockpit.recipe.setup import SetupRun, plan_setup
from cockpit.recipe.setup_model import RankDone, RankState
from cockpit.recipe.stop import execute_stop, plan_stop
from cockpit.sim.cluster import Manifest
from cockpit.sim.lab import LabNames
from cockpit.telemetry.logfollow import FollowEvent, follow
from cockpit.telemetry.logline import LogLine

pytestmark = pytest.mark.lab

LOST_WITHIN = 12.0        # keepalive 2 s x 3, plus one reconnect attempt
BACK_WITHIN = 40.0        # reconnect backoff is at most 8 s
TICKER = "r37-faults-ticker"


# --- the lab's plumbing --------------------------------------------------------------------------------

@dataclass
class Lab:
    sim: SimCluster
    names: LabNames
    manifest: Manifest
    tickers: list[str] = field(default_factory=list)

    @property
    def cfg(self) -> ClusterConfig:
        return self.sim.config

    def mgmt_ip(self, rank: int) -> str:
        return str(self.manifest.extra["mgmt_ips"][rank])  # type: ignore[index]

    def link(self, rank: int, up: bool) -> None:
        """The management link of host `rank` (root-namespace end of its veth) up or down."""
        subprocess.run(["ip", "link", "set", "dev", self.names.mgmt_veth(rank), "up" if up else "down"],
                       check=True, capture_output=True)

    @contextlib.contextmanager
    def link_down(self, rank: int) -> Iterator[None]:
        self.link(rank, False)
        try:
            yield
        finally:
            self.link(rank, True)


def _lab(sim: SimCluster) -> Lab:
    manifest = Manifest.load(sim.dir)
    assert manifest is not None and manifest.kind == "lab"
    return Lab(sim, LabNames(str(manifest.extra["lab_id"]), len(manifest.netns)), manifest)


async def _until(pred: Callable[[], bool], timeout: float, what: str | Callable[[], str],
                 every: float = 0.1) -> float:
    t0 = time.monotonic()
    while not pred():
        assert time.monotonic() - t0 < timeout, \
            f"not within {timeout:g} s: {what if isinstance(what, str) else what()}"
        await asyncio.sleep(every)
    return time.monotonic() - t0


async def _ok(res: Awaitable[Result]) -> Result:
    r = await res
    assert r.ok, (r.command, r.stdout, r.stderr)
    return r


async def _prepare(lab: Lab) -> None:
    async with Fleet(lab.cfg) as fleet:
        assert await fleet.wait_connected(30)
        done = await fleet.run_all(command(["test", "-s", "cluster.env"], cwd=lab.cfg.recipe_dir(0)))
        if not all(isinstance(r, Result) and r.ok for r in done.values()):
            await prepare_hosts(fleet, lab.cfg)


async def _clear(lab: Lab) -> None:
    """Stop what this module's cockpit started, archive and remove it; remove the ticker containers."""
    cfg = lab.cfg
    async with Fleet(cfg) as fleet:
        assert await fleet.wait_connected(60)
        ledger = Ledger(cfg)
        await execute_stop(fleet, await plan_stop(fleet, cfg, ledger), ledger, force=True)
        await execute_replace(fleet, cfg, await plan_replace(fleet, cfg, ledger), ledger)
        for name in lab.tickers:
            await fleet.run_all(command(["docker", "rm", "-f", name]))


@pytest.fixture(scope="module")
def lab(lab_cluster: SimCluster, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Lab]:
    """The shared lab, prepared for a launch, with a launch ledger of this module's own."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("XDG_STATE_HOME", str(tmp_path_factory.mktemp("faults-state")))
        lab = _lab(lab_cluster)
        asyncio.run(_prepare(lab))
        try:
            yield lab
        finally:
            for rank in lab.cfg.ranks:
                lab.link(rank, True)
            asyncio.run(_clear(lab))


# --- a host that accepts TCP and never speaks SSH -------------------------------------------------------

SILENT = ("import socket, sys; s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1);"
          " s.bind((sys.argv[1], int(sys.argv[2]))); s.listen(); print('ready', flush=True); held = []\n"
          "while True: held.append(s.accept()[0])")


GAVE_UP = ("timeout", "unreachable")      # a host state that says the connection attempt was given up on
ANSWER_WITHIN_3S = re.compile(r"no (SSH )?answer within 3 s")


def _with_port(toml: str, rank: int, port: int, connect_timeout: float) -> str:
    """cluster.toml with host `rank` on another port and a short [ssh] connect_timeout."""
    head, *blocks = toml.split("[[hosts]]")
    head = head.replace("[ssh]\n", f"[ssh]\nconnect_timeout = {connect_timeout:g}\n", 1)
    for i, block in enumerate(blocks):
        if re.search(rf"^rank = {rank}$", block, re.M):
            blocks[i] = re.sub(r"^port = \d+$", f"port = {port}", block, count=1, flags=re.M)
    return "[[hosts]]".join([head, *blocks])


def test_silent_tcp_listener_is_a_timeout_not_a_hang(lab: Lab, tmp_path: Path) -> None:
    port = 2222
    listener = subprocess.Popen(["ip", "netns", "exec", lab.names.netns(3), sys.executable, "-c", SILENT,
                                 lab.mgmt_ip(3), str(port)], stdout=subprocess.PIPE, text=True)
    try:
        assert listener.stdout is not None and listener.stdout.readline().strip() == "ready"
        toml = tmp_path / "cluster.toml"
        toml.write_text(_with_port(lab.sim.config_path.read_text(), 3, port, 3))
        cfg = load_config(toml)
        assert (cfg.hosts[3].port, cfg.ssh.connect_timeout) == (port, 3)

        async def fleet_view() -> None:
            async with Fleet(cfg) as fleet:
                assert await fleet.wait_connected(2) is False
                await _until(lambda: all(fleet[r].status.connected for r in (0, 1, 2)), 15, "others up")
                await _until(lambda: fleet[3].status.state.value in GAVE_UP, 10, "rank 3 timed out")
                assert ANSWER_WITHIN_3S.search(fleet[3].status.error or ""), fleet[3].status
                assert (await fleet[1].run(["hostname"])).stdout.strip() == "spark-1"
                with pytest.raises(HostUnavailable):
                    await fleet[3].run(["true"])

        asyncio.run(asyncio.wait_for(fleet_view(), 60))
        res = subprocess.run([sys.executable, "-m", "cockpit", "--config", str(toml), "hosts", "--json"],
                             capture_output=True, text=True, timeout=60)
        assert res.returncode == 1, res.stdout + res.stderr
        data = json.loads(res.stdout)
        assert data["connected"] == 3
        assert data["hosts"][3]["state"] in GAVE_UP and ANSWER_WITHIN_3S.search(data["hosts"][3]["error"])
    finally:
        listener.kill()
        listener.wait()


# --- preflight ------------------------------------------------------------------------------------------

def test_link_down_during_preflight_fails_only_that_host_then_passes(lab: Lab) -> None:
    async def scenario() -> None:
        async with Fleet(lab.cfg) as fleet:
            assert await fleet.wait_connected(30)
            with lab.link_down(2):   # connected when preflight starts; its commands get no answer
                final = await preflight_results(fleet, lab.cfg, connect_timeout=4)
                assert fleet[2].status.state in (HostState.LOST, HostState.UNREACHABLE)
            by = {(r.check, r.rank): r for r in final.results}
            # what rank 2 itself would have answered is unknown; its fabric IP is still reached by the others
            # (only its management link is down)
            mine = [r for r in final.results if r.rank == 2 and r.check not in ("ssh", "reach")]
            assert mine and all(r.verdict is Verdict.UNKNOWN for r in mine), \
                [(r.check, r.verdict, r.value) for r in mine if r.verdict is not Verdict.UNKNOWN]
            assert by[("reach", 2)].verdict is Verdict.PASS
            assert any("no answer" in r.value or "not reachable" in r.value for r in mine)
            for rank in (0, 1, 3):
                assert by[("ssh", rank)].verdict is Verdict.PASS
                assert by[("docker", rank)].verdict is Verdict.PASS, by[("docker", rank)]
            assert await fleet[2].wait_connected(BACK_WITHIN)
            again = await preflight_results(fleet, lab.cfg, connect_timeout=4)
            verdicts = {(r.check, r.rank): r.verdict for r in again.results}
            assert verdicts[("ssh", 2)] is Verdict.PASS and verdicts[("docker", 2)] is Verdict.PASS
            assert Verdict.UNKNOWN not in verdicts.values(), \
                [(r.check, r.rank, r.value) for r in again.results if r.verdict is Verdict.UNKNOWN]

    asyncio.run(asyncio.wait_for(scenario(), 120))


# --- a setup job ----------------------------------------------------------------------------------------

async def _run_setup(fleet: Fleet, cfg: ClusterConfig, ranks: list[int],
                     during: Callable[[], None] | None = None) -> dict[int, RankDone]:
    plan = await plan_setup(fleet, cfg, ["recipe"], ranks=ranks)
    if during is not None:
        during()
    outcomes: dict[int, RankDone] = {}
    async for ev in SetupRun(fleet, plan).events():
        if isinstance(ev, RankDone):
            outcomes[ev.rank] = ev
    return outcomes


def test_link_down_during_a_setup_job_fails_that_rank_only_then_reruns(lab: Lab) -> None:
    cfg = lab.cfg
    script = "launch/node.sh"

    async def scenario() -> None:
        async with Fleet(cfg) as fleet:
            assert await fleet.wait_connected(30)
            originals = {r: (await _ok(fleet[r].run(command(["cat", script], cwd=cfg.recipe_dir(r))))).stdout
                         for r in (1, 2)}
            for r in (1, 2):   # the recipe job has something to do on ranks 1 and 2
                await _ok(fleet[r].run(command(["rm", "-f", script], cwd=cfg.recipe_dir(r))))
            try:
                done = await _run_setup(fleet, cfg, [1, 2], during=lambda: lab.link(2, False))
            finally:
                lab.link(2, True)
            assert done[1].state is RankState.DONE, done[1]
            assert done[2].state is RankState.FAILED, done[2]
            assert re.search(r"lost|not connected|no answer|connection", done[2].message, re.I), done[2]
            assert fleet[2].status.state is not HostState.CONNECTED or await fleet[2].wait_connected(1)
            assert await fleet[2].wait_connected(BACK_WITHIN)
            again = await _run_setup(fleet, cfg, [2])   # the operator re-runs the rank that failed
            assert again[2].state is RankState.DONE, again[2]
            for r in (1, 2):
                now = await _ok(fleet[r].run(command(["cat", script], cwd=cfg.recipe_dir(r))))
                assert now.stdout == originals[r]

    asyncio.run(asyncio.wait_for(scenario(), 150))


# --- launch (shared by the log and chat tests) ----------------------------------------------------------

@dataclass
class Launched:
    lost_seen: bool
    others_booting: bool
    verdict: str
    containers: dict[int, list[str]]
    ledger: dict[int, str]


async def _container_ids(fleet: Fleet, name: str) -> dict[int, list[str]]:
    res = await fleet.run_all(command(["docker", "ps", "-a", "--no-trunc", "--filter", f"name={name}",
                                       "--format", "{{.ID}} {{.Names}}"]))
    out: dict[int, list[str]] = {}
    for rank, r in res.items():
        assert isinstance(r, Result) and r.ok, r
        out[rank] = [ln.split()[0] for ln in r.stdout.splitlines() if ln.split()[1:] == [name]]
    return out


async def _launch_with_a_link_down(lab: Lab) -> Launched:
    cfg = lab.cfg
    name = cfg.cluster.container_name
    async with Fleet(cfg) as fleet:
        assert await fleet.wait_connected(30)
        assert all(not ids for ids in (await _container_ids(fleet, name)).values()), "a container is left"
        launcher = L.Launcher(fleet, cfg, poll_interval=0.5)
        try:
            assert await launcher.launch()
            with lab.link_down(1):   # rank 1 boots on; the cockpit loses sight of it
                lost = await launcher.run_until(lambda t: t[1].host_lost_since is not None, LOST_WITHIN + 5)
                others = all(fleet[r].status.connected for r in (0, 2, 3))
            ready = await launcher.run_until(lambda t: t.compute_verdict().state == "ready", 240)
            verdict = launcher.timeline.compute_verdict().state
            assert ready, (verdict, [launcher.timeline[r].condition for r in cfg.ranks])
        finally:
            await launcher.close()
        containers = await _container_ids(fleet, name)
    records = Ledger(cfg).records()
    return Launched(lost, others, verdict, containers, {r: rec.container_id for r, rec in records.items()})


@pytest.fixture(scope="module")
def launched(lab: Lab) -> Launched:
    return asyncio.run(asyncio.wait_for(_launch_with_a_link_down(lab), 360))


def test_link_down_during_boot_marks_the_rank_and_launches_nothing_twice(launched: Launched) -> None:
    assert launched.lost_seen, "the boot timeline never marked rank 1's host lost"
    assert launched.others_booting
    assert launched.verdict == "ready"
    assert all(len(ids) == 1 for ids in launched.containers.values()), launched.containers
    assert sorted(launched.ledger) == sorted(launched.containers)
    assert all(launched.ledger[r].startswith(ids[0]) for r, ids in launched.containers.items())


# --- log follow -----------------------------------------------------------------------------------------

async def _start_tickers(fleet: Fleet, cfg: ClusterConfig, name: str) -> None:
    loop = "i=0; while :; do i=$((i+1)); echo \"tick $i\"; sleep 0.05; done"
    await fleet.run_all(command(["docker", "rm", "-f", name]))
    res = await fleet.run_all(command(["docker", "run", "-d", "--name", name, "--entrypoint", "sh",
                                       cfg.runtime.image_tag, "-c", loop]))
    assert all(isinstance(r, Result) and r.ok for r in res.values()), res


def test_link_down_during_a_log_follow_resumes_without_duplicates(lab: Lab, launched: Launched) -> None:
    cfg = lab.cfg
    name = f"{TICKER}-{uuid.uuid4().hex[:6]}"
    lab.tickers.append(name)

    async def scenario() -> None:
        async with Fleet(cfg) as fleet:
            assert await fleet.wait_connected(30)
            await _start_tickers(fleet, cfg, name)
            ticks: dict[int, list[int]] = {r: [] for r in cfg.ranks}
            events: dict[int, list[str]] = {r: [] for r in cfg.ranks}

            async def one(rank: int) -> None:
                async for item in follow(fleet[rank], name, reconnect_timeout=BACK_WITHIN):
                    if isinstance(item, LogLine):
                        ticks[rank].append(int(item.text.split()[1]))
                    elif isinstance(item, FollowEvent):
                        events[rank].append(item.state)

            tasks = [asyncio.create_task(one(r)) for r in cfg.ranks]
            try:
                await _until(lambda: all(len(t) >= 10 for t in ticks.values()), 30,
                             lambda: f"every rank followed: {events}, {[len(t) for t in ticks.values()]}")
                with lab.link_down(2):
                    await _until(lambda: "lost" in events[2], LOST_WITHIN + 5, "rank 2's follow lost")
                    during = {r: len(ticks[r]) for r in cfg.ranks}
                    await asyncio.sleep(1.5)
                    assert all(len(ticks[r]) > during[r] for r in (0, 1, 3)), "the other ranks stalled"
                    stalled = len(ticks[2])
                await _until(lambda: "resumed" in events[2], BACK_WITHIN, "rank 2's follow resumed")
                await _until(lambda: len(ticks[2]) > stalled + 20, 20, "rank 2's lines after resuming")
            finally:
                for t in tasks:
                    t.cancel()
                ended = await asyncio.gather(*tasks, return_exceptions=True)
            assert not [e for e in ended if not isinstance(e, asyncio.CancelledError | type(None))], ended
            got = ticks[2]
            assert len(got) == len(set(got)), "a line came twice after resuming"
            assert got == list(range(got[0], got[0] + len(got))), "lines were lost or reordered"
            assert events[2][:1] == ["following"] and "lost" in events[2]

    asyncio.run(asyncio.wait_for(scenario(), 150))


# --- a streamed chat through the tunnel -----------------------------------------------------------------

def _request(max_tokens: int, thinking: bool) -> object:
    session = ChatSession(ChatSettings(thinking=thinking, max_tokens=max_tokens))
    session.add_user("Count slowly from one to one thousand, one number per line.")
    return session.request()


def test_link_down_during_a_streamed_chat_ends_it_and_a_new_chat_works(lab: Lab, launched: Launched) -> None:
    cfg = lab.cfg

    async def scenario() -> None:
        async with Fleet(cfg) as fleet:
            assert await fleet.wait_connected(30)
            deadlines = StreamDeadlines.both(5)
            async with ApiEndpoint(fleet, cfg.cluster.api_port, deadlines=deadlines) as endpoint:
                status = await endpoint.wait_ready(60)
                assert status.ok, status
                client = await endpoint.client()
                got: list[object] = []
                ended: StreamError | Finished | None = None
                try:
                    async with client.chat_stream(_request(4000, True)) as stream:  # type: ignore[arg-type]
                        async for ev in stream:
                            if isinstance(ev, ContentDelta | ReasoningDelta):
                                got.append(ev)
                                if len(got) == 3:
                                    lab.link(0, False)
                            elif isinstance(ev, StreamError | Finished):
                                ended = ev
                    assert isinstance(ended, StreamError), ended
                    assert ended.kind in ("idle_timeout", "unreachable", "timeout", "protocol_error"), ended
                    await _until(lambda: not fleet[0].status.connected, LOST_WITHIN, "rank 0 marked lost")
                    assert fleet[0].status.state is HostState.LOST
                    assert all(fleet[r].status.connected for r in (1, 2, 3))
                    assert (await endpoint.check()).state == "tunnel_down"
                finally:
                    lab.link(0, True)
                assert await fleet[0].wait_connected(BACK_WITHIN)
                status = await endpoint.wait_ready(30)
                assert status.ok, status
                client = await endpoint.client()
                async with client.chat_stream(_request(16, False)) as stream:  # type: ignore[arg-type]
                    finals = [ev async for ev in stream if isinstance(ev, Finished | StreamError)]
                assert len(finals) == 1 and isinstance(finals[0], Finished), finals
                assert finals[0].result.content

    asyncio.run(asyncio.wait_for(scenario(), 150))


# --- sshd killed and restarted --------------------------------------------------------------------------

def _sshd_pids(ns: str) -> list[int]:
    out = subprocess.run(["ip", "netns", "pids", ns], capture_output=True, text=True).stdout.split()
    pids = []
    for pid in map(int, out):
        with contextlib.suppress(OSError):
            if Path(f"/proc/{pid}/comm").read_text().strip() == "sshd":
                pids.append(pid)
    return pids


def _host_process(ns: str, sshd: int) -> int:
    """A container's process on the host: it outlives sshd (a command's shell would die with its session),
    keeps the host's mount namespace (its /srv) alive while sshd is gone, and the new sshd joins its
    namespaces."""
    mnt = os.readlink(f"/proc/{sshd}/ns/mnt")
    out = subprocess.run(["ip", "netns", "pids", ns], capture_output=True, text=True).stdout.split()
    for pid in map(int, out):
        with contextlib.suppress(OSError):
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
            if b"cockpit.sim.container" in cmdline and os.readlink(f"/proc/{pid}/ns/mnt") == mnt:
                return pid
    raise AssertionError(f"no container process of the host's own in {ns}")


def test_sshd_killed_and_restarted_reconnects(lab: Lab, launched: Launched) -> None:
    """Every sshd process of host 1 is SIGKILLed (its containers live on), then sshd is started again in
    the host's namespaces: the cockpit shows the host lost (connection refused), then connected."""
    cfg = lab.cfg
    rank = 1
    ns = lab.names.netns(rank)
    config = lab.sim.dir / "lab" / f"sshd_config-{rank}"

    async def scenario() -> None:
        async with Fleet(cfg) as fleet:
            assert await fleet.wait_connected(30)
            shim = _host_process(ns, int(lab.manifest.extra["sshd_pids"][rank]))  # type: ignore[index]
            for pid in _sshd_pids(ns):
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
            await _until(lambda: fleet[rank].status.state is HostState.LOST, LOST_WITHIN, "rank 1 lost")
            await _until(lambda: "refused" in (fleet[rank].status.error or ""), 15, "refused")
            assert all(fleet[r].status.connected for r in (0, 2, 3))
            with open(lab.sim.dir / "lab" / f"sshd-{rank}.log", "ab") as log:
                subprocess.Popen(["nsenter", f"--target={shim}", "--mount", "--uts", "--net", "--",
                                  "/usr/sbin/sshd", "-D", "-e", "-f", str(config)],
                                 stdin=subprocess.DEVNULL, stdout=log, stderr=log, start_new_session=True)
            assert await fleet[rank].wait_connected(BACK_WITHIN)
            assert (await fleet[rank].run(["hostname"])).stdout.strip() == "spark-1"
            ids = await _container_ids(fleet, cfg.cluster.container_name)
            assert ids == launched.containers, "the engine's containers changed"

    asyncio.run(asyncio.wait_for(scenario(), 120))
