"""SIGTERM (what `docker stop` sends) stops every rank of the simulated engine the way vLLM does: its
shutdown lines, connections closed without a traceback, exit code 0; fault traceback-on-stop adds one."""

from __future__ import annotations

import signal
import subprocess
import threading
import time
from collections.abc import Callable
from pathlib import Path

import httpx
from test_engine_boot import Cluster, Rank, cluster, healthy, wait_until

from cockpit.sim import layout
from cockpit.sim.engine.spawn import start_ready

__all__ = ["cluster"]  # the fixture, imported for the tests below

HEAD_SHUTDOWN = [
    "INFO:     Application startup complete.",
    "[launcher.py:110] Shutting down FastAPI HTTP server.",
    "INFO:     Shutting down",
    "INFO:     Waiting for application shutdown.",
    "INFO:     Application shutdown complete.",
    "INFO:     Finished server process [",
]
WORKER_SHUTDOWN = ["Parent process exited, terminating worker", "WorkerProc shutting down."]
# what an unclean asyncio exit prints (the CancelledError tracebacks this test was written for)
UNCLEAN = ("Traceback", "CancelledError", "Exception in callback", "Task was destroyed", "Task exception")


def in_order(text: str, needles: list[str]) -> bool:
    at = 0
    for needle in needles:
        at = text.find(needle, at)
        if at < 0:
            return False
    return True


def stop(rk: Rank | subprocess.Popen[bytes], timeout: float = 10.0) -> int:
    proc = rk.proc if isinstance(rk, Rank) else rk
    proc.send_signal(signal.SIGTERM)
    return proc.wait(timeout)


def clean(text: str) -> bool:
    return not any(bad in text for bad in UNCLEAN)


def stream_in_background(url: str) -> tuple[threading.Thread, list[str]]:
    """A long streamed answer, read in a thread; its data lines land in the returned list."""
    lines: list[str] = []

    def run() -> None:
        body = {"messages": [{"role": "user", "content": "Tell me a long story about clouds."}],
                "stream": True, "max_tokens": 4000, "chat_template_kwargs": {"thinking": False}}
        try:
            with httpx.stream("POST", url + "/v1/chat/completions", json=body, timeout=20) as r:
                lines.extend(ln for ln in r.iter_lines() if ln)
        except httpx.HTTPError as exc:
            lines.append(f"client error: {exc!r}")

    t = threading.Thread(target=run, daemon=True)
    t.start()
    return t, lines


def test_sigterm_head_then_workers_exit_0_without_traceback(cluster: Callable[[int], Cluster]) -> None:
    c = cluster(3)
    c.provision()
    c.start_all()
    wait_until(lambda: healthy(c.url), "rank 0 /health")
    head, workers = c.ranks[0], [c.ranks[1], c.ranks[2]]
    wait_until(lambda: all("Graph capturing finished in" in w.text() for w in workers), "workers")
    reader, lines = stream_in_background(c.url)
    wait_until(lambda: len(lines) > 3, "a streamed answer under way")
    assert stop(head) == 0  # the recipe's order: the head first, with a request in flight
    log = head.text()
    assert in_order(log, HEAD_SHUTDOWN), log[-2000:]
    assert clean(log), log[-3000:]
    reader.join(10)
    assert not reader.is_alive() and lines[-1] == "data: [DONE]"  # the stream ended, it did not hang
    assert not (head.root / "run" / "mem.json").exists()
    for w in workers:  # the head went away: the workers log the store failure, as vLLM's do
        wait_until(lambda w=w: "recvValue failed" in w.text(), "the worker's store failure")
    for w in workers:
        before = len(w.text())
        assert stop(w) == 0
        after = w.text()[before:]
        assert in_order(after, WORKER_SHUTDOWN) and clean(after), after


def test_sigterm_worker_while_the_head_serves(cluster: Callable[[int], Cluster]) -> None:
    c = cluster(2)
    c.provision()
    c.start_all()
    wait_until(lambda: healthy(c.url), "rank 0 /health")
    worker = c.ranks[1]
    wait_until(lambda: "Graph capturing finished in" in worker.text(), "worker ready")
    assert stop(worker) == 0
    assert in_order(worker.text(), WORKER_SHUTDOWN) and clean(worker.text()), worker.text()[-2000:]
    assert c.ranks[0].proc.wait(10) == 1  # a worker gone is the head's failure, not the worker's


def test_sigterm_while_booting(cluster: Callable[[int], Cluster]) -> None:
    c = cluster(2)
    c.provision()
    head = c.start(0)  # waits for its worker at the rendezvous
    worker_alone = cluster(2)
    worker_alone.provision()
    worker = worker_alone.start(1)  # retries a head that is not there
    wait_until(lambda: "DP group leader" in head.text(), "the head at its rendezvous")
    wait_until(lambda: "headless multiproc executor" in worker.text(), "the worker connecting")
    time.sleep(0.3)
    for rk in (head, worker):
        assert stop(rk) == 0
        assert in_order(rk.text(), WORKER_SHUTDOWN) and clean(rk.text()), rk.text()[-2000:]


def test_traceback_on_stop_fault(cluster: Callable[[int], Cluster]) -> None:
    c = cluster(2)
    c.provision({0: ["traceback-on-stop"], 1: ["traceback-on-stop"]})
    c.start_all()
    wait_until(lambda: healthy(c.url), "rank 0 /health")
    head, worker = c.ranks[0], c.ranks[1]
    wait_until(lambda: "Graph capturing finished in" in worker.text(), "worker ready")
    assert "Traceback" not in head.text() + worker.text()
    assert stop(worker) == 0
    assert in_order(worker.text(), [WORKER_SHUTDOWN[0], "Traceback (most recent call last):",
                                    "zmq.error.ZMQError", WORKER_SHUTDOWN[1]]), worker.text()[-2000:]
    c2 = cluster(1)
    c2.provision({0: ["traceback-on-stop"]})
    solo = c2.start(0)
    wait_until(lambda: healthy(c2.url), "single-rank /health")
    assert stop(solo) == 0
    assert in_order(solo.text(), ["Waiting for application shutdown.", "Traceback (most recent call last):",
                                  "asyncio.exceptions.CancelledError", "Application shutdown complete."])


def test_serve_ready_stops_the_same_way(tmp_path: Path) -> None:
    proc, _url = start_ready(tmp_path / "plain.log")
    assert stop(proc) == 0
    text = (tmp_path / "plain.log").read_text()
    assert in_order(text, HEAD_SHUTDOWN[1:]) and clean(text), text
    root = tmp_path / "root"
    (layout.faults_dir(root)).mkdir(parents=True)
    (layout.faults_dir(root) / "traceback-on-stop").write_text("")
    proc, _url = start_ready(tmp_path / "fault.log", "--fault-root", str(root))
    assert stop(proc) == 0
    text = (tmp_path / "fault.log").read_text()
    assert in_order(text, ["Waiting for application shutdown.", "Traceback (most recent call last):",
                           "Application shutdown complete."]), text
