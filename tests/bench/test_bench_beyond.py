"""The benchmark beyond one batch, without an engine: the statistics of ``--repeat`` (known data, known
mean, std and Student-t interval), the typed summary against the JSON main wrote (golden), the flags'
parsing, energy per token (unknown, never 0, without every rank's power), the HTML report (no URL
fetched, the model's text escaped) and ``--report-only`` over several records directories."""

from __future__ import annotations

import json
import math
import re
from dataclasses import replace
from html.parser import HTMLParser
from pathlib import Path

import pytest

from cockpit.bench.records import CellRepeats, DecodeCell, DepthCell
from cockpit.bench.report import render_html
from cockpit.bench.stats import spread, t_975
from cockpit.bench.suite import K, parse_depths, parse_repeat
from cockpit.bench.summary import BenchSummary, figures, render_markdown
from cockpit.bench.telemetry import CellTelemetry, RankTelemetry, TelemetrySource, energy, window_means
from cockpit.cli import main as cli_main
from cockpit.telemetry.cluster_stats import ClusterStats
from cockpit.telemetry.gpu import GpuReading

GOLDEN = Path(__file__).parent / "summary_v1_golden.json"
"""A summary.json as main's ``build_summary`` wrote it (before the typed summary), for one fixed run."""


def test_spread_of_known_data() -> None:
    sp = spread([1.0, 2.0, 3.0, 4.0, 5.0])
    assert sp is not None and sp.n == 5 and sp.mean == 3.0
    assert sp.std == pytest.approx(math.sqrt(2.5))                  # sample std (n - 1)
    half = 2.776 * math.sqrt(2.5) / math.sqrt(5)                    # t(0.975, 4) = 2.776
    assert sp.ci95_low == pytest.approx(3 - half) and sp.ci95_high == pytest.approx(3 + half)
    assert sp.to_dict() == {"n": 5, "mean": 3.0, "std": 1.5811, "ci95": [1.0371, 4.9629]}
    two = spread([50.0, 52.0, None])                                 # unknown values are left out
    assert two is not None and two.n == 2 and two.mean == 51.0
    assert two.ci95_high == pytest.approx(51 + 12.706 * math.sqrt(2) / math.sqrt(2))
    one = spread([7.0])
    assert one is not None and one.std is None and one.ci95_low is None
    assert spread([]) is None and spread([None, float("nan")]) is None


@pytest.mark.parametrize(("df", "t"), [(1, 12.706), (4, 2.776), (30, 2.042), (40, 2.021), (60, 2.000),
                                       (120, 1.980), (10_000, 1.960)])
def test_t_quantiles(df: int, t: float) -> None:
    assert t_975(df) == pytest.approx(t, abs=0.0015)


def test_the_typed_summary_writes_the_json_of_before() -> None:
    text = GOLDEN.read_text()
    golden = json.loads(text)
    typed = BenchSummary.from_dict(golden)
    assert json.dumps(typed.to_dict(), indent=2) + "\n" == text          # key for key, in order
    assert figures(typed) == golden["figures"]
    assert typed.decode[0].per_stream_tps == golden["decode"][0]["per_stream_tps"]
    assert typed.needle[0].answer == "<script>a1-b2</script>" and typed.checks[1].passed is False
    md = render_markdown(typed)
    assert md == render_markdown(golden)
    assert "| single-stream decode, prose (tok/s) | 50.50 |" in md
    assert "## Compared with /x/summary.json" in md


def test_from_dict_is_tolerant() -> None:
    s = BenchSummary.from_dict({"status": "complete",
                                "decode": [{"category": "prose", "concurrency": "x"}, 3],
                                "headline": "junk", "spec_decode": None, "figures": {"a": 1, "b": "x"}})
    assert s.decode[0].concurrency == 0 and s.headline == () and s.spec_decode.available is False
    assert s.figures == {"a": 1.0}


def test_repeats_keep_the_first_run_and_add_the_spread() -> None:
    runs = [DecodeCell("prose", 1, 1, 0, v, 0.05, v - 1, 400, True) for v in (50.0, 48.0, 49.0)]
    cell = replace(runs[0], repeats=CellRepeats.of(runs))
    d = cell.to_dict()
    assert d["per_stream_tps"] == 50.0                     # the card's method: the first run
    assert d["repeats"]["per_stream_tps"]["mean"] == 49.0 and d["repeats"]["n"] == 3
    assert [r["per_stream_tps"] for r in d["repeats"]["runs"]] == [50.0, 48.0, 49.0]
    assert "telemetry" not in d and "repeats" not in runs[0].to_dict()      # the old shape without them
    assert DecodeCell.from_dict(d).to_dict() == d
    s = BenchSummary("complete", None, "quick", "m", "http://x", 3, 0, decode=(cell,), repeat=3)
    figs = figures(s)
    assert figs["decode.prose.c1.per_stream_tps"] == 50.0
    assert figs["decode.prose.c1.per_stream_tps.mean"] == 49.0
    assert s.to_dict()["repeat"] == 3 and BenchSummary.from_dict(s.to_dict()).to_dict() == s.to_dict()
    assert "49.00 ± 1.00 (95 % CI 46.52–51.48)" in render_markdown(s)


def test_flags() -> None:
    assert parse_depths("0,8k,32k") == (0, 8 * K, 32 * K)
    assert parse_depths("2k, 1000,2k") == (2 * K, 1000)
    for bad in ("", "x", "-1", "2048k"):
        with pytest.raises(ValueError, match="--depth"):
            parse_depths(bad)
    assert parse_repeat("3") == 3
    for bad in ("0", "x", "101"):
        with pytest.raises(ValueError, match="--repeat"):
            parse_repeat(bad)


def test_energy_is_unknown_without_every_ranks_power_never_zero() -> None:
    both = (RankTelemetry(0, 3, 100.0, 2400.0, 1.0, 1.0), RankTelemetry(1, 3, 60.0, 2400.0, 1.0, 1.0))
    joules, why = energy(both, 10.0, 400)
    assert joules == pytest.approx(160 * 10 / 400) and why is None
    joules, why = energy((both[0], RankTelemetry(1, 0, None, None, None, None)), 10.0, 400)
    assert joules is None and why == "no power reading from rank 1"
    assert energy(both, 10.0, None) == (None, "no tokens generated")
    t = CellTelemetry(0.0, 10.0, (both[0], RankTelemetry(1, 0, None, None, None, None)), None, None, 400,
                      None, "no power reading from rank 1")
    assert "| unknown |" in render_markdown(BenchSummary("complete", None, "q", "m", "u", 1, 0, decode=(
        DecodeCell("prose", 1, 1, 0, 50.0, 0.1, 49.0, 400, True, telemetry=t),)))


async def test_telemetry_reads_the_samplers_window() -> None:
    """The sampler's model for two ranks: rank 0 with power and clocks, rank 1 without a GPU reading."""
    stats = ClusterStats([0, 1], 0.05)
    source = TelemetrySource(stats, None, 0.05)
    source.begin()
    import time
    for _ in range(3):
        now = time.time()
        stats.update(0, gpu=GpuReading(util=90, sm=2400, power_w=80.0, temp_c=60), gpu_at=now)
        stats.record(0, now)
        stats.record(1, now)
    cell = await source.end(300)
    r0, r1 = cell.ranks
    assert r0.power_w == 80.0 and r0.sm_mhz == 2400 and r0.samples >= 3
    assert r1.power_w is None and r1.sm_mhz is None
    assert cell.energy_j_per_token is None and cell.energy_unknown == "no power reading from rank 1"
    assert cell.kv_cache_pct_max is None and cell.to_dict()["kv_cache_pct_max"] is None


class _Tags(HTMLParser):
    """Every element and attribute name of a page."""

    def __init__(self) -> None:
        super().__init__()
        self.names: set[str] = set()
        self.attrs: set[str] = set()

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.names.add(tag)
        self.attrs |= {name for name, _ in attrs}


HOSTILE = '<script>alert("x")</script><img src=x onerror=alert(1)>'


def _hostile_summary() -> BenchSummary:
    golden = json.loads(GOLDEN.read_text())
    golden["model"] = HOSTILE
    golden["needle"][0]["answer"] = HOSTILE
    golden["notes"] = [HOSTILE]
    golden["depth"] = [DepthCell(8 * K, 8201, 380, 44.1, 2.1, True).to_dict()]
    return BenchSummary.from_dict(golden)


def test_the_html_report_fetches_nothing_and_escapes_the_engines_text() -> None:
    page = render_html(_hostile_summary())
    assert page.startswith("<!DOCTYPE html>") and "<svg" in page
    assert "<script" not in page.lower() and "<img" not in page.lower()
    assert "&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt;" in page
    tags = _Tags()
    tags.feed(page)
    # no script, img, link, iframe, object …: only these elements and attributes
    assert tags.names <= {"html", "head", "meta", "title", "style", "body", "h1", "h2", "h3", "p", "b",
                          "table", "thead", "tbody", "tr", "th", "td", "ul", "li", "figure", "svg", "text",
                          "line", "rect", "path"}, tags.names
    assert tags.attrs <= {"lang", "charset", "class", "width", "height", "role", "aria-label", "x", "y", "x1",
                          "y1", "x2", "y2", "font-size", "font-weight", "text-anchor", "fill", "stroke",
                          "d"}, tags.attrs
    assert "url(" not in page and "@import" not in page
    # the only URL-looking text is the run's own (redacted) API address, shown as text
    assert {m for m in re.findall(r"[a-z]+://[^\s<\"']+", page)} == {"http://u:***@127.0.0.1:8000/v1."}
    assert "Decode at depth" in page and "8k" in page


def test_report_only_compares_several_runs(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    golden = json.loads(GOLDEN.read_text())
    dirs = []
    for i, factor in enumerate((1.0, 0.9, 0.8)):
        d = tmp_path / f"run{i}"
        d.mkdir()
        g = dict(golden, started_at=1000.0 + i,
                 figures={k: v * factor for k, v in golden["figures"].items()})
        (d / "summary.json").write_text(json.dumps(g))
        dirs.append(d)
    out = tmp_path / "cmp"
    args = ["bench", "--report-only", "--out", str(out)]
    for d in dirs:
        args += ["--compare", str(d)]
    assert cli_main(args) == 0
    md = (out / "summary.md").read_text()
    assert md.count("## Compared with ") == 3            # the card, then the two earlier runs
    for d in dirs[1:]:
        assert f"## Compared with {d / 'summary.json'}" in md
    assert "| decode.prose.c1.per_stream_tps | 44.10 | 49.00 | 1.111 |" in md
    page = (out / "report.html").read_text()
    assert page.count("<h2>Compared with ") == 3 and "<script" not in page
    assert cli_main(args) == 2                              # never into an existing directory
    capsys.readouterr()


def test_a_short_cell_takes_the_readings_still_current() -> None:
    times, values = [10.0, 11.0, 12.0], [80.0, None, 90.0]
    assert window_means(times, values, 10.5, 12.5) == (2, 90.0)            # the window's own
    assert window_means(times, values, 12.2, 12.4) == (0, None)            # none in it, no look back
    assert window_means(times, values, 12.2, 12.4, 3.0) == (3, 85.0)       # the current ones before it
    assert window_means(times, [None, None, None], 12.2, 12.4, 3.0) == (3, None)   # unknown, never 0


def test_one_compare_keeps_the_config_shape() -> None:
    from cockpit.cli.bench_cmd import _compares
    assert _compares(None) is None and _compares(["a"]) == "a" and _compares(["a", "b"]) == ("a", "b")
