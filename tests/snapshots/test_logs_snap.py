"""Snapshots of the logs pane: merged view, filtered with context, paused with a count of new lines;
and the matrix's scene (`scene`): the first failure found and marked, one rank's follower lost.

The pane is fed the same `LogLine`s its followers produce (fixed timestamps), so the pictures are
stable; the real following is covered by tests/integration/test_logs_demo.py.
"""

from __future__ import annotations

from cockpit.telemetry.logfollow import FollowEvent
from cockpit.telemetry.logline import LogLine
from cockpit.tui.app import CockpitApp
from cockpit.tui.panes.logs import LogsPane

SIZE = (130, 34)
T0 = 1_795_993_157_000_000_000  # 2026-11-29T22:59:17Z

RANK_LINES = {
    0: ["(APIServer pid=1) INFO 11-29 22:59:17 [utils.py:326] non-default args: {'model': '/models/ds41'}",
        "(EngineCore_DP0 pid=211) INFO 11-29 22:59:18 [parallel_state.py:11] DP group leader: node_rank=0, "
        "world_size=4",
        "(Worker_TP0 pid=305) INFO 11-29 22:59:20 [engram.py:88] Engram DISK mode: layer 3 rows [0, 131072)",
        "(Worker_TP0 pid=305) INFO 11-29 23:09:41 [loader.py:262] Loading weights took 621.07 seconds",
        "(Worker_TP0 pid=305) INFO 11-29 23:09:44 [gpu_worker.py:300] Available KV cache memory: 11.2 GiB"],
    1: ["(Worker_TP1 pid=305) INFO 11-29 22:59:18 [core.py:70] Connecting to the head at 10.37.0.1:29501",
        "(Worker_TP1 pid=305) INFO 11-29 22:59:21 [engram.py:88] Engram DISK mode: layer 3 rows [131072, "
        "262144)",
        "(Worker_TP1 pid=305) INFO 11-29 23:09:40 [loader.py:262] Loading weights took 619.88 seconds"],
    2: ["(Worker_TP2 pid=305) INFO 11-29 22:59:18 [core.py:70] Connecting to the head at 10.37.0.1:29501",
        "spark-2:305:412 [0] NCCL INFO NET/IB : Using [0]rocep1s0f0:1/RoCE [RO]; OOB enp1s0f0np0:10.37.0.3",
        "spark-2:305:412 [0] transport/net_ib.cc:1023 NCCL WARN NET/IB : Got completion from peer "
        "10.37.0.4<52110> with status=12 opcode=0 len=0 vendor err 129 (Recv) localGid ::ffff:10.37.0.3",
        "Traceback (most recent call last):",
        "  File \"/usr/lib/python3/dist-packages/vllm/v1/engine/core.py\", line 512, in run_engine_core",
        "RuntimeError: NCCL error: unhandled system error (run with NCCL_DEBUG=INFO for details)"],
    3: ["(Worker_TP3 pid=305) INFO 11-29 22:59:19 [core.py:70] Connecting to the head at 10.37.0.1:29501",
        "\x1b[33mWARNING\x1b[0m odd bytes from the host: bell\x07 esc\x1b]0;title cr\rdone",
        "(Worker_TP3 pid=305) INFO 11-29 23:09:42 [loader.py:262] Loading weights took 620.50 seconds"],
}


def fed_lines(rounds: int = 4) -> dict[int, list[LogLine]]:
    """Each rank's lines, repeated `rounds` times, interleaved in time across ranks."""
    out: dict[int, list[LogLine]] = {r: [] for r in RANK_LINES}
    for k in range(rounds):
        for r, texts in RANK_LINES.items():
            for i, text in enumerate(texts):
                ts = T0 + k * 10_000_000_000 + i * 1_000_000_000 + r * 123_456_789
                out[r].append(LogLine(ts, r, text))
    return out


def logs_app(fixed_config) -> CockpitApp:  # type: ignore[no-untyped-def]
    return CockpitApp(fixed_config, connect=False)


async def show_logs(app: CockpitApp, pilot, rounds: int = 4) -> LogsPane:  # type: ignore[no-untyped-def]
    from cockpit.safetext import neutralise

    app.action_show_pane("logs")
    pane = app.query_one(LogsPane)
    for rank, lines in fed_lines(rounds).items():
        pane.ingest(rank, [LogLine(ln.ts, ln.rank, neutralise(ln.text)) for ln in lines])
    pane.flush(now=True)
    await pilot.pause()
    return pane


def test_logs_merged(snap_compare, fixed_config) -> None:
    app = logs_app(fixed_config)

    async def before(pilot) -> None:  # type: ignore[no-untyped-def]
        pane = await show_logs(app, pilot)
        assert pane.view.following
        await pilot.pause()

    assert snap_compare(app, terminal_size=SIZE, run_before=before)


def test_logs_filtered_with_context(snap_compare, fixed_config) -> None:
    app = logs_app(fixed_config)

    async def before(pilot) -> None:  # type: ignore[no-untyped-def]
        pane = await show_logs(app, pilot)
        await pilot.press("slash", *"NCCL WARN|took", "enter")
        await pilot.pause()
        assert pane.filter is not None and pane.filtered is not None
        await pilot.press("home")  # the first group, with its separator below
        await pilot.pause()

    assert snap_compare(app, terminal_size=SIZE, run_before=before)


def test_logs_paused_with_pending_count(snap_compare, fixed_config) -> None:
    app = logs_app(fixed_config)

    async def before(pilot) -> None:  # type: ignore[no-untyped-def]
        pane = await show_logs(app, pilot, rounds=2)
        await pilot.press("up", "up", "up")
        more = {r: [LogLine(ln.ts + 100_000_000_000, r, f"later line {i} of rank {r}")
                    for i, ln in enumerate(lines)] for r, lines in fed_lines(1).items()}
        for rank, lines in more.items():
            pane.ingest(rank, lines)
        pane.flush(now=True)
        await pilot.pause()
        assert not pane.view.following and pane.view.new_lines == sum(len(v) for v in more.values())

    assert snap_compare(app, terminal_size=SIZE, run_before=before)


async def scene(app: CockpitApp, pilot) -> None:  # type: ignore[no-untyped-def]
    """The matrix's logs state: every rank's lines merged, the first failure (rank 2's NCCL WARN) found
    with `e` and marked, following paused there, and rank 2's follower lost with its reason."""
    pane = await show_logs(app, pilot, rounds=2)
    for rank in pane.ranks:
        pane.note(FollowEvent(rank, "following"))
    pane.note(FollowEvent(2, "lost", "connection lost (no keepalive answer)"))
    await settled_view(pane, pilot)          # `e` searches from where the view is: let it get there first
    await pilot.press("e")
    for _ in range(100):  # the search runs in a thread
        await pilot.pause(0.02)
        if pane.view.marked is not None:
            break
    assert pane.view.marked is not None and "NCCL WARN" in pane.view.marked.text
    pane.flush(now=True)
    await settled_view(pane, pilot)


async def settled_view(pane, pilot) -> None:  # type: ignore[no-untyped-def]
    """Wait until the view has placed the marked line (after-refresh callbacks), however busy the machine:
    the same scroll position and size three pauses in a row."""
    last, same = None, 0
    for _ in range(100):
        await pilot.pause()
        now = (pane.view.scroll_y, pane.view.max_scroll_y, pane.view.size)
        same = same + 1 if now == last else 0
        last = now
        if same >= 3:
            return
