"""Headless `launch` and `setup` on a terminal: each rank's phase, progress or log line in its live row;
failures, verdicts and what each rank ended with printed for good; `-v` and pipes get every line."""

from __future__ import annotations

import argparse
import asyncio
import io

from test_progress_render import FakeTTY, screen

from cockpit.cli import build_parser
from cockpit.cli.launch_cmd import live_emitter
from cockpit.cli.progress import LiveBlock
from cockpit.cli.setup_cmd import _follow
from cockpit.recipe import timeline as T
from cockpit.recipe.phases import Phase
from cockpit.recipe.progress import Progress
from cockpit.recipe.setup_model import JobLog, RankDone, RankState, SetupFinished, StepProgress, StepStarted


def test_launch_events_become_one_row_per_rank_and_failures_stay() -> None:
    out = FakeTTY()
    block = LiveBlock(out, width=lambda: 100)
    emit = live_emitter(argparse.Namespace(config=None), block, t0=0.0)
    for rank in (1, 0):
        emit(T.VerdictChanged(T.ClusterVerdict("launching", f"launching: {2 - rank}/2 ranks started")))
        emit(T.RankLaunched(rank, "docker run …", f"{rank:012d}abcdef", at=1.0))
        emit(T.PhaseEntered(rank, Phase.LOADING, at=2.0))
    for done in range(1, 49):
        emit(T.ProgressChanged(1, done, 48, at=3.0))
        emit(T.ProgressChanged(0, done, 48, at=3.0))
    failure = T.Failure(rank=1, label="NCCL timeout", remedy="check the fabric", cause="peer \x1b[2Jgone",
                        context=(), at=9.0, source="log")
    emit(T.RankFailed(failure))
    emit(T.VerdictChanged(T.ClusterVerdict("down", "cluster down: rank 1 failed", 1, "relaunch")))
    rows = screen(out.getvalue())
    assert out.getvalue().count("loading weights") > 90   # every update drawn …
    assert [r for r in rows if "loading weights" in r] == ["[    3.0s] rank 0   loading weights 48/48"]
    assert rows[:4] == ["[    9.0s] rank 1 FAILED: NCCL timeout", "    cause: peer ␛[2Jgone",  # … once
                        "    remedy: check the fabric", "== cluster down: rank 1 failed"]
    assert rows[-1] == "[    9.0s] rank 1 FAILED: NCCL timeout"     # the launching count is gone …
    assert "== launching: 2/2 ranks started" in out.getvalue()            # … it was counted in place
    assert sum(r.startswith("== launching") for r in rows) == 0
    assert "\x1b[2J" not in out.getvalue()


class _Run:
    def __init__(self, events: list[object]):
        self._events = events

    async def events(self):  # type: ignore[no-untyped-def]
        for ev in self._events:
            yield ev


def _setup_events() -> list[object]:
    events: list[object] = []
    for rank in (0, 1):
        events.append(StepStarted("checkpoint", rank, 0, 2, "download", ("hf download …",)))
        events += [JobLog("checkpoint", rank, f"fetched shard {i}/40") for i in range(1, 41)]
        events.append(StepProgress("checkpoint", rank, "download", Progress(files_done=40, files_total=40,
                                                                            eta=0.0)))
    done = [RankDone("checkpoint", 0, RankState.DONE, "complete"),
            RankDone("checkpoint", 1, RankState.FAILED, "disk full")]
    return [*events, *done, SetupFinished(tuple(done), 3.0)]


def test_setup_keeps_a_live_row_per_rank_and_prints_only_the_outcomes() -> None:
    out = FakeTTY()
    block = LiveBlock(out, width=lambda: 100)
    final = asyncio.run(_follow(_Run(_setup_events()), lambda t: t, out, block))  # type: ignore[arg-type]
    assert final is not None and not final.ok
    assert screen(out.getvalue()) == ["rank 0 checkpoint | done: complete",
                                      "rank 1 checkpoint | failed: disk full"]
    assert out.getvalue().count("fetched shard 40/40") == 2


def test_setup_without_a_terminal_prints_every_line_as_before() -> None:
    out = io.StringIO()
    asyncio.run(_follow(_Run(_setup_events()), lambda t: t, out, None))  # type: ignore[arg-type]
    lines = out.getvalue().splitlines()
    assert len(lines) == 2 * (1 + 40 + 1) + 2 and "\x1b" not in out.getvalue()
    assert lines[1] == "rank 0 checkpoint | fetched shard 1/40"


def test_verbose_yes_and_out_have_short_options() -> None:
    parser = build_parser()
    for argv in (["launch", "-v", "-y"], ["setup", "all", "-v", "-y"], ["stop", "-y"]):
        args = parser.parse_args(argv)
        assert args.yes and getattr(args, "verbose", True)
    assert not parser.parse_args(["launch"]).verbose
    assert parser.parse_args(["bench", "-o", "runs/a"]).out == "runs/a"
