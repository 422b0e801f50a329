"""Logs against the demo cluster over real SSH: a stand-in container that logs, followed by the cockpit.

- the follower sees every line once, in order, with timestamps; it survives a host-down/heal (resumes
  with `--since`, no duplicates, no gaps) and ends when the container stops;
- the logs pane shows the lines merged by time, filters them, jumps to the first error, and shows the
  follow ending when the container stops;
- the headless `logs` command prints `RANK  TIMESTAMP  LINE`.

Each test runs on a cluster of its own (`fresh_demo_cluster`): the containers it starts stay behind
(the cockpit never removes containers) and go with the cluster.
"""

from __future__ import annotations

import asyncio
import re
import subprocess
import sys
import time
import uuid

from cockpit.hosts import Fleet
from cockpit.hosts.shell import command
from cockpit.sim.hub import runtime_archive
from cockpit.telemetry.logfilter import LineFilter, StreamFilter
from cockpit.telemetry.logfollow import FollowEvent, follow
from cockpit.telemetry.logline import LogLine
from cockpit.telemetry.logstore import LogStore
from cockpit.tui.app import CockpitApp
from cockpit.tui.panes.logs import LogsPane

PROBE_LINE = 'INFO:     127.0.0.1:44562 - "GET /health?r37-cockpit=probe HTTP/1.1" 200 OK'


def counting_script(rank: int, lines: int, pause: float, error_at: int) -> str:
    """Shell for the container: numbered lines, one failure signature and one access line of a cockpit
    probe after it, a short pause between lines."""
    return (f"i=0; while [ $i -lt {lines} ]; do i=$((i+1)); echo \"rank{rank} line $i\"; "
            f"if [ $i -eq {error_at} ]; then echo 'spark-{rank} NCCL WARN test signature' >&2; "
            f"echo '{PROBE_LINE}'; fi; sleep {pause}; done")


async def load_image(cluster, fleet: Fleet, ranks: list[int]) -> None:  # type: ignore[no-untyped-def]
    for rank in ranks:
        tar = cluster.root(rank) / "runtime-for-logs-test.tar"
        tar.write_bytes(runtime_archive())
        res = await fleet[rank].run(command(["docker", "load", "-i", str(tar)]), timeout=60)
        assert res.exit_status == 0, res.stderr


async def start(fleet: Fleet, rank: int, name: str, script: str, image: str) -> None:
    res = await fleet[rank].run(command(["docker", "run", "-d", "--name", name, "--entrypoint", "sh", image,
                                         "-c", script]), timeout=60)
    assert res.exit_status == 0, res.stderr


def numbers(lines: list[LogLine]) -> list[int]:
    return [int(m.group(1)) for ln in lines if (m := re.search(r"line (\d+)$", ln.text))]


async def test_follow_in_order_survives_host_down_and_ends(fresh_demo_cluster) -> None:
    cluster = fresh_demo_cluster
    config = cluster.config
    name = f"r37-logtest-{uuid.uuid4().hex[:8]}"
    ranks, total = [0, 1], 300
    async with Fleet(config) as fleet:
        assert await fleet.wait_connected(20)
        await load_image(cluster, fleet, ranks)
        for rank in ranks:
            await start(fleet, rank, name, counting_script(rank, total, 0.1, 150), config.runtime.image_tag)
        got: dict[int, list[LogLine]] = {r: [] for r in ranks}
        events: dict[int, list[FollowEvent]] = {r: [] for r in ranks}

        async def one(rank: int) -> None:
            async for item in follow(fleet[rank], name):
                if isinstance(item, LogLine):
                    got[rank].append(item)
                else:
                    events[rank].append(item)

        tasks = [asyncio.create_task(one(r)) for r in ranks]
        try:
            deadline = time.monotonic() + 20
            while len(got[1]) < 40:  # rank 1 is being followed; then take its host away
                assert time.monotonic() < deadline, "no lines from rank 1"
                await asyncio.sleep(0.1)
            cluster.fault(1, "host-down")
            try:
                deadline = time.monotonic() + 20
                while not any(e.state == "lost" for e in events[1]):
                    assert time.monotonic() < deadline, "the follower never noticed the host going"
                    await asyncio.sleep(0.1)
            finally:
                cluster.fault(1, "host-down", on=False)
            await asyncio.wait_for(asyncio.gather(*tasks), 90)
        finally:
            for t in tasks:
                t.cancel()

    for rank in ranks:
        err = [ln for ln in got[rank] if "NCCL WARN" in ln.text]
        assert numbers(got[rank]) == list(range(1, total + 1))  # every line once, in order
        assert len(err) == 1
        stamps = [ln.ts for ln in got[rank]]
        assert stamps == sorted(stamps) and stamps[0] > 1_700_000_000 * 10**9
        assert events[rank][-1].state == "ended"
    assert [e.state for e in events[1]][:3] == ["following", "lost", "resumed"]

    store = LogStore(ranks)
    store.add(got)
    merged = list(store.merged)
    assert merged == sorted(merged) and len(merged) == 2 * (total + 2)  # + the failure and probe lines
    hits = StreamFilter(LineFilter.parse("NCCL WARN"), 1).feed(merged)
    assert [ln.rank for ln, kind in hits if kind == 1] == sorted(ranks, key=lambda r: err_ts(got[r]))


def err_ts(lines: list[LogLine]) -> int:
    return next(ln.ts for ln in lines if "NCCL WARN" in ln.text)


async def _until(pilot, pred, timeout: float, what: str) -> None:  # type: ignore[no-untyped-def]
    t0 = time.monotonic()
    while not pred():
        await pilot.pause(0.1)
        assert time.monotonic() - t0 < timeout, f"timed out waiting for {what}"


async def test_pane_follows_filters_and_sees_the_end(fresh_demo_cluster) -> None:
    cluster = fresh_demo_cluster
    name = f"r37-logpane-{uuid.uuid4().hex[:8]}"
    config = cluster.config
    config = config.model_copy(update={"cluster": config.cluster.model_copy(update={"container_name": name})})
    total = 120
    app = CockpitApp(config, cluster.config_path)
    async with app.run_test(size=(140, 36)) as pilot:
        app.action_show_pane("logs")
        pane = app.query_one(LogsPane)
        await _until(pilot, lambda: all(app.fleet[r].status.connected for r in config.ranks), 30, "hosts")
        await _until(pilot, lambda: pane.states[2].state == "waiting", 20, "no container yet")
        await load_image(cluster, app.fleet, [2, 3])
        for rank in (2, 3):
            script = counting_script(rank, total, 0.05, 60)
            await start(app.fleet, rank, name, script, config.runtime.image_tag)
        await _until(pilot, lambda: len(pane.store.merged) >= 2 * (total + 1), 60, "all lines in the pane")
        merged = list(pane.store.merged)
        assert merged == sorted(merged) and not [ln for ln in merged if "r37-cockpit=probe" in ln.text]
        for rank in (2, 3):
            assert numbers([ln for ln in merged if ln.rank == rank]) == list(range(1, total + 1))
        # the follow ends with the container: shown as waiting for a (re)started one
        await _until(pilot, lambda: pane.states[2].state == "waiting"
                     and "stopped" in pane.states[2].detail, 30, "the end of the container")
        await pilot.press("slash", *"line 1[0-9]$", "enter")
        await pilot.pause(0.2)
        assert pane.filtered is not None and pane.filtered.matches == 2 * 10
        await pilot.press("escape")  # clears the filter
        await pilot.press("e")
        await _until(pilot, lambda: "failure at line" in pane.message, 10, "first error")
        view = pane.view
        assert view.marked is not None and "NCCL WARN" in view.marked.text
        assert not view.following
        await pilot.press("f")
        assert view.following and view.new_lines == 0


def test_cli_logs_prints_rank_timestamp_line(fresh_demo_cluster) -> None:
    cluster = fresh_demo_cluster
    name = f"r37-logcli-{uuid.uuid4().hex[:8]}"
    config = cluster.config

    async def setup() -> None:
        async with Fleet(config) as fleet:
            assert await fleet.wait_connected(20)
            await load_image(cluster, fleet, [0, 1])
            for rank in (0, 1):
                await start(fleet, rank, name, counting_script(rank, 20, 0.01, 5), config.runtime.image_tag)
            await asyncio.sleep(2)

    asyncio.run(setup())
    toml = cluster.config_path.read_text()
    assert "container_name" not in toml  # the default, ds41_r37: point this copy at the test container
    toml = toml.replace("[cluster]\n", f'[cluster]\ncontainer_name = "{name}"\n', 1)
    cfg = cluster.config_path.with_name("logs-cli.toml")
    cfg.write_text(toml)
    out = subprocess.run([sys.executable, "-m", "cockpit", "--config", str(cfg), "logs", "--rank", "1",
                          "--follow", "--grep", "line (1|2)$|NCCL", "-C", "0"],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    rows = out.stdout.splitlines()
    assert [r.split("  ", 2)[2] for r in rows] == ["rank1 line 1", "rank1 line 2",
                                                   "spark-1 NCCL WARN test signature"]
    assert all(re.fullmatch(r"1  \d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{9}Z  .+", r) for r in rows)
    # the cockpit's own probe line is dropped, as in the Logs pane, unless --probes keeps it
    for extra, kept in (([], []), (["--probes"], [PROBE_LINE])):
        out = subprocess.run([sys.executable, "-m", "cockpit", "--config", str(cfg), "logs", "--rank", "1",
                              "--grep", "probe", *extra], capture_output=True, text=True, timeout=60)
        assert out.returncode == 0, out.stderr
        assert [r.split("  ", 2)[2] for r in out.stdout.splitlines()] == kept
