"""Where `r37-cockpit bench` keeps its records (issue 25): by default under the state directory, never in
the current directory (a checkout collected untracked `bench/results/`); `--compare` finds earlier runs
there by name or as `latest`, and `--report-only` without `--out` writes there too. Against the simulated
engine served alone (`--api-url`)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from cockpit.bench.store import default_dir, find_run
from cockpit.cli import main
from cockpit.locations import bench_results_dir
from cockpit.sim.engine.spawn import ready_engine


@pytest.fixture(scope="module")
def engine_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    log = tmp_path_factory.mktemp("engine") / "engine.log"
    with ready_engine(log, "--speed", "20") as url:
        yield url


@pytest.fixture
def places(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, Path]:
    """(the state directory's bench/results, an empty current directory)."""
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    cwd = tmp_path / "checkout"
    cwd.mkdir()
    monkeypatch.chdir(cwd)
    return tmp_path / "state" / "r37-cockpit" / "bench" / "results", cwd


def test_the_default_records_directory_is_the_state_directory(places: tuple[Path, Path]) -> None:
    results, cwd = places
    assert bench_results_dir() == results
    assert default_dir(now=0) == results / "1970-01-01T00-00-00Z"
    assert not default_dir().is_relative_to(cwd)


def _bench(capsys: pytest.CaptureFixture[str], *args: str) -> dict[str, object]:
    assert main(["bench", *args, "--json"]) == 0, capsys.readouterr().err
    out: dict[str, object] = json.loads(capsys.readouterr().out)
    return out


def test_runs_compares_and_reports_live_in_the_state_directory(engine_url: str, places: tuple[Path, Path],
                                                               capsys: pytest.CaptureFixture[str]) -> None:
    results, cwd = places
    quick = ("--api-url", engine_url, "--suite", "quick", "--concurrency", "1", "--idle", "0")
    first = Path(str(_bench(capsys, *quick)["records"]))
    assert first.parent == results and (first / "summary.json").is_file()
    assert list(cwd.iterdir()) == []                           # nothing written where it was started

    second = _bench(capsys, *quick, "--compare", "latest")    # the newest run in the state directory
    compare = second["compare"]
    assert isinstance(compare, dict) and compare["source"] == str(first / "summary.json")
    assert Path(str(second["records"])).parent == results

    report = _bench(capsys, "--report-only", "--compare", str(second["records"]), "--compare", first.name)
    made = Path(str(report["records"]))
    assert made.parent == results and (made / "summary.md").is_file() and (made / "report.html").is_file()
    assert f"## Compared with {first / 'summary.json'}" in (made / "summary.md").read_text()
    assert list(cwd.iterdir()) == []


def test_a_compare_name_is_looked_for_where_it_was_given_first(places: tuple[Path, Path]) -> None:
    results, cwd = places
    (results / "2026-03-14T12-00-00Z").mkdir(parents=True)
    (cwd / "mine").mkdir()
    assert find_run("2026-03-14T12-00-00Z") == results / "2026-03-14T12-00-00Z"
    assert find_run("mine") == Path("mine")                   # a directory here wins
    assert find_run("absent") == Path("absent")              # the reader names what is missing
    assert find_run("latest") == results / "latest"          # no run with a summary yet
