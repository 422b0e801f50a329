"""The Bench pane against the simulated engine served alone (``--api-url``): a quick run completes and
shows its summary and records; a busy API is refused with the reason and nothing is written; a cancelled
run keeps its records, marked cancelled, and leaves nothing running on the server."""

from __future__ import annotations

import asyncio
import contextlib
import io
import json
import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console
from rich.theme import Theme
from simcluster import busy_request
from textual.widgets import Static

from cockpit.api.client import ApiClient
from cockpit.api.liveness import read_sample
from cockpit.bench.runner import CellStarted
from cockpit.config import ClusterConfig
from cockpit.constants import SERVED_MODEL
from cockpit.sim.engine.spawn import ready_engine
from cockpit.tui.app import CockpitApp
from cockpit.tui.panes.bench import BenchPane
from cockpit.tui.styles import ROLES

SPEED = 20.0
SIZE = (160, 48)


@pytest.fixture(scope="module")
def engine_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    log = tmp_path_factory.mktemp("engine") / "engine.log"
    with ready_engine(log, "--speed", str(SPEED)) as url:
        yield url


def _app(config: ClusterConfig, url: str) -> CockpitApp:
    return CockpitApp(config, connect=False, api_url=url)


async def _until(pilot: Any, done: Any, seconds: float) -> None:
    deadline = time.monotonic() + seconds
    while not done():
        assert time.monotonic() < deadline, "timed out"
        await pilot.pause(0.05)


def _screen(app: CockpitApp) -> str:
    """The text of every Static of the pane, rendered at 158 columns (also what is scrolled away)."""
    console = Console(file=io.StringIO(), width=158, color_system=None,
                      theme=Theme({role: "none" for role in ROLES}))
    for widget in app.query_one(BenchPane).query(Static):
        console.print(widget.content)
    return console.file.getvalue()  # type: ignore[attr-defined]


async def test_records_go_to_the_state_directory_not_the_checkout(fixed_config: ClusterConfig,
                                                                   engine_url: str) -> None:
    app = _app(fixed_config, engine_url)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("8")
        pane = app.query_one(BenchPane)
        out = pane.options().out
        results = Path(os.environ["XDG_STATE_HOME"]) / "r37-cockpit" / "bench" / "results"
        assert out is not None and out.parent == results and not out.exists()
        assert not out.is_relative_to(Path.cwd())
        assert f"Records: {results}/<UTC time>/" in _screen(app).replace("\n", "")


async def test_a_quick_run_completes_and_shows_the_summary(fixed_config: ClusterConfig, engine_url: str,
                                                           tmp_path: Path) -> None:
    app = _app(fixed_config, engine_url)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("8")
        pane = app.query_one(BenchPane)
        assert pane.shown and pane.suite == "quick"
        pane.results_base = tmp_path
        await pilot.press("r")
        await _until(pilot, lambda: pane.phase in ("running", "finished", "refused"), 20)
        assert pane.phase != "refused", pane.refusal
        await _until(pilot, lambda: pane.cell is not None and pane.last, 20)
        running = _screen(app)
        assert "elapsed" in running and "ETA" in running and "last requests" in running
        await _until(pilot, lambda: pane.phase == "finished", 240)
        assert pane.summary is not None and pane.summary.status == "complete", pane.summary
        assert pane.out is not None and pane.out.parent == tmp_path / "bench" / "results"
        assert json.loads((pane.out / "summary.json").read_text())["status"] == "complete"
        shown = _screen(app)
        for text in ("benchmark complete", "Decode", "headline", "Prefill", "Needle", "Vision and tools 6/7",
                     "Compared with the recipe card", str(pane.out)):
            assert text in shown, text
        assert "extra tool returned" in shown          # the failed check's reason
        await pilot.press("p")
        plots = _screen(app)
        assert "Per-stream decode against concurrency" in plots and "Prefill rate against context" in plots
        assert "█" in plots


async def _busy(client: ApiClient) -> asyncio.Task[Any]:
    # at SPEED the engine decodes ~2000 tok/s: this runs for minutes, and is cancelled at the test's end
    return await busy_request(client, SERVED_MODEL, 400_000)  # type: ignore[no-any-return]


async def test_a_busy_api_is_refused_and_nothing_started(fixed_config: ClusterConfig, engine_url: str,
                                                         tmp_path: Path) -> None:
    async with ApiClient(engine_url) as client:
        task = await _busy(client)
        try:
            app = _app(fixed_config, engine_url)
            async with app.run_test(size=SIZE) as pilot:
                await pilot.press("8")
                pane = app.query_one(BenchPane)
                pane.results_base = tmp_path
                assert not task.done(), "the busy request ended before the benchmark was started"
                await pilot.press("r")
                await _until(pilot, lambda: pane.phase not in ("idle", "checking"), 20)
                assert pane.phase == "refused" and pane.refusal is not None
                assert pane.refusal.code == "bench-busy"
                shown = _screen(app)
                assert "benchmark refused: the API is busy: 1 running" in shown
                assert "remedy: Wait until the other requests are done" in shown
                assert not (tmp_path / "bench").exists()
        finally:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task


async def test_cancel_keeps_the_records_marked_cancelled(fixed_config: ClusterConfig, engine_url: str,
                                                         tmp_path: Path) -> None:
    app = _app(fixed_config, engine_url)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("8")
        pane = app.query_one(BenchPane)
        pane.results_base = tmp_path
        await pilot.press("r")
        await _until(pilot, lambda: isinstance(pane.cell, CellStarted) and pane.cell.cell == "prose C8", 60)
        await pilot.press("x")
        await _until(pilot, lambda: pane.phase == "finished", 30)
        assert pane.summary is not None and pane.summary.status == "cancelled"
        assert pane.out is not None
        summary = json.loads((pane.out / "summary.json").read_text())
        assert summary["status"] == "cancelled"
        assert (pane.out / "requests.jsonl").exists()
        assert "benchmark cancelled" in _screen(app)
    async with ApiClient(engine_url) as client:
        deadline = time.monotonic() + 3
        while (s := await read_sample(client)).running + s.waiting and time.monotonic() < deadline:
            await asyncio.sleep(0.05)
        assert s.running + s.waiting == 0


async def _choose(pilot: Any, repeat: str, depth: str) -> None:
    """o, then type the two fields (each cleared first) and Enter through them."""
    app = pilot.app
    await pilot.press("o")
    await pilot.pause()
    from textual.widgets import Input
    for selector, value in (("#bench-repeat", repeat), ("#bench-depth", depth)):
        field = app.screen.query_one(selector, Input)
        field.value = ""
        field.focus()
        await pilot.press(*value, "enter")
        await pilot.pause()


async def test_repeat_and_depth_reach_the_runner(fixed_config: ClusterConfig, engine_url: str,
                                                 tmp_path: Path) -> None:
    """The options chosen in the pane are the run's: the runner measures each cell twice and the depth
    cells given, and the run's config record says so (then the run is cancelled)."""
    app = _app(fixed_config, engine_url)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("8")
        pane = app.query_one(BenchPane)
        pane.results_base = tmp_path
        await _choose(pilot, "2", "0,1k")
        assert (pane.repeat, pane.depths) == (2, (0, 1024))
        assert "will run: r37-cockpit bench --suite quick --repeat 2 --depth 0,1k" in _screen(app)
        await pilot.press("r")
        await _until(pilot, lambda: pane.runner is not None or pane.phase == "refused", 60)
        assert pane.phase != "refused", pane.refusal
        runner = pane.runner
        assert runner is not None and (runner.repeat, runner.depths) == (2, (0, 1024))
        assert "repeat 2" in _screen(app) and "depth 0,1k" in _screen(app)
        await pilot.press("x")
        await _until(pilot, lambda: pane.phase == "finished", 60)
        assert pane.out is not None
        config = json.loads((pane.out / "config.json").read_text())
        assert config["repeat"] == 2 and config["depth"] == [0, 1024]


async def test_bad_options_are_said_and_change_nothing(fixed_config: ClusterConfig) -> None:
    app = CockpitApp(fixed_config, connect=False)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("8")
        pane = app.query_one(BenchPane)
        for repeat, depth, said in (("0", "", "--repeat takes 1 to 100, not 0"),
                                    ("two", "", "--repeat takes a whole number"),
                                    ("3", "8x", "--depth takes token counts like 0,8k,32k")):
            await _choose(pilot, repeat, depth)
            error = str(app.screen.query_one("#bench-options-error", Static).render())
            assert said in error, error
            assert app.screen is not app.screen_stack[0]          # the dialog stays open
            await pilot.press("escape")
            await pilot.pause()
        assert (pane.repeat, pane.depths) == (1, ())
        assert pane.options().repeat == 1 and pane.options().depths == ()
