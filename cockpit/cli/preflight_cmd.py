"""`r37-cockpit preflight`: run the recipe's host checks on every host (observes only) and print them
grouped like the preflight pane. Exit 0 if no check fails and none is unknown, 1 if one fails or cannot be
decided (unknown is never a pass), 2 for a bad --rank or --only. Everything a host printed is neutralised
before it reaches the terminal."""

from __future__ import annotations

import argparse
from collections.abc import Callable

from cockpit.cli.commands import SUMMARY
from cockpit.cli.common import (
    EXIT_FAILURE,
    EXIT_OK,
    add_json,
    check_ranks,
    load,
    print_json,
    remedy,
    run_async,
    table,
    usage_error,
)
from cockpit.config import ClusterConfig
from cockpit.hosts import Fleet
from cockpit.recipe.checks import PreflightFinished, Verdict, group_results, ranks_text
from cockpit.recipe.preflight import BY_ID, preflight_results, select
from cockpit.safetext import safe

SHOWN = {Verdict.PASS: "pass", Verdict.WARN: "WARN", Verdict.FAIL: "FAIL", Verdict.UNKNOWN: "unknown"}


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("preflight", help=SUMMARY["preflight"],
                       description="Run the preflight checks of the R37 recipe (steps 1-6) on every host in "
                                   "parallel over SSH and print them grouped by result. Nothing on the hosts "
                                   "is changed. Exit 0 only if no check fails and none is unknown, 1 if "
                                   "one fails or cannot be decided (unknown is never a pass), 2 for a bad "
                                   "--rank or --only. Check ids: "
                                   + ", ".join(BY_ID) + ".")
    add_json(p)
    p.add_argument("--rank", type=int, action="append", metavar="N",
                   help="only this rank (repeatable; cross-host comparisons then cover only these ranks)")
    p.add_argument("--only", metavar="ID,…", help="only these check ids (comma-separated)")
    p.set_defaults(func=run)


async def _run(config: ClusterConfig, only: list[str] | None, ranks: list[int] | None) -> PreflightFinished:
    async with Fleet(config) as fleet:
        return await preflight_results(fleet, config, only=only, ranks=ranks)


def _as_is(text: str) -> str:
    return text


def render(final: PreflightFinished, fix: Callable[[str], str] = _as_is) -> str:
    """The grouped table, then the remedy of every row that is not a pass (through `fix`: the quoted
    cockpit commands made to work with this config), then which checks are unknown and why. Host text is
    neutralised."""
    rows = group_results(final.results)
    lines = [table([[str(r.step), r.check, SHOWN[r.verdict], ranks_text(r.ranks), safe(r.value, 300)]
                    for r in rows], ["STEP", "CHECK", "RESULT", "RANKS", "OBSERVED"])]
    todo = [r for r in rows if r.verdict is not Verdict.PASS and r.remedy]
    if todo:
        lines.append("")
        by_key = {(x.check, x.rank): x for x in final.results}
        for r in todo:
            remedies: dict[str, list[int]] = {}
            for rank in r.ranks:
                remedies.setdefault(by_key[(r.check, rank)].remedy, []).append(rank)
            for text, ranks in remedies.items():
                lines.append(f"{r.check} (rank {ranks_text(ranks)}): {safe(fix(text))}")
    if final.unknown:
        lines.append("")
        lines.append(f"{len(final.unknown)} check(s) could not be decided — unknown is never a pass:")
        lines += [f"  unknown: {r.check} on rank {r.rank}: {safe(r.value, 300) or 'no answer'}"
                  for r in final.unknown]
    counts = {v: sum(1 for x in final.results if x.verdict is v) for v in Verdict}
    lines.append("")
    lines.append(f"{counts[Verdict.PASS]} passed, {counts[Verdict.FAIL]} failed, {counts[Verdict.WARN]} "
                 f"warnings, {counts[Verdict.UNKNOWN]} unknown in {final.elapsed:.1f} s")
    return "\n".join(lines)


def run(args: argparse.Namespace) -> int:
    _, config = load(args)
    only = [x.strip() for x in args.only.split(",") if x.strip()] if args.only else None
    try:
        select(only)
    except KeyError as exc:
        raise usage_error(str(exc.args[0])) from None
    ranks = args.rank
    check_ranks(config, ranks)
    final = run_async(_run(config, only, ranks))
    if args.json:
        print_json({"ok": final.ok, "code": final.code, "elapsed": round(final.elapsed, 3),
                    "failed": len(final.failed), "unknown": len(final.unknown),
                    "results": [{**r.as_dict(), "remedy": remedy(args, r.remedy)} for r in final.results]})
    else:
        print(render(final, lambda text: remedy(args, text)))
    return EXIT_OK if final.ok else EXIT_FAILURE
