"""Summary, card comparison, --compare with ratios, markdown tables, suites and the records directory."""

from __future__ import annotations

import json
from dataclasses import asdict
from pathlib import Path
from typing import Any

import pytest

from cockpit.bench import prompts as P
from cockpit.bench.engine_metrics import spec_decode
from cockpit.bench.store import RunStore, StoreError, default_dir
from cockpit.bench.suite import K, parse_concurrency, plan_for
from cockpit.bench.summary import (
    FORMAT,
    CompareError,
    card_rows,
    compare_rows,
    figures,
    load_earlier,
    render_markdown,
)


def _summary(per: float = 50.0, agg: float = 230.0, status: str = "complete") -> dict[str, Any]:
    s: dict[str, Any] = {
        "format": FORMAT, "version": 1, "status": status, "reason": None, "suite": "quick", "model": "m",
        "requests": 9, "failed_requests": 0, "api_url": "http://x",
        "prompts": {"version": 1, "source": "p"},
        "headline_categories": ["prose", "coding"],
        "decode": [
            {"category": "prose", "concurrency": 1, "requests": 1, "failed": 0, "per_stream_tps": per,
             "ttft_s": 0.05, "aggregate_tps": per - 1, "completion_tokens": 400, "headline": True},
            {"category": "prose", "concurrency": 8, "requests": 8, "failed": 1, "per_stream_tps": None,
             "ttft_s": None, "aggregate_tps": None, "completion_tokens": None, "headline": True},
            {"category": "counting", "concurrency": 1, "requests": 1, "failed": 0, "per_stream_tps": 77.0,
             "ttft_s": 0.05, "aggregate_tps": 76.0, "completion_tokens": 600, "headline": False},
        ],
        "headline": [{"concurrency": 1, "categories": 1, "of": 2, "complete": False, "per_stream_tps": per,
                      "aggregate_tps": per - 1}],
        "prefill": [{"target_tokens": 32768, "prompt_tokens": 32800, "ttft_s": 2.0, "prefill_tps": 16400.0,
                     "ok": True}],
        "needle": [{"context_tokens": 8192, "prompt_tokens": 8200, "depth": 0.5, "passed": True,
                    "answer": "x"}],
        "checks": [{"name": "forced", "group": "tools", "passed": False, "reason": "extra tool returned"},
                   {"name": "auto", "group": "tools", "passed": True, "reason": "ok"},
                   {"name": "stripes", "group": "vision", "passed": True, "reason": "ok"}],
        "idle_probe": [{"name": "counting", "idle_s": 45, "decode_tps": 80.0, "back_to_back": False},
                       {"name": "counting", "idle_s": 0, "decode_tps": 75.0, "back_to_back": True}],
        "spec_decode": {"available": True, "acceptance_rate": 0.4, "mean_acceptance_length": 2.2,
                        "drafts": 9},
        "notes": ["left out: something"],
    }
    s["figures"] = figures(s)
    s["card"] = [asdict(r) for r in card_rows(s["figures"])]
    return s


def test_figures_have_stable_names_and_skip_what_is_missing() -> None:
    f = figures(_summary())
    assert f["decode.prose.c1.per_stream_tps"] == 50.0
    assert "decode.prose.c8.aggregate_tps" not in f          # the cell failed: no figure
    assert "headline.c1.per_stream_tps" not in f             # 1 of 2 categories: not the headline
    assert f["prefill.32768.prefill_tps"] == 16400.0
    assert f["checks.tools.passed"] == 1 and f["checks.vision.passed"] == 1 and f["checks.passed"] == 2
    assert f["idle_probe.counting.decode_tps"] == 80.0 and f["idle_probe.counting.back_to_back_tps"] == 75.0


def test_card_rows_put_the_reference_next_to_this_run() -> None:
    rows = {r.figure: r for r in card_rows(figures(_summary(per=50.5)))}
    assert rows["decode.prose.c1.per_stream_tps"].card == 50.50
    assert rows["decode.prose.c1.per_stream_tps"].ratio == 1.0
    assert rows["decode.prose.c8.aggregate_tps"].this_run is None
    assert rows["decode.prose.c8.aggregate_tps"].ratio is None
    assert rows["checks.passed"].card == 6
    # A count reads as one in every face: "tools passed (of 4): 1 vs 3", never "1.00 vs 3".
    assert rows["checks.tools.passed"].this_run == 1 and type(rows["checks.tools.passed"].this_run) is int
    assert "| tools passed (of 4) | 3 | 1 | 0.333 |" in render_markdown(_summary())
    assert type(rows["decode.prose.c1.per_stream_tps"].this_run) is float


def test_compare_gives_the_ratio_of_every_shared_figure(tmp_path: Path) -> None:
    earlier = _summary(per=40.0)
    (tmp_path / "summary.json").write_text(json.dumps(earlier))
    loaded = load_earlier(tmp_path)
    rows = {r.figure: asdict(r) for r in compare_rows(figures(_summary(per=50.0)), loaded)}
    assert rows["decode.prose.c1.per_stream_tps"] == {"figure": "decode.prose.c1.per_stream_tps",
                                                      "earlier": 40.0, "this_run": 50.0, "ratio": 1.25}


@pytest.mark.parametrize(("content", "reason"), [(None, "No such file"), ("{", "not JSON"),
                                                 ('{"format": "x"}', "not a benchmark summary")])
def test_compare_refuses_what_is_not_a_summary(tmp_path: Path, content: str | None, reason: str) -> None:
    if content is not None:
        (tmp_path / "summary.json").write_text(content)
    with pytest.raises(CompareError, match=reason):
        load_earlier(tmp_path)


def test_markdown_has_the_card_tables() -> None:
    earlier = _summary(per=40.0)
    earlier["_source"] = "bench/results/old"
    s = _summary()
    s["compare"] = {"source": "bench/results/old",
                    "rows": [asdict(r) for r in compare_rows(s["figures"], earlier)]}
    md = render_markdown(s)
    assert "| prose | 50.00 | 1/8 failed |" in md
    assert "| counting (ceiling) | 77.00 |" in md
    assert "mean of 1 of 2 (not the headline)" in md
    assert "| 32768 | 32800 | 2.000 | 16400.00 |" in md
    assert "| forced | tools | FAIL | extra tool returned |" in md
    assert "| single-stream decode, prose (tok/s) | 50.50 | 50.00 | 0.990 |" in md
    assert "## Compared with bench/results/old" in md
    assert "| decode.prose.c1.per_stream_tps | 40.00 | 50.00 | 1.250 |" in md
    assert "did not complete" not in md
    assert "did not complete" in render_markdown(_summary(status="cancelled"))


def test_spec_decode_over_the_run() -> None:
    before = "vllm:spec_decode_num_drafts_total 10\nvllm:spec_decode_num_draft_tokens_total 30\n" \
             "vllm:spec_decode_num_accepted_tokens_total 12\njunk line\n"
    after = ('vllm:spec_decode_num_drafts_total{engine="0"} 110\n'
             "vllm:spec_decode_num_draft_tokens_total 330\nvllm:spec_decode_num_accepted_tokens_total 132\n")
    s = spec_decode(before, after)
    assert s["available"] and s["acceptance_rate"] == 0.4 and s["mean_acceptance_length"] == 2.2
    assert spec_decode(None, after)["available"] is False
    assert spec_decode("", "")["available"] is False


def test_suites() -> None:
    ps = P.load()
    quick = plan_for("quick", ps)
    assert quick.categories == ("prose", "coding", "json") and quick.concurrency == (1, 8)
    assert quick.prefill_sizes == (32 * K,) and quick.needles == ((8 * K, 0.5),) and not quick.idle_probe
    std = plan_for("standard", ps)
    assert len(std.categories) == 8 and std.concurrency == (1, 2, 4, 8) and std.ceiling == ("counting",)
    assert len(std.decode_cells()) == 33 and std.idle_probe
    assert std.prefill_sizes == (K, 8 * K, 32 * K, 128 * K)
    capped = std.capped(40_000)
    assert capped.prefill_sizes == (K, 8 * K, 32 * K) and any("prefill 128k" in s for s in capped.skipped)
    assert plan_for("full", ps, (2, 16)).ceiling_concurrency == (2, 16)
    assert parse_concurrency("8,1,2,2") == (1, 2, 8)
    for bad in ("0", "a,b", "", "1,300"):
        with pytest.raises(ValueError):
            parse_concurrency(bad)


def test_records_directory_is_never_overwritten(tmp_path: Path) -> None:
    store = RunStore(tmp_path / "a" / "run")
    store.write_json("summary.json", {"x": 1})
    store.write_text("summary.json", "again")      # our own file within the run: replaced atomically
    assert (tmp_path / "a" / "run" / "summary.json").read_text() == "again"
    with pytest.raises(StoreError, match="exists"):
        RunStore(tmp_path / "a" / "run")
    d = default_dir(tmp_path, now=0)
    assert d == tmp_path / "bench" / "results" / "1970-01-01T00-00-00Z"
