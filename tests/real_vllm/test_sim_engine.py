"""`sim up --engine vllm`: a demo cluster whose rank 0 runs the REAL vLLM (CPU build, the tiny model) and
whose workers stay simulated, driven end to end by the cockpit's own commands over SSH: launch, status,
logs, stats, chat, then real failure modes made by signals, never by our own fault code:

- SIGSTOP of rank 0's `VLLM::EngineCore` with an answer streaming: a real hang (the API answers, the
  engine holds the request and makes no progress) → `status` says hung, with the remedy; SIGCONT → ready;
- SIGKILL of `VLLM::EngineCore`: a real engine death (0.32's API server then exits 0) → rank 0 failed
  first with the log's cause, not "stopped", not a worker blamed;
- a relaunch over the stopped containers (`launch --replace-stopped`), then `stop` with an answer
  streaming: SIGTERM through `docker stop` while a request is open (a real drain) → stopped, no failure.

One cluster for the module (two real boots: the launch and the relaunch). The tests run in order and each
leaves the cluster as the next expects; a failed step fails the ones after it too (they say so)."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from simcluster import prepare_hosts

from cockpit.api.chat import ChatRequest
from cockpit.api.client import ApiClient
from cockpit.api.errors import ApiError
from cockpit.api.liveness import read_sample
from cockpit.api.readiness import api_url_via_tunnel
from cockpit.api.stream import StreamDeadlines
from cockpit.config import load_config
from cockpit.constants import PROBE_QUERY
from cockpit.hosts import Fleet

pytestmark = pytest.mark.xdist_group("real_vllm")   # one worker (conftest.py)

SERVED = "deepseek-v4.1-flash"
WORKER_SPEED = 400.0        # the simulated workers boot in seconds; the real head takes minutes
LAUNCH_TIMEOUT_S = 1500     # a real boot on a loaded 2-core machine
VERDICT_DEADLINE_S = 120.0  # generous: the machine is loaded; the verdicts' own timing is tested elsewhere


@dataclass
class RealCluster:
    dir: Path
    config: Path
    env: dict[str, str]
    steps: dict[str, bool] = field(default_factory=dict)

    def cli(self, *args: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "cockpit", "--config", str(self.config), *args],
                              capture_output=True, text=True, timeout=timeout, env=self.env)

    def status(self) -> tuple[int, dict]:
        res = self.cli("status", "--json")
        return res.returncode, json.loads(res.stdout)

    def head_pid(self) -> int:
        """The API server: PID 1 of rank 0's running container (the shim's state.json)."""
        for cdir in (self.dir / "hosts" / "rank-0" / "docker" / "containers").iterdir():
            state = json.loads((cdir / "state.json").read_text())
            if state.get("Running"):
                return int(state["Pid"])
        raise AssertionError("rank 0 has no running container")

    def metrics_reads(self) -> int:
        """How many of the cockpit's own `GET /metrics` (marked as its probes) rank 0's running container
        has logged (vLLM's access log). The test's reads are not counted: their lines reach the log
        late, and one counted after the test took its count ended the wait before `stop` had read."""
        mark = f"GET /metrics?{PROBE_QUERY} ".encode()
        for cdir in (self.dir / "hosts" / "rank-0" / "docker" / "containers").iterdir():
            state = json.loads((cdir / "state.json").read_text())
            if state.get("Running"):
                return sum(log.read_bytes().count(mark) for log in cdir.glob("*-json.log"))
        raise AssertionError("rank 0 has no running container")

    def engine_core_pid(self) -> int:
        """`VLLM::EngineCore` in the head's process group (its title replaces its environment)."""
        leader = self.head_pid()
        for entry in Path("/proc").iterdir():
            if not entry.name.isdigit():
                continue
            try:
                title = (entry / "cmdline").read_bytes()
                if title.startswith(b"VLLM::EngineCore") and os.getpgid(int(entry.name)) == leader:
                    return int(entry.name)
            except OSError:
                continue
        raise AssertionError("no VLLM::EngineCore process under rank 0's API server")

    def need(self, *steps: str) -> None:
        missing = [s for s in steps if not self.steps.get(s)]
        if missing:
            pytest.fail(f"an earlier step of this module failed: {missing}")


def _launch_events(res: subprocess.CompletedProcess[str]) -> list[dict]:
    return [json.loads(line) for line in res.stdout.splitlines() if line.startswith("{")]


@pytest.fixture(scope="module")
def real_cluster(vllm_py: Path, tiny_model_dir: Path,
                 tmp_path_factory: pytest.TempPathFactory) -> Iterator[RealCluster]:
    from cockpit.sim.cluster import demo_up, down
    base = tmp_path_factory.mktemp("sim-vllm")
    env = {**os.environ, "R37_VLLM_PYTHON": str(vllm_py), "XDG_STATE_HOME": str(base / "state")}
    old = {k: os.environ.get(k) for k in ("R37_VLLM_PYTHON", "XDG_STATE_HOME")}
    os.environ.update({k: env[k] for k in old})
    cluster_dir = base / "cluster"
    try:
        toml = demo_up(cluster_dir, speed=WORKER_SPEED, engine="vllm")
        cluster = RealCluster(cluster_dir, toml, env)

        async def prepare() -> None:
            cfg = load_config(toml)
            async with Fleet(cfg) as fleet:
                assert await fleet.wait_connected(30)
                await prepare_hosts(fleet, cfg)
        asyncio.run(prepare())
        yield cluster
    finally:
        for k, v in old.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
        if cluster_dir.exists():
            down(cluster_dir)


def _long_request() -> ChatRequest:
    return ChatRequest([{"role": "user", "content": "a long story"}], model=SERVED, thinking=False,
                       temperature=1.0, max_tokens=1800, extra={"ignore_eos": True})


async def _until_running(client: ApiClient) -> None:
    t0 = time.monotonic()
    while not (await read_sample(client)).running:
        assert time.monotonic() - t0 < 60, "no answer ever showed as running"
        await asyncio.sleep(0.2)


class _Feeder:
    """Long answers kept streaming, six at a time and staggered, until told to stop: rank 0 is busy at any
    instant however fast the machine generates. An answer that ends here is replaced, and so is one the
    engine has finished while its last tokens are still on their way to this client: every 0.2 s the
    engine's own count (/metrics, unmarked: not one of the cockpit's probes) is topped up to six. (CI's
    machine ended one answer of 1 800 tokens before a `stop` had read rank 0's requests; with two, a quiet
    machine here once read none running between an answer's end and its successor's admission; with six
    replaced only as they ended here, CI's `stop` twice read none running.)"""

    def __init__(self, client: ApiClient) -> None:
        self.client = client
        self.tasks: list[asyncio.Task] = []
        self.feeding = True
        self.topped_up = 0                  # answers added because the engine's count fell short
        self._topper: asyncio.Task | None = None

    async def start(self, streams: int = 6) -> None:
        self._add()
        await _until_running(self.client)   # (one that ends is replaced)
        for _ in range(streams - 1):        # staggered: they never end together (fewer than --max-num-seqs)
            await asyncio.sleep(0.2)
            self._add()
        self._topper = asyncio.create_task(self._top_up(streams))

    def _add(self) -> None:
        task = asyncio.create_task(self.client.chat_streamed(_long_request()))
        task.add_done_callback(lambda t: self._add() if self.feeding and not t.cancelled()
                               and t.exception() is None else None)
        self.tasks.append(task)

    async def _top_up(self, streams: int) -> None:
        while self.feeding:
            try:
                sample = await read_sample(self.client)
            except Exception:  # the engine is stopping: nothing more to top up
                return
            for _ in range(streams - int(sample.running + sample.waiting)):
                if self.feeding:
                    self.topped_up += 1
                    self._add()
            await asyncio.sleep(0.2)

    def halt(self) -> None:
        """No new answers from now on."""
        self.feeding = False
        if self._topper is not None:
            self._topper.cancel()

    def cancel(self) -> None:
        self.halt()
        for task in self.tasks:
            task.cancel()

    async def stop(self, within_s: float) -> list:
        """No new answers; what every answer became (a result or its exception) once they have ended."""
        self.halt()
        done = await asyncio.wait_for(asyncio.gather(*self.tasks, return_exceptions=True), within_s)
        return list(done)


async def _wait_status(cluster: RealCluster, done, what: str) -> tuple[int, dict]:  # type: ignore[no-untyped-def]
    t0 = time.monotonic()
    while True:
        code, report = await asyncio.to_thread(cluster.status)
        if done(report) or time.monotonic() - t0 > VERDICT_DEADLINE_S:
            assert done(report), (what, report["verdict"], report.get("engine"))
            return code, report
        await asyncio.sleep(1.0)


def test_launch_status_logs_stats_chat_on_a_real_engine(real_cluster: RealCluster) -> None:
    res = real_cluster.cli("launch", "--yes", "--json", timeout=LAUNCH_TIMEOUT_S)
    events = _launch_events(res)
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr
    assert events[-1]["event"] == "Result" and events[-1]["state"] == "ready", events[-1]
    assert not [e for e in events if e["event"] == "RankFailed"], "a failure read during a healthy boot"
    head = [e["phase"] for e in events if e["event"] == "PhaseEntered" and e["rank"] == 0]
    # what real 0.32 prints on one CPU process: no NCCL, no CUDA graphs, no shard progress of 48
    assert head[:2] == ["launched", "container running"] and head[-2:] == ["API starting", "ready"], head
    assert {"distributed init", "loading weights", "KV cache"} <= set(head), head

    # the engine rank 0 runs is the real one, on loopback only, with the recipe's argv mapped
    record = json.loads(next((real_cluster.dir / "hosts/rank-0/docker/containers").glob("*/real-vllm.json"))
                        .read_text())
    argv = record["argv"]
    assert Path(argv[0]).name == "vllm" and argv[1] == "serve" and "sim" not in argv[0]
    assert argv[argv.index("--host") + 1].startswith("127.")
    assert "--speculative-config" not in argv and "--tensor-parallel-size" not in argv
    assert any(d.startswith("--tensor-parallel-size") for d in record["dropped"])

    code, report = real_cluster.status()
    assert code == 0 and report["verdict"]["state"] == "ready", report["verdict"]
    assert [r["condition"] for r in report["ranks"]] == ["ready"] * 4
    assert all(r["failure"] is None for r in report["ranks"])

    logs = real_cluster.cli("logs", "--rank", "0", "-n", "5000")
    assert logs.returncode == 0, logs.stderr
    assert "Starting vLLM server on http://127." in logs.stdout        # real vLLM's own line
    assert "(EngineCore pid=" in logs.stdout

    chat = real_cluster.cli("chat", "--no-thinking", "--max-tokens", "24", "--json", "hello there")
    assert chat.returncode == 0, chat.stdout + chat.stderr
    answer = json.loads(chat.stdout)
    assert answer["finish_reason"] in ("length", "stop") and answer["usage"]["completion_tokens"] > 0, answer

    stats = real_cluster.cli("stats", "--once", "--json", timeout=120)
    assert stats.returncode == 0, stats.stdout + stats.stderr
    data = json.loads(stats.stdout)
    engine = data["engine"]     # the real /metrics, read by the sampler (rates over its window)
    assert engine is not None and engine["error"] is None and not engine["stale"], engine
    assert engine["running"] == 0 and engine["waiting"] == 0 and engine["kv_cache_usage"] is not None, engine
    real_cluster.steps["ready"] = True


async def test_sigstop_engine_core_is_a_hang_and_sigcont_ends_it(real_cluster: RealCluster) -> None:
    real_cluster.need("ready")
    cfg = load_config(real_cluster.config)
    async with Fleet(cfg) as fleet:
        assert await fleet.wait_connected(30)
        url = await api_url_via_tunnel(fleet, cfg.cluster.api_port)
        async with ApiClient(url) as client:
            feeder = _Feeder(client)      # an answer streaming at the SIGSTOP, however fast the machine
            await feeder.start()
            core = real_cluster.engine_core_pid()
            for _ in range(20):
                os.kill(core, signal.SIGSTOP)
                if (await read_sample(client)).busy:   # the stopped engine holds an answer (its last stats)
                    break
                os.kill(core, signal.SIGCONT)          # stopped between two answers: again
                await _until_running(client)
            feeder.halt()
            try:
                code, report = await _wait_status(real_cluster, lambda r: r["verdict"]["state"] == "hung",
                                                  "hung after SIGSTOP")
                assert code == 1 and report["engine"] == "hung"
                assert "logs --rank 0 -n 200" in report["verdict"]["remedy"], report["verdict"]
                assert all(r["failure"] is None for r in report["ranks"]), "a hang is no rank's failure"
            finally:
                os.kill(core, signal.SIGCONT)
            code, report = await _wait_status(real_cluster, lambda r: r["verdict"]["state"] == "ready",
                                              "ready after SIGCONT")
            assert code == 0
            feeder.cancel()
    real_cluster.steps["hang"] = True


def test_sigkill_engine_core_fails_rank_0_with_the_logs_cause(real_cluster: RealCluster) -> None:
    real_cluster.need("ready")
    head = real_cluster.head_pid()
    os.kill(real_cluster.engine_core_pid(), signal.SIGKILL)
    t0 = time.monotonic()
    while Path(f"/proc/{head}").exists() and time.monotonic() - t0 < VERDICT_DEADLINE_S:
        time.sleep(0.5)          # 0.32's API server shuts down by itself (and exits 0)
    code, report = asyncio.run(_wait_status(
        real_cluster, lambda r: r["ranks"][0]["container"]["status"] == "exited", "rank 0 exited"))
    rank0 = report["ranks"][0]
    assert code == 1 and report["verdict"]["state"] == "down", report["verdict"]
    assert report["verdict"]["first_failed"] == 0, report["verdict"]
    assert rank0["condition"] == "failed", rank0
    failure = rank0["failure"]
    assert failure["label"] == "the engine core process died (the API server shuts down)", failure
    assert "engine core exited unexpectedly" in failure["cause"], failure
    assert "relaunch" in failure["remedy"]
    # the workers lost their head: followers, never the rank blamed
    assert all(r["condition"] != "failed" for r in report["ranks"][1:]), report["ranks"]
    real_cluster.steps["killed"] = True


async def _relaunch(cluster: RealCluster) -> None:
    res = await asyncio.to_thread(cluster.cli, "launch", "--yes", "--replace-stopped", "--json",
                                  timeout=LAUNCH_TIMEOUT_S)
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr
    assert _launch_events(res)[-1]["state"] == "ready"
    code, report = cluster.status()
    assert code == 0 and report["verdict"]["state"] == "ready", report["verdict"]


def _stopped_cleanly(cluster: RealCluster) -> None:
    _, report = cluster.status()
    assert report["verdict"]["state"] == "stopped", report["verdict"]
    assert [r["condition"] for r in report["ranks"]] == ["stopped"] * 4, report["ranks"]
    assert all(r["failure"] is None for r in report["ranks"]), report["ranks"]


async def test_relaunch_then_stop_with_an_answer_streaming_is_a_stop(real_cluster: RealCluster) -> None:
    """The drain's differential: what tests/integration/test_stop_demo.py asserts of the simulated engine,
    here of real vLLM's /metrics (its running gauge) and its answer. Then the stop without a drain: SIGTERM
    with the stream open (real vLLM waits for its client) is a stop, never a crash."""
    real_cluster.need("killed")
    stop = await asyncio.to_thread(real_cluster.cli, "stop", "--yes", "--json")
    assert stop.returncode == 0, stop.stdout + stop.stderr
    await _relaunch(real_cluster)

    cfg = load_config(real_cluster.config)
    async with Fleet(cfg) as fleet:
        assert await fleet.wait_connected(30)
        url = await api_url_via_tunnel(fleet, cfg.cluster.api_port)
        async with ApiClient(url) as client:
            feeder = _Feeder(client)
            await feeder.start()
            reads = real_cluster.metrics_reads()
            stopping = asyncio.create_task(asyncio.to_thread(
                real_cluster.cli, "stop", "--yes", "--json", "--drain=900", timeout=1200))
            # answers keep coming until the stop has read rank 0's /metrics twice (its in-flight count, then
            # the drain's first look a second later: a late line of an earlier probe cannot end the wait
            # alone); then the ones streaming must be drained, each whole
            t0 = time.monotonic()
            while (await asyncio.to_thread(real_cluster.metrics_reads) < reads + 2 and not stopping.done()
                   and time.monotonic() - t0 < 300):
                await asyncio.sleep(0.1)
            feeder.halt()
            stop = await stopping
            answers = await feeder.stop(60)
    assert stop.returncode == 0, stop.stdout + stop.stderr
    data = json.loads(stop.stdout)
    seen = [type(a).__name__ if isinstance(a, BaseException) else a.finish_reason for a in answers]
    assert data["in_flight"]["running"] >= 1 and data["drain"]["outcome"] == "drained", (
        data, f"answers: {seen}, topped up: {feeder.topped_up}")
    assert [o["rank"] for o in data["stopped"]] == [0, 1, 2, 3] and all(o["ok"] for o in data["stopped"])
    for answer in answers:      # the whole answer, none cut
        assert not isinstance(answer, BaseException) and answer.finish_reason == "length", answer
        assert answer.usage is not None, answer
    _stopped_cleanly(real_cluster)

    await _relaunch(real_cluster)
    async with Fleet(cfg) as fleet:
        assert await fleet.wait_connected(30)
        url = await api_url_via_tunnel(fleet, cfg.cluster.api_port)
        async with ApiClient(url, deadlines=StreamDeadlines(300.0, 20.0)) as client:
            feeder = _Feeder(client)
            await feeder.start()
            stop = await asyncio.to_thread(real_cluster.cli, "stop", "--yes", "--json", "--no-drain")
            answers = await feeder.stop(120)
    assert stop.returncode == 0, stop.stdout + stop.stderr
    assert [a for a in answers if isinstance(a, ApiError)], f"no answer was open at the stop: {answers}"
    _stopped_cleanly(real_cluster)
