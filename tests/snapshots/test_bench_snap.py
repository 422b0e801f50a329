"""Snapshots of the Bench pane, fed fixed data (no server, no clock): a run in progress, the finished
summary with the card and an earlier run compared, the refusal when the API is busy, and the plots. The
matrix's scene (`scene`): the finished summary."""

from __future__ import annotations

from dataclasses import asdict
from pathlib import Path
from typing import Any

from cockpit.api.stream import StreamStats
from cockpit.bench.gate import REMEDY_BUSY, Refusal
from cockpit.bench.records import RequestRecord
from cockpit.bench.runner import CellStarted, Note, RequestDone
from cockpit.bench.summary import BenchSummary, card_rows, compare_rows, figures
from cockpit.tui.app import CockpitApp
from cockpit.tui.panes.bench import BenchPane

SIZE = (160, 48)
OUT = Path("/srv/bench/results/2026-03-14T12-00-00Z")
STATE = Path("/srv/state")
MODEL = "deepseek-v4.1-flash"
CATS = ("prose", "coding", "json")


def _decode(cat: str, c: int, per: float, agg: float, ttft: float) -> dict[str, Any]:
    return {"category": cat, "concurrency": c, "requests": c, "failed": 0, "per_stream_tps": per,
            "ttft_s": ttft, "aggregate_tps": agg, "completion_tokens": 400 * c, "headline": True}


def finished_summary() -> dict[str, Any]:
    """A quick suite's summary as :func:`build_summary` makes it, with fixed figures."""
    decode = [_decode("prose", 1, 50.12, 49.80, 0.052), _decode("prose", 8, 29.31, 227.46, 0.118),
              _decode("coding", 1, 49.87, 49.51, 0.049), _decode("coding", 8, 29.05, 225.90, 0.121),
              _decode("json", 1, 50.44, 50.02, 0.047), _decode("json", 8, 29.62, 229.11, 0.115)]
    s: dict[str, Any] = {
        "format": "r37-cockpit.bench.summary", "version": 1, "status": "complete", "reason": None,
        "suite": "quick", "model": MODEL, "api_url": "http://127.0.0.1:8000", "requests": 27,
        "failed_requests": 0, "decode": decode,
        "headline": [{"concurrency": 1, "categories": 3, "of": 8, "complete": False,
                      "per_stream_tps": 50.1433, "aggregate_tps": 49.7767},
                     {"concurrency": 8, "categories": 3, "of": 8, "complete": False,
                      "per_stream_tps": 29.3267, "aggregate_tps": 227.49}],
        "headline_categories": ["coding", "json", "narrative", "prose", "math", "reasoning", "summary",
                                "format"],
        "prefill": [{"target_tokens": 32768, "prompt_tokens": 32741, "ttft_s": 10.412, "prefill_tps": 3144.55,
                     "ok": True, "error": None}],
        "needle": [{"context_tokens": 8192, "prompt_tokens": 8170, "depth": 0.5, "passed": True,
                    "secret": "a1b2c3-d4e5f6", "answer": "a1b2c3-d4e5f6", "error": None}],
        "checks": [{"name": n, "group": g, "passed": p, "reason": r} for n, g, p, r in (
            ("stripes", "vision", True, "answered red, green, blue"),
            ("two images", "vision", True, "told the two apart"),
            ("grid", "vision", True, "named all four quadrants"),
            ("auto", "tools", True, "called get_weather"),
            ("round trip", "tools", True, "used the tool result"),
            ("parallel", "tools", True, "two calls in one answer"),
            ("forced", "tools", False, "extra tool returned: get_weather after the forced lookup"))],
        "idle_probe": [], "spec_decode": {"available": True, "acceptance_rate": 0.712,
                                          "mean_acceptance_length": 2.84, "drafts": 1200},
        "notes": [],
    }
    figs = figures(s)
    s["figures"] = figs
    s["card"] = [asdict(r) for r in card_rows(figs)]
    earlier = {"figures": {k: v * 1.04 for k, v in figs.items()}}
    s["compare"] = {"source": "/srv/bench/results/2026-03-01T09-30-00Z/summary.json", "started_at": None,
                    "rows": [asdict(r) for r in compare_rows(figs, earlier)[:6]]}
    return s


def _done(n: int, done: int, cell: str, c: int, tps: float) -> RequestDone:
    rec = RequestRecord(n, "decode", cell, cell.split()[0], c, 400, 1200, "Write", ok=True, prompt_tokens=310,
                        completion_tokens=400)
    rec.stats = StreamStats(t_start=0.0, t_first_token=0.05, t_end=0.05 + 399 / tps, completion_tokens=400,
                            chunks=200, max_gap_s=0.05, mean_gap_s=0.02)
    return RequestDone(cell, rec, done, 27, 61.0, 95.0)


async def _open(app: CockpitApp, pilot) -> BenchPane:  # type: ignore[no-untyped-def]
    app.action_show_pane("bench")
    await pilot.pause()
    return app.query_one(BenchPane)


async def _running(app: CockpitApp, pilot) -> None:  # type: ignore[no-untyped-def]
    pane = await _open(app, pilot)
    pane.begin()
    pane.feed(Note("--api-url: the cluster's ranks are not looked at, only the API", warning=False))
    pane.started(f"{MODEL} at http://127.0.0.1:8000", OUT)
    pane.feed(CellStarted("prose C8", 2, 9, 8, 58.0))
    for i in range(5):
        pane.feed(_done(3 + i, 2 + i, "prose C8", 8, 29.0 + i / 10))
    await pilot.pause()


async def _finished(app: CockpitApp, pilot, *, plots: bool = False) -> None:  # type: ignore[no-untyped-def]
    pane = await _open(app, pilot)
    pane.begin()
    pane.finish(BenchSummary.from_dict(finished_summary()), OUT)
    if plots:
        pane.action_toggle_plots()
    await pilot.pause()


def test_bench_running(snap_compare, fixed_config) -> None:
    app = CockpitApp(fixed_config, connect=False)
    assert snap_compare(app, terminal_size=SIZE, run_before=lambda pilot: _running(app, pilot))


def test_bench_finished_with_the_card(snap_compare, fixed_config) -> None:
    app = CockpitApp(fixed_config, connect=False)
    assert snap_compare(app, terminal_size=SIZE, run_before=lambda pilot: _finished(app, pilot))


def test_bench_refused_when_busy(snap_compare, fixed_config) -> None:
    app = CockpitApp(fixed_config, connect=False)

    async def before(pilot) -> None:  # type: ignore[no-untyped-def]
        pane = await _open(app, pilot)
        pane.begin()
        pane.refuse(Refusal("the API is busy: 1 running, 0 waiting (the figures would not be comparable)",
                            REMEDY_BUSY, "bench-busy"))
        await pilot.pause()

    assert snap_compare(app, terminal_size=SIZE, run_before=before)


def test_bench_plots(snap_compare, fixed_config) -> None:
    app = CockpitApp(fixed_config, connect=False)
    assert snap_compare(app, terminal_size=SIZE, run_before=lambda pilot: _finished(app, pilot, plots=True))


def test_bench_plots_at_80x24(snap_compare, fixed_config) -> None:
    app = CockpitApp(fixed_config, connect=False)
    assert snap_compare(app, terminal_size=(80, 24),
                        run_before=lambda pilot: _finished(app, pilot, plots=True))


async def scene(app: CockpitApp, pilot) -> None:  # type: ignore[no-untyped-def]
    """The matrix's Bench state: a finished quick run with the card comparison."""
    await _finished(app, pilot)


def test_bench_options_chosen(snap_compare, fixed_config) -> None:
    """Repeat and depth chosen (`o`): the status line and the command line a start runs show them."""
    app = CockpitApp(fixed_config, connect=False)

    async def before(pilot) -> None:  # type: ignore[no-untyped-def]
        pane = await _open(app, pilot)
        pane.results_base = STATE          # the records' place shown: fixed, not the test's tmp dir
        pane._options_chosen((3, (0, 8192, 32768)))
        await pilot.pause()

    assert snap_compare(app, terminal_size=SIZE, run_before=before)


def test_bench_options_dialog_refuses_bad_input(snap_compare, fixed_config) -> None:
    """The options dialog with a bad depth: the CLI's message, the dialog still open."""
    app = CockpitApp(fixed_config, connect=False)

    async def before(pilot) -> None:  # type: ignore[no-untyped-def]
        pane = await _open(app, pilot)
        pane.results_base = STATE
        pane.refresh_view()
        await pilot.press("o")
        await pilot.pause()
        field = app.screen.query_one("#bench-depth")
        field.value = "0,8k,lots"  # type: ignore[attr-defined]
        field.focus()
        await pilot.press("enter")
        await pilot.pause()

    assert snap_compare(app, terminal_size=SIZE, run_before=before)
