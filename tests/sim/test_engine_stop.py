"""SIGTERM (what `docker stop` sends) stops every rank of the simulated engine the way vLLM does: its
shutdown lines, connections closed without a traceback, exit code 0; fault traceback-on-stop adds one.
With a stream open it does what real vLLM 0.32 did in 2 of 3 tries (the samples in
tests/fixtures/samples/real-vllm-0.32-cpu): the stream stalls (no [DONE], no error), the server logs vLLM's
shutdown lines and "Waiting for connections to close", and exits only once its client went away."""

from __future__ import annotations

import re
import signal
import socket
import subprocess
import threading
import time
from collections.abc import Callable
from pathlib import Path

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


SAMPLES = Path(__file__).parents[1] / "fixtures" / "samples" / "real-vllm-0.32-cpu"


def open_raw_stream(url: str) -> tuple[socket.socket, list[bytes]]:
    """A streamed answer on a plain socket (closed by the test when it means the client to go); the bytes
    read land in the returned list, read in a thread."""
    host, port = url.removeprefix("http://").split(":")
    body = (b'{"messages": [{"role": "user", "content": "Tell me a long story about clouds."}], '
            b'"stream": true, "max_tokens": 4000, "chat_template_kwargs": {"thinking": false}}')
    sock = socket.create_connection((host, int(port)), timeout=30)
    sock.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                 + f"Content-Length: {len(body)}\r\n\r\n".encode() + body)
    got: list[bytes] = []

    def read() -> None:
        while True:
            try:
                data = sock.recv(65536)
            except OSError:
                return
            if not data:
                return
            got.append(data)

    threading.Thread(target=read, daemon=True).start()
    return sock, got


def hang_up(sock: socket.socket) -> None:
    """The client goes (shutdown first: a close alone waits for the reader thread's recv)."""
    sock.shutdown(socket.SHUT_RDWR)
    sock.close()


def _messages(text: str) -> list[str]:
    """The shutdown lines of a vLLM log without process tag, time and pid: `[file:line] message`."""
    out = []
    for line in text.splitlines():
        m = re.search(r"\[(\w+\.py:\d+)\] (\[shutdown\].*)$", line)
        if m:
            out.append(re.sub(r"pid \d+", "pid N", m.group(2)))
        elif line.startswith("INFO:     ") and "HTTP/1.1" not in line:
            out.append(line)
    return out


def test_sigterm_with_a_stream_open_stalls_it_and_waits_for_the_client_as_real_vllm(tmp_path: Path) -> None:
    proc, url = start_ready(tmp_path / "engine.log")
    sock, got = open_raw_stream(url)
    wait_until(lambda: b"".join(got).count(b"data: ") > 3, "a streamed answer under way")
    proc.send_signal(signal.SIGTERM)
    log = tmp_path / "engine.log"
    wait_until(lambda: "Waiting for connections to close" in log.read_text(), "the wait for the client")
    seen = len(b"".join(got))
    time.sleep(1.5)
    assert proc.poll() is None                               # it waits for its client, as vLLM does
    assert len(b"".join(got)) == seen                        # the stream stalled: no token, no error
    assert b"[DONE]" not in b"".join(got) and b'"error"' not in b"".join(got)
    host, port = url.removeprefix("http://").split(":")
    try:
        socket.create_connection((host, int(port)), timeout=2).close()
    except OSError:
        pass
    else:
        raise AssertionError("the server still listens while it waits for its connections")
    hang_up(sock)                                            # the client goes: the server finishes
    assert proc.wait(15) == 0
    text = log.read_text()
    assert clean(text), text[-3000:]
    # the same shutdown lines as real vLLM 0.32 with a stream open, in the same order
    real = _messages((SAMPLES / "shutdown-run2-sigterm-with-open-stream.log").read_text())
    ours = _messages(text)
    ours = ours[next(i for i, m in enumerate(ours) if m.startswith("[shutdown]")):]
    real_cut = real[:real.index("INFO:     Waiting for connections to close. (CTRL+C to force quit)") + 1]
    assert ours[:len(real_cut)] == real_cut, (ours, real_cut)
    assert in_order(text, ["Waiting for connections to close", "INFO:     Waiting for application shutdown.",
                           "INFO:     Application shutdown complete."])
    # the stream's bytes end as the real capture's: a content chunk, then nothing
    real_sse = (SAMPLES / "sse-during-sigterm.txt").read_text()
    assert "[DONE]" not in real_sse and real_sse.split("data: ")[-1].count('"finish_reason":null') == 1
    assert b"".join(got).rstrip().split(b"data: ")[-1].count(b'"finish_reason":null') == 1


def test_sigterm_idle_exits_promptly(tmp_path: Path) -> None:
    proc, _url = start_ready(tmp_path / "engine.log")
    t0 = time.monotonic()
    assert stop(proc) == 0 and time.monotonic() - t0 < 10
    assert "Waiting for connections to close" not in (tmp_path / "engine.log").read_text()


def test_sigterm_head_then_workers_exit_0_without_traceback(cluster: Callable[[int], Cluster]) -> None:
    c = cluster(3)
    c.provision()
    c.start_all()
    wait_until(lambda: healthy(c.url), "rank 0 /health")
    head, workers = c.ranks[0], [c.ranks[1], c.ranks[2]]
    wait_until(lambda: all("Graph capturing finished in" in w.text() for w in workers), "workers")
    sock, got = open_raw_stream(c.url)
    wait_until(lambda: b"".join(got).count(b"data: ") > 3, "a streamed answer under way")
    head.proc.send_signal(signal.SIGTERM)  # the recipe's order: the head first, with a request in flight
    wait_until(lambda: "Waiting for connections to close" in head.text(), "the head waiting for its client")
    hang_up(sock)                          # its client gives up: the head finishes its shutdown
    assert head.proc.wait(15) == 0
    log = head.text()
    assert in_order(log, ["INFO:     Application startup complete.", "INFO:     Shutting down",
                          "INFO:     Waiting for application shutdown.",
                          "INFO:     Application shutdown complete.",
                          "INFO:     Finished server process ["]), log[-2000:]
    assert clean(log), log[-3000:]
    assert b"[DONE]" not in b"".join(got)  # the stream stalled, as real vLLM's did
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


def test_no_sigterm_handler_fault_leaves_pid1_without_one(cluster: Callable[[int], Cluster]) -> None:
    """Fault no-sigterm-handler: the engine catches no SIGTERM, so the docker stand-in (which, like the
    kernel for a container's PID 1, drops a signal that is not caught) waits its timeout and SIGKILLs."""
    from cockpit.sim.tools import _docker

    plain = cluster(1)
    plain.provision()
    rk = plain.start(0)
    wait_until(lambda: healthy(plain.url), "rank 0 /health")
    assert _docker.catches(rk.proc.pid, signal.SIGTERM)
    assert stop(rk) == 0
    faulty = cluster(1)
    faulty.provision({0: ["no-sigterm-handler"]})
    rk = faulty.start(0)
    wait_until(lambda: healthy(faulty.url), "rank 0 /health")
    assert not _docker.catches(rk.proc.pid, signal.SIGTERM)
    assert _docker.catches(rk.proc.pid, signal.SIGINT)
    rk.proc.send_signal(signal.SIGINT)
    assert rk.proc.wait(15) == 0
