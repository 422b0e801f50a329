"""Snapshots of the launch pane: mid-launch, all ranks ready, one rank failed with its cause.

The pane's model is fed exactly what the launcher feeds it (log lines, container states, a readiness
probe) at fixed times, and the events that produces are applied to the pane, so snapshots are stable.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from cockpit.api.status import ApiStatus
from cockpit.recipe import containers as dk
from cockpit.recipe import launch as L
from cockpit.recipe.timeline import LaunchEvent
from cockpit.tui.app import CockpitApp
from cockpit.tui.messages import GateChecked
from cockpit.tui.panes.launch import LaunchPane

SIZE = (130, 44)
T0 = 1_746_093_600.0  # fixed epoch seconds
LOGS = Path(__file__).parents[1] / "recipe" / "logs"
HEAD = (LOGS / "head_boot.log").read_text().splitlines()
WORKER = (LOGS / "worker_boot.log").read_text().splitlines()
NCCL = (LOGS / "nccl_timeout.log").read_text().splitlines()


def dry_runs(cfg) -> dict[int, L.DryRun]:  # type: ignore[no-untyped-def]
    out = {}
    for r in L.launch_order(cfg.ranks):
        head = "" if r == 0 else " --headless"
        out[r] = L.DryRun(r, L.dry_run_command(cfg, r).line, L.launch_command(cfg, r).line, True,
                          "docker run -d --name ds41_r37 --network host --ipc host "
                          "local/ds41-r37-spark:runtime vllm serve /srv/models/DeepSeek-V4.1-Flash-dealignai "
                          f"--node-rank {r}{head}")
    return out


def feed(pane: LaunchPane, events: list[LaunchEvent]) -> None:
    for ev in pane.timeline.settle(events):
        pane.model_changed(ev)


def boot(pane: LaunchPane, rank: int, lines: list[str], start: float, step: float) -> None:
    tl = pane.timeline[rank]
    feed(pane, tl.launched(start, "c" * 64))
    for i, line in enumerate(lines):
        feed(pane, tl.feed_line(line, start + 1 + i * step))


async def show(app: CockpitApp, pilot, setup, *, dry: bool = True) -> None:  # type: ignore[no-untyped-def]
    """Show the launch pane at a fixed clock, with the dry run done (`dry`), then `setup(pane)`."""
    await pilot.pause()
    await pilot.pause()  # let every pane finish mounting (one focuses its view after a refresh)
    app.set_focus(None)
    app.action_show_pane("launch")
    await pilot.pause()
    pane = app.query_one(LaunchPane)
    pane.clock = lambda: T0 + 120
    for tl in pane.timeline.ranks.values():
        tl.pending = ""           # as the watcher leaves them once it has read each rank
    if dry:
        pane.show_dry_run(dry_runs(app.config), [])
    setup(pane)
    for tl in pane.timeline.ranks.values():
        tl.read_to = max(tl.read_to, T0 + 120)   # every log read up to the pane's clock
    feed(pane, [])
    pane.refresh_view()
    app.refresh_header()
    await pilot.pause()


def app_with(fixed_config, setup, *, dry: bool = True) -> tuple[CockpitApp, object]:  # type: ignore[no-untyped-def]
    app = CockpitApp(fixed_config, connect=False)

    async def before(pilot) -> None:  # type: ignore[no-untyped-def]
        await show(app, pilot, setup, dry=dry)

    return app, before


def test_mid_launch(snap_compare, fixed_config) -> None:
    def setup(pane: LaunchPane) -> None:
        boot(pane, 3, WORKER, T0, 4.0)
        boot(pane, 2, WORKER[:9], T0 + 2, 6.0)
        boot(pane, 1, WORKER[:5], T0 + 4, 9.0)
        boot(pane, 0, HEAD[:14], T0 + 6, 5.0)

    app, before = app_with(fixed_config, setup)
    assert snap_compare(app, terminal_size=SIZE, run_before=before)


def test_all_ready(snap_compare, fixed_config) -> None:
    def setup(pane: LaunchPane) -> None:
        for r in (3, 2, 1):
            boot(pane, r, WORKER, T0 + 2 * (3 - r), 3.0)
        boot(pane, 0, HEAD, T0 + 8, 3.0)
        ready = ApiStatus("ready", "ready: /health 200, /v1/models lists deepseek-v4.1-flash")
        feed(pane, pane.timeline.mark_api(ready, T0 + 110))

    app, before = app_with(fixed_config, setup)
    assert snap_compare(app, terminal_size=SIZE, run_before=before)


def one_rank_failed(pane: LaunchPane) -> None:
    """Rank 1's NCCL timed out (its container exited 1) while the others were in distributed init."""
    boot(pane, 3, WORKER[:4], T0, 5.0)
    boot(pane, 2, WORKER[:4], T0 + 2, 5.0)
    boot(pane, 1, NCCL, T0 + 4, 2.0)
    (state,) = dk.parse_inspect(
        '[{"Id": "' + "c" * 64 + '", "Name": "/ds41_r37", '
        '"State": {"Status": "exited", "Running": false, "ExitCode": 1, "OOMKilled": false, '
        '"StartedAt": "2025-05-01T10:00:05Z", '
        '"FinishedAt": "2025-05-01T10:00:25Z"}}]')
    feed(pane, pane.timeline[1].feed_container(state, T0 + 25))
    boot(pane, 0, HEAD[:8], T0 + 6, 3.0)


def test_one_rank_failed_with_cause(snap_compare, fixed_config) -> None:
    app, before = app_with(fixed_config, one_rank_failed)
    assert snap_compare(app, terminal_size=SIZE, run_before=before)


def _running(started: float) -> dk.ContainerState:
    return dk.ContainerState("c" * 64, "ds41_r37", "running", running=True, started_at=started)


def _serving(pane: LaunchPane) -> None:
    """A cluster this cockpit did not see boot: its containers running, the tail of each log, the API up."""
    tl = pane.timeline
    for r in (3, 2, 1):
        tl[r].owner = "cockpit"
        feed(pane, tl[r].feed_container(_running(T0 + 2 * (3 - r)), T0 + 100))
        for i, line in enumerate(WORKER[-6:]):
            feed(pane, tl[r].feed_line(line, T0 + 80 + i))
    tl[0].owner = "cockpit"
    feed(pane, tl[0].feed_container(_running(T0 + 8), T0 + 100))
    for i, line in enumerate(HEAD[-6:]):
        feed(pane, tl[0].feed_line(line, T0 + 90 + i))
    ready = ApiStatus("ready", "ready: /health 200, /v1/models lists deepseek-v4.1-flash")
    feed(pane, tl.mark_api(ready, T0 + 96))


def test_opened_on_a_running_cluster(snap_compare, fixed_config) -> None:
    app, before = app_with(fixed_config, _serving, dry=False)
    assert snap_compare(app, terminal_size=SIZE, run_before=before)


def test_after_a_stop(snap_compare, fixed_config) -> None:
    def setup(pane: LaunchPane) -> None:
        _serving(pane)
        for r in range(4):
            pane.timeline[r].request_stop(T0 + 110)
            feed(pane, pane.timeline[r].feed_line("Traceback (most recent call last):", T0 + 110.5))
            feed(pane, pane.timeline[r].feed_line("asyncio.exceptions.CancelledError", T0 + 110.6))
            state = dk.ContainerState("c" * 64, "ds41_r37", "exited", exit_code=0, started_at=T0,
                                      finished_at=T0 + 111)
            feed(pane, pane.timeline[r].feed_container(state, T0 + 111))

    app, before = app_with(fixed_config, setup, dry=False)
    assert snap_compare(app, terminal_size=SIZE, run_before=before)


def test_with_a_hung_engine(snap_compare, fixed_config) -> None:
    from cockpit.api.liveness import REMEDY_HUNG, Liveness

    def setup(pane: LaunchPane) -> None:
        _serving(pane)
        pane.timeline.mark_liveness(Liveness(
            "hung", T0 + 20, "3 running, 0 waiting, but vllm:generation_tokens_total has not grown for 95 s "
            "(threshold 90 s)", REMEDY_HUNG))
        feed(pane, [])

    app, before = app_with(fixed_config, setup, dry=False)
    assert snap_compare(app, terminal_size=SIZE, run_before=before)


@pytest.mark.parametrize(("size", "theme"), [(SIZE, None), ((80, 24), None), (SIZE, "textual-light")],
                         ids=["160x48", "80x24", "160x48-light"])
def test_with_an_engine_not_yet_seen_to_move(snap_compare, fixed_config, size, theme, tmp_path,
                                             monkeypatch) -> None:
    """A TUI opened as the engine hung: requests in the engine, no sample yet shows the counters grow. The
    header says "engine progress unknown │ API ready", never READY; the verdict says what it waits for."""
    from cockpit.api.liveness import EngineSample, HangTracker

    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))   # a theme picked is remembered per user

    def setup(pane: LaunchPane) -> None:
        if theme:
            pane.app.theme = theme
        _serving(pane)
        found = frozenset({"vllm:num_requests_running", "vllm:generation_tokens_total",
                           "vllm:prompt_tokens_total"})
        tracker = HangTracker(90)
        for at in (T0 + 110, T0 + 116):      # two samples, the counters flat
            live = tracker.feed(EngineSample(2, 1, 51_200.0, 8_000.0, 0.31, at, found))
        pane.timeline.mark_liveness(live)
        feed(pane, [])

    app, before = app_with(fixed_config, setup, dry=False)
    assert snap_compare(app, terminal_size=size, run_before=before)


def test_the_relaunch_dialog(snap_compare, fixed_config) -> None:
    from cockpit.recipe.replace import ReplaceItem, replace_commands

    def setup(pane: LaunchPane) -> None:
        items = [ReplaceItem(r, "replace", f"rank {r}: stopped", f"{r}" * 64, replace_commands(f"{r}" * 64))
                 for r in range(4)]
        pane.on_gate_checked(GateChecked(L.Gate([], items, []), True))

    app, before = app_with(fixed_config, setup)
    assert snap_compare(app, terminal_size=SIZE, run_before=before)


ESCAPES = "\x1b]52;c;ZWNobyBwd25lZA==\x07\x1b]0;owned\x07\x1b[2J\x1b]8;;http://x\x07link\x1b]8;;\x07"


def test_host_text_reaches_the_screen_neutralised(snap_compare, fixed_config) -> None:
    """Docker's error text, a dry run's output and a crash line, each carrying OSC 52 (clipboard), a title,
    clear-screen and a hyperlink: shown as visible symbols, never sent to the terminal."""
    def setup(pane: LaunchPane) -> None:
        runs = dry_runs(fixed_config)
        runs[3] = L.DryRun(3, runs[3].dry_command, runs[3].launch_command, True, "docker run " + ESCAPES)
        pane.show_dry_run(runs, [])
        boot(pane, 1, [*WORKER[:4], "RuntimeError: CUDA error: an illegal memory access " + ESCAPES], T0, 2.0)
        error = ESCAPES.replace("\x1b", "\\u001b").replace("\x07", "\\u0007")   # as JSON escapes
        (state,) = dk.parse_inspect(
            '[{"Id": "' + "c" * 64 + '", "Name": "/ds41_r37", "State": {"Status": "exited", '
            '"Running": false, "ExitCode": 1, "Error": "' + error + '", '
            '"FinishedAt": "2025-05-01T10:00:25Z"}}]')
        feed(pane, pane.timeline[1].feed_container(state, T0 + 25))
        pane.refresh_view()
        shown = [pane.query_one(f"#{w}").render() for w in ("launch-failure", "launch-commands")]
        assert all("\x1b" not in str(getattr(t, "plain", t)) and "\x07" not in str(getattr(t, "plain", t))
                   for t in shown)

    app, before = app_with(fixed_config, setup, dry=False)
    assert snap_compare(app, terminal_size=SIZE, run_before=before)


def test_one_rank_failed_in_the_light_theme(snap_compare, fixed_config, tmp_path, monkeypatch) -> None:
    """The verdict, timeline and failure box stay readable on a light background. (A theme picked at run
    time is remembered per user: here in a state directory of this test's own, so no other test sees it.)"""
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    def setup(pane: LaunchPane) -> None:
        pane.app.theme = "textual-light"
        boot(pane, 3, WORKER[:6], T0, 5.0)
        boot(pane, 2, WORKER[:6], T0 + 2, 5.0)
        boot(pane, 1, NCCL, T0 + 4, 2.0)
        boot(pane, 0, HEAD[:10], T0 + 6, 3.0)

    app, before = app_with(fixed_config, setup)
    assert snap_compare(app, terminal_size=SIZE, run_before=before)


async def scene(app: CockpitApp, pilot) -> None:  # type: ignore[no-untyped-def]
    """The matrix's launch state: dry run done, rank 1 failed with its cause and context, the others
    caught in distributed init (verdict, failure, bars and the whole phase table must show)."""
    await show(app, pilot, one_rank_failed)


async def test_at_80x24_the_verdict_the_bars_and_the_whole_phase_table_are_on_screen(fixed_config) -> None:
    """The issue's small terminal: nothing above the phase table may push it off screen, and no row of
    the timeline wraps (a long status is cut with "…"; the failure box below says it in full)."""
    from cockpit.tui.widgets.timeline import TimelineView

    app = CockpitApp(fixed_config, connect=False)
    async with app.run_test(size=(80, 24)) as pilot:
        await scene(app, pilot)
        await pilot.pause()
        pane = app.query_one(LaunchPane)
        assert pane.short
        for selector in ("#launch-verdict", "#launch-todo", "#launch-timeline"):
            geometry = app.screen.find_widget(pane.query_one(selector))
            assert geometry.visible_region == geometry.region, f"{selector} is cut off"
        timeline = pane.query_one(TimelineView)
        lines = str(timeline.render()).splitlines()
        assert timeline.size.height == len(lines) == 11         # 1 + 4 bars, 1 + 4 phase rows, legend
        assert all(len(line) <= timeline.size.width for line in lines)
        assert "FAILED in distributed init" in lines[2] and lines[2].rstrip().endswith("3.0s")
        assert lines[5].split() == ["rank", "launch", "run", "dist", "engram", "load", "kv", "graphs", "wait",
                                    "api", "total"]
        assert [line.split()[0] for line in lines[6:10]] == ["0", "1", "2", "3"]
        assert lines[9].split()[-1] == "2m00s"


async def test_at_160x48_the_failure_and_its_context_show_without_scrolling(fixed_config) -> None:
    app = CockpitApp(fixed_config, connect=False)
    async with app.run_test(size=(160, 48)) as pilot:
        await scene(app, pilot)
        await pilot.pause()
        pane = app.query_one(LaunchPane)
        assert not pane.short
        for selector in ("#launch-verdict", "#launch-todo", "#launch-timeline", "#launch-failure",
                         "#launch-context"):
            geometry = app.screen.find_widget(pane.query_one(selector))
            assert geometry.visible_region == geometry.region, f"{selector} is cut off"


def test_hosts_named_as_they_name_themselves(snap_compare, fixed_config) -> None:
    """The host column once hosts have said their names: one plain, one with a terminal escape (inert)."""
    from dataclasses import replace

    def setup(pane: LaunchPane) -> None:
        for r in (3, 2, 1):
            boot(pane, r, WORKER, T0 + 2 * (3 - r), 3.0)
        boot(pane, 0, HEAD, T0 + 8, 3.0)
        for rank, name in ((1, "gb10-b"), (2, "x\x1b]0;t\x07")):
            host = pane.ctx.fleet[rank]
            host.status = replace(host.status, hostname=name)
            pane.host_changed(host.status)

    app, before = app_with(fixed_config, setup)
    assert snap_compare(app, terminal_size=SIZE, run_before=before)
