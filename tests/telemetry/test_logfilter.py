"""Log filters: regex and inverse, grep -C context with separators, incremental feeding, and the
signatures the caller gives (the TUI: the recipe's)."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from cockpit.telemetry.logfilter import (
    CONTEXT,
    MATCH,
    SEPARATOR,
    FilteredView,
    FilterError,
    LineFilter,
    Signatures,
    StreamFilter,
)
from cockpit.telemetry.logline import LogLine
from cockpit.tui.widgets.logview import recipe_signatures

T0 = 1_795_993_157_000_000_000


def lines_of(texts: list[str]) -> list[LogLine]:
    return [LogLine(T0 + i, 0, t) for i, t in enumerate(texts)]


def render(entries: list[tuple[LogLine | None, int]]) -> list[str]:
    marks = {MATCH: ":", CONTEXT: "-"}
    return ["--" if kind == SEPARATOR else f"{marks[kind]}{line.text}" for line, kind in entries]  # type: ignore[union-attr]


def test_parse_regex_inverse_and_smart_case() -> None:
    f = LineFilter.parse("nccl warn")
    assert f.keeps("NCCL WARN x") and not f.keeps("ok")       # lower case pattern ignores case
    g = LineFilter.parse("NCCL")
    assert not g.keeps("nccl") and g.keeps("NCCL")             # a capital makes it case-sensitive
    inv = LineFilter.parse("!INFO")
    assert inv.inverse and inv.keeps("WARNING x") and not inv.keeps("INFO y")


@pytest.mark.parametrize("bad", ["", "!", "(", "[a-"])
def test_bad_patterns_are_refused_with_a_reason(bad: str) -> None:
    with pytest.raises(FilterError):
        LineFilter.parse(bad)


def test_context_lines_and_separators_like_grep() -> None:
    texts = ["a", "b", "c", "HIT1", "d", "e", "f", "g", "h", "HIT2", "HIT3", "i", "j", "k"]
    out = StreamFilter(LineFilter.parse("HIT"), context=2).feed(lines_of(texts))
    assert render(out) == ["-b", "-c", ":HIT1", "-d", "-e", "--", "-g", "-h", ":HIT2", ":HIT3", "-i", "-j"]


def test_adjacent_groups_are_not_separated() -> None:
    texts = ["HIT", "a", "b", "HIT", "c"]
    out = StreamFilter(LineFilter.parse("HIT"), context=1).feed(lines_of(texts))
    assert render(out) == [":HIT", "-a", "-b", ":HIT", "-c"]


def test_no_context_means_matches_only() -> None:
    out = StreamFilter(LineFilter.parse("!x"), context=0).feed(lines_of(["x1", "y", "x2", "z"]))
    assert render(out) == [":y", ":z"]


def _grep(texts: list[str], pattern: str, ctx: int) -> list[str]:
    """A reference grep -C implementation (index based)."""
    hits = [i for i, t in enumerate(texts) if re.search(pattern, t)]
    keep = sorted({j for i in hits for j in range(max(0, i - ctx), min(len(texts), i + ctx + 1))})
    out: list[str] = []
    for n, j in enumerate(keep):
        if n and j != keep[n - 1] + 1 and ctx:
            out.append("--")
        out.append((":" if j in hits else "-") + texts[j])
    return out


@given(st.lists(st.sampled_from(["a", "b", "HIT"]), max_size=60), st.integers(0, 4),
       st.lists(st.integers(1, 10), max_size=10))
def test_incremental_feeding_equals_grep(texts: list[str], ctx: int, cuts: list[int]) -> None:
    view = FilteredView(LineFilter.parse("HIT"), ctx)
    lines = lines_of(texts)
    pos = 0
    for c in cuts:  # fed in arbitrary chunks, as batches arrive
        view.feed(lines[pos:pos + c])
        pos += c
    view.feed(lines[pos:])
    got = render(list(zip(view.lines, view.kinds, strict=True)))
    assert got == _grep(texts, "HIT", ctx)
    assert view.matches == texts.count("HIT")


def test_trim_drops_entries_that_left_the_source() -> None:
    view = FilteredView(LineFilter.parse("HIT"), 1)
    lines = lines_of(["a", "HIT", "b", "c", "d", "HIT", "e"])
    view.feed(lines)
    kept = set(lines[4:])
    removed = view.trim(lambda ln: ln in kept)
    assert removed == 4  # a, HIT, b and the separator
    assert render(list(zip(view.lines, view.kinds, strict=True))) == ["-d", ":HIT", "-e"]


REAL_EXCERPT = """\
(EngineCore_DP0 pid=211) INFO 10-14 10:21:33 [parallel_state.py:11] DP group leader: node_rank=0, world_size=4
(Worker_TP0 pid=305) INFO 10-14 10:21:40 [engram.py:88] Engram DISK mode: layer 3 rows [0, 131072)
(Worker_TP0 pid=305) INFO 10-14 10:33:02 [default_loader.py:262] Loading weights took 641.20 seconds
(Worker_TP0 pid=305) INFO 10-14 10:33:05 [gpu_model_runner.py:2000] Model loading took 118.9 GiB
spark-2:305:305 [0] NCCL WARN Call to ibv_modify_qp failed with 110 Connection timed out, on dev rocep1s0f0:1
Traceback (most recent call last):
RuntimeError: Engine core initialization failed. See root cause above. Failed core proc(s): {}
(APIServer pid=1) INFO:     Application startup complete.
(APIServer pid=1) INFO 10-14 10:35:10 [api_server.py:1100] Starting vLLM API server on http://0.0.0.0:8000
plain INFO line about nothing in particular
"""


def test_signatures_classify_real_lines_by_the_recipes_rules() -> None:
    sig = recipe_signatures()
    kinds = [sig.classify(t) for t in REAL_EXCERPT.splitlines()]
    assert kinds == ["phase"] * 4 + ["failure"] * 3 + ["phase", "phase", None]
    # the API server's lines are the head's phases: on a worker's rank they are plain lines
    assert [sig.classify(t, rank=2) for t in REAL_EXCERPT.splitlines()[7:9]] == [None, None]


def test_first_failure_from_a_start_index() -> None:
    sig = recipe_signatures()
    lines: list[LogLine | None] = [*lines_of(REAL_EXCERPT.splitlines())]
    lines.insert(1, None)  # a separator is skipped
    assert sig.first_failure(lines) == 5
    assert sig.first_failure(lines, 6) == 6
    assert sig.first_failure(lines, 8) is None


def test_signatures_know_only_the_rules_they_are_given() -> None:
    """No built-in list behind the caller's back: a line is a failure or a phase by the given rules alone."""
    sig = Signatures(lambda text: "boom" if "BOOM" in text else None,
                     lambda text, rank: "up" if text == "UP" and rank == 1 else None)
    assert sig.classify("x NCCL WARN y") is None
    assert sig.classify("Traceback (most recent call last):") is None
    assert sig.classify("a BOOM here") == "failure" and sig.classify("UP", rank=1) == "phase"
    assert sig.classify("UP", rank=0) is None
    assert sig.first_failure(lines_of(["fine", "NCCL WARN", "BOOM"])) == 2


def test_the_log_filter_imports_nothing_of_the_recipe() -> None:
    """telemetry sits below recipe: the signatures come from the caller, never from an import."""
    tree = ast.parse((Path(__file__).resolve().parents[2] / "cockpit/telemetry/logfilter.py").read_text())
    nodes = list(ast.walk(tree))
    imported = {alias.name for node in nodes if isinstance(node, ast.Import) for alias in node.names}
    imported |= {node.module or "" for node in nodes if isinstance(node, ast.ImportFrom)}
    assert imported and not {m for m in imported if m.startswith("cockpit.recipe") or m == "importlib"}
    assert not [n for n in nodes if isinstance(n, ast.Name) and n.id in ("__import__", "import_module")]


def test_recipe_rules_tell_benign_lines_and_roles_apart() -> None:
    sig = recipe_signatures()
    assert not sig.is_failure("[W] TCPStore recvValue failed (head not up yet), still retrying")  # benign
    assert sig.is_failure("[W] TCPStore recvValue failed: Connection reset by peer")
    assert sig.is_failure("(Worker_TP1 pid=9) ERROR 10-14 10:21:33 [core.py:1] ValueError: "
                          "No common block size")
    assert sig.classify("Worker ready; running headless", rank=2) == "phase"
    assert sig.classify("plain INFO line") is None
    lines = lines_of(["fine", "still fine", "[W] TCPStore recvValue failed, still retrying", "x NCCL WARN y"])
    assert sig.first_failure(lines) == 3


def test_probe_lines_are_the_marked_access_lines_only() -> None:
    from cockpit.constants import PROBE_QUERY
    from cockpit.telemetry.logfilter import is_probe_line

    for path in ("/health", "/v1/models", "/metrics"):
        assert is_probe_line(f'INFO:     127.0.0.1:44562 - "GET {path}?{PROBE_QUERY} HTTP/1.1" 200 OK')
        assert not is_probe_line(f'INFO:     127.0.0.1:44562 - "GET {path} HTTP/1.1" 200 OK')
    assert not is_probe_line('INFO:     127.0.0.1:5 - "POST /v1/chat/completions HTTP/1.1" 200 OK')
    assert not is_probe_line(f"a prompt that quotes {PROBE_QUERY} is not a probe")
