"""Every preflight check judging output it does not expect (garbage, truncated, U+FFFD, huge, any exit
status) returns a verdict without raising, keeps what the host printed in the result's raw text, and the
text the cockpit shows of it holds no terminal control; the logs printer likewise."""

from __future__ import annotations

import io
import sys
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_prop_parsers import SAMPLES

from cockpit.cli.logs_cmd import Printer
from cockpit.cli.preflight_cmd import render
from cockpit.config import ClusterConfig, load_config
from cockpit.recipe.checks import Outcome, PreflightFinished, Probe, Verdict
from cockpit.recipe.parsers import Section
from cockpit.recipe.preflight import CHECKS, _evaluate, _result
from cockpit.telemetry.logfollow import FollowEvent
from cockpit.telemetry.logline import LogLine

FAST = settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
CFG: ClusterConfig = load_config(Path(__file__).parent.parent / "fixtures" / "cluster.toml")
CONTROL = {chr(c) for c in range(0x20) if c not in (0x0A,)} | {"\x7f"} | {chr(c) for c in range(0x80, 0xA0)}

text = st.one_of(st.text(max_size=300), st.sampled_from(sorted(SAMPLES.values())),
                 st.sampled_from(sorted(SAMPLES.values())).map(lambda s: s.replace("0", "\ufffd")),
                 st.integers(1, 3000).map(lambda n: "[" * n), st.just("\x1b]52;c;eA==\x07\x1b[2J"))
status = st.one_of(st.none(), st.integers(-1, 255))


@st.composite
def probes(draw: st.DrawFn) -> tuple[int, Probe]:
    """A check's index and a probe in which every command of it printed something arbitrary."""
    i = draw(st.integers(0, len(CHECKS) - 1))
    rank = draw(st.sampled_from(CFG.ranks))
    labels = CHECKS[i].commands(CFG, rank)
    secs = {label: Section(label, draw(text), draw(status)) for label in labels}
    return i, Probe(CFG, rank, secs, {})


def _clean(shown: str) -> None:
    assert not (set(shown) & CONTROL), repr(shown[:200])


@FAST
@given(probes())
def test_every_check_judges_any_output_without_raising(case: tuple[int, Probe]) -> None:
    i, probe = case
    check = CHECKS[i]
    out = check.evaluate(probe)       # not _evaluate: the check itself must not raise
    assert isinstance(out, Outcome) and isinstance(out.verdict, Verdict)
    lines = check.command_lines(CFG, probe.rank)
    res = _result(check, probe.rank, _evaluate(check, probe), lines, dict(probe.sections), True)
    for sec in probe.sections.values():
        assert sec.output[:1000].rstrip() in res.raw     # the raw text is kept (clipped when long)
    _clean(render(PreflightFinished((res,), 0.1)))


@FAST
@given(st.text(max_size=200), st.text(max_size=200))
def test_the_logs_printer_writes_no_control_characters(line: str, detail: str) -> None:
    out, err = io.StringIO(), io.StringIO()
    old = sys.stdout, sys.stderr
    sys.stdout, sys.stderr = out, err
    try:
        printer = Printer(json_out=False, flt=None, context=0)
        printer.lines([LogLine(1_796_117_380_000_000_000, 1, line)])
        printer.event(FollowEvent(1, "error", detail))
    finally:
        sys.stdout, sys.stderr = old
    _clean(out.getvalue().removesuffix("\n"))
    _clean(err.getvalue().removesuffix("\n"))
