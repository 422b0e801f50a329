"""`r37-cockpit setup JOB`: the recipe's setup steps on every host (they change hosts). Prints the exact
commands per host and asks before anything runs (`--yes` skips the question), then streams the job log and
progress (host text neutralised: `cockpit.safetext`): on a terminal one live line per rank
(`cockpit.cli.progress`) and each rank's outcome for good, every line with `-v`, a pipe or `--json`. Exit 0
only if every host ended done or had nothing to do; 1 if a host failed or could not be reached; 3 if the run
was not confirmed or a guard refused a host (and none failed); 2 for a bad --rank or a config that cannot
express the job (an unpinned revision with --offline)."""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
from collections.abc import Callable
from typing import Any, TextIO

from cockpit.cli.commands import SUMMARY
from cockpit.cli.common import (
    EXIT_FAILURE,
    EXIT_INTERRUPTED,
    EXIT_OK,
    EXIT_REFUSED,
    EXIT_USAGE,
    CliError,
    add_json,
    check_ranks,
    load,
    print_json,
    refuse_if_read_only,
    remedy,
    run_async,
    table,
)
from cockpit.cli.progress import LiveBlock, live_output
from cockpit.config import ClusterConfig
from cockpit.hosts import Fleet
from cockpit.recipe.checks import ranks_text
from cockpit.recipe.progress import human_eta, human_rate
from cockpit.recipe.setup import SetupRun, expand_jobs, plan_setup
from cockpit.recipe.setup_model import (
    JOB_TITLES,
    JOBS,
    JobLog,
    RankDone,
    RankState,
    SetupError,
    SetupFinished,
    SetupPlan,
    StepProgress,
    StepStarted,
)
from cockpit.safetext import neutralise, safe

PROGRESS_EVERY = 2.0   # seconds between two progress lines of a rank (plain output)
LIVE_EVERY = 0.25      # the same on a terminal's live line


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "setup", help=SUMMARY["setup"],
        description="Run one of the recipe's setup jobs (steps 2-5) on every host in parallel: "
                    + "; ".join(f"{j}: {t}" for j, t in JOB_TITLES.items())
                    + "; all: every job in that order. The exact commands per host are printed and "
                      "confirmed first. Re-running resumes: completed work is skipped. Exit 0 when every "
                      "host is done, 1 if one failed or is unreachable, 3 if not confirmed or refused.")
    p.add_argument("job", choices=[*JOBS, "all"])
    p.add_argument("--rank", type=int, action="append", metavar="N", help="only this rank (repeatable)")
    p.add_argument("-y", "--yes", action="store_true", help="do not ask before running (headless)")
    p.add_argument("-v", "--verbose", action="store_true",
                   help="print every log line and progress report (on a terminal the default is one line "
                        "per rank, updated in place; pipes and --json always get every line)")
    p.add_argument("--overwrite-env", action="store_true",
                   help="env: replace a cluster.env that differs from cluster.toml (its diff is printed)")
    p.add_argument("--offline", action="store_true",
                   help="checkpoint: do not ask the hub for the commit; [model] revision must be a commit")
    add_json(p)
    p.set_defaults(func=run)


def _as_is(text: str) -> str:
    return text


def render_plan(plan: SetupPlan, fix: Callable[[str], str] = _as_is) -> str:
    """Per job and rank: the commands, why there is nothing to do, or why it is refused (through `fix`:
    the quoted cockpit commands made to work with this config)."""
    lines = []
    for jp in plan.jobs:
        lines.append(f"== {jp.job}: {JOB_TITLES[jp.job]}")
        for rank in sorted(jp.ranks):
            rp = jp.ranks[rank]
            head = f"rank {rank} ({plan.targets.get(rank, '?')})"
            if rp.refused:
                lines.append(f"  {head}: {rp.refusal_label}: {safe(fix(rp.refused))}")
            elif not rp.steps:
                lines.append(f"  {head}: nothing to do: {safe(fix(rp.done))}")
            else:
                lines.append(f"  {head}:")
                lines += [f"    $ {neutralise(line)}" for step in rp.steps for line in step.lines]
            if rp.note:   # host text (a diff of the host's file): neutralised
                lines += [f"    | {neutralise(n)}" for n in rp.note.rstrip("\n").split("\n")]
    return "\n".join(lines)


def render_progress(ev: StepProgress) -> str:
    p = ev.progress
    parts = []
    if p.bytes_done is not None:
        from cockpit.recipe.checks import human_bytes
        total = f" / {human_bytes(p.bytes_total)}" if p.bytes_total else ""
        parts.append(f"{human_bytes(p.bytes_done)}{total}")
    if p.files_total:
        parts.append(f"{p.files_done}/{p.files_total} files")
    parts += [human_rate(p.rate), f"ETA {human_eta(p.eta)}"]
    return f"rank {ev.rank} {ev.job} | {ev.label}: " + ", ".join(parts)


def render_summary(final: SetupFinished, plan: SetupPlan, fix: Callable[[str], str] = _as_is) -> str:
    rows = [[o.job, str(o.rank), o.state.value.upper() if not o.ok else o.state.value, safe(fix(o.message))]
            for o in final.outcomes]
    out = [table(rows, ["JOB", "RANK", "RESULT", "DETAIL"])]
    bad = [o for o in final.outcomes if not o.ok]
    for o in bad:
        out.append(f"rank {o.rank} ({plan.targets.get(o.rank, '?')}) {o.job} {o.state.value}: "
                   f"{safe(fix(o.message))}")
    done = sum(1 for o in final.outcomes if o.ok)
    out.append(f"{done} of {len(final.outcomes)} ok in {final.elapsed:.1f} s"
               + (f"; not ok on rank {ranks_text(sorted({o.rank for o in bad}))}" if bad else ""))
    return "\n".join(out)


def exit_code(final: SetupFinished) -> int:
    """0 when every rank is done or had nothing to do; 1 when one failed (or its host could not be read);
    otherwise 3: a guard refused a rank (a different cluster.env, a non-empty Engram destination …)."""
    if final.ok:
        return EXIT_OK
    if any(o.state is RankState.FAILED for o in final.outcomes):
        return EXIT_FAILURE
    if any(o.state is RankState.REFUSED for o in final.outcomes):
        return EXIT_REFUSED
    return EXIT_FAILURE


def _ask(stream: TextIO) -> bool:
    print("Run these commands on the hosts? [y/N] ", end="", file=stream, flush=True)
    answer = sys.stdin.readline()
    return answer.strip().lower() in ("y", "yes")


def plan_dict(plan: SetupPlan, fix: Callable[[str], str]) -> dict[str, Any]:
    doc = plan.as_dict()
    for job in doc["jobs"]:
        for rank in job["ranks"]:
            rank["refused"], rank["done"] = fix(rank["refused"]), fix(rank["done"])
    return doc


async def _run(args: argparse.Namespace, config: ClusterConfig, jobs: list[str]) -> int:
    show = sys.stderr if args.json else sys.stdout

    def fix(text: str) -> str:
        return remedy(args, text)

    async with Fleet(config) as fleet:
        try:
            plan = await plan_setup(fleet, config, jobs, ranks=args.rank, overwrite_env=args.overwrite_env,
                                    online=not args.offline)
        except SetupError as exc:
            raise CliError(str(exc), EXIT_USAGE if exc.config_error else EXIT_FAILURE) from None
        print(render_plan(plan, fix), file=show, flush=True)
        if plan.runs_anything and not args.yes and not await asyncio.to_thread(_ask, show):
            hint = "" if sys.stdin.isatty() else " (add --yes to run without asking)"
            print(f"cancelled: nothing was run{hint}", file=show)
            if args.json:
                print_json({"ok": False, "cancelled": True, "plan": plan_dict(plan, fix), "outcomes": []})
            return EXIT_REFUSED
        run = SetupRun(fleet, plan)
        block = LiveBlock(show) if live_output(show, verbose=args.verbose, json=args.json) else None
        try:
            final = await _follow(run, fix, show, block)
        finally:
            if block is not None:
                block.close()
    assert final is not None
    if args.json:
        print_json({"ok": final.ok, "elapsed": round(final.elapsed, 3), "plan": plan_dict(plan, fix),
                    "outcomes": [{**o.as_dict(), "message": fix(o.message)} for o in final.outcomes]})
    else:
        print()
        print(render_summary(final, plan, fix))
    return exit_code(final)


async def _follow(run: SetupRun, fix: Callable[[str], str], show: TextIO,
                  block: LiveBlock | None) -> SetupFinished | None:
    """Print the run's events: every line to `show`, or (with a live `block`) each rank's latest log
    line, step or progress in place and only what each rank ended with for good."""
    last: dict[int, float] = {}
    every = PROGRESS_EVERY if block is None else LIVE_EVERY

    def line(rank: int, text: str, flush: bool = False) -> None:
        if block is None:
            print(text, file=show, flush=flush)
        else:
            block.update(rank, text)

    final: SetupFinished | None = None
    async for ev in run.events():
        if isinstance(ev, JobLog):
            line(ev.rank, f"rank {ev.rank} {ev.job} | {safe(ev.text)}", flush=True)
        elif isinstance(ev, StepStarted):
            line(ev.rank, f"rank {ev.rank} {ev.job} | step {ev.index + 1}/{ev.count}: {safe(ev.label)}")
        elif isinstance(ev, StepProgress):
            now = time.monotonic()
            if now - last.get(ev.rank, 0.0) >= every or ev.progress.eta == 0.0:
                last[ev.rank] = now
                line(ev.rank, render_progress(ev), flush=True)
        elif isinstance(ev, RankDone):
            done = f"rank {ev.rank} {ev.job} | {ev.state.value}: {safe(fix(ev.message))}"
            if block is None:
                print(done, file=show, flush=True)
            else:
                block.remove(ev.rank)
                block.print(done)
        elif isinstance(ev, SetupFinished):
            final = ev
    return final


def run(args: argparse.Namespace) -> int:
    _, config = load(args)
    refuse_if_read_only(args, config)
    check_ranks(config, args.rank)
    jobs = expand_jobs(args.job)
    try:
        return run_async(_run(args, config, jobs))
    except KeyboardInterrupt:
        print("interrupted: running commands were stopped; re-run to resume", file=sys.stderr)
        return EXIT_INTERRUPTED
