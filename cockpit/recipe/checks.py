"""Preflight check units and their results.

A `Check` keeps together what one recipe check needs: its id and recipe step, the commands it runs on a
rank (argv/ShellCommand per label), how the real output is judged (`evaluate` → `Outcome`), an optional
comparison across ranks (`compare`), and the remedy sentence. The definitions live in `checks_host`,
`checks_storage` and `checks_fabric`; `preflight.run_preflight` runs them.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from cockpit.config import ClusterConfig, HostEntry
from cockpit.errorcodes import check as check_code
from cockpit.hosts.shell import Cmd, as_command
from cockpit.recipe.parsers import Section


class Verdict(StrEnum):
    PASS = "pass"
    WARN = "warn"
    FAIL = "fail"
    UNKNOWN = "unknown"


SEVERITY = {Verdict.PASS: 0, Verdict.UNKNOWN: 1, Verdict.WARN: 2, Verdict.FAIL: 3}
# the stable error codes (cockpit.errorcodes) of the verdicts that block a launch: unknown is never a pass
VERDICT_CODES = {Verdict.FAIL: check_code("preflight-failed"),
                 Verdict.UNKNOWN: check_code("preflight-unknown")}


@dataclass(frozen=True)
class Outcome:
    """A check's judgement of one rank: verdict, the observed value, and a remedy when it is not a pass."""

    verdict: Verdict
    value: str
    remedy: str = ""
    detail: str = ""
    facts: Mapping[str, Any] = field(default_factory=dict)   # parsed values for comparisons across ranks


@dataclass(frozen=True)
class Probe:
    """What `evaluate` gets: the rank, its config, the framed output of every command run there, and the
    container IDs this cockpit's launch ledger records per rank (full IDs: whose engine a host runs)."""

    cfg: ClusterConfig
    rank: int
    sections: Mapping[str, Section]
    launched: Mapping[int, str] = field(default_factory=dict)

    @property
    def host(self) -> HostEntry:
        return self.cfg.host(self.rank)

    def section(self, label: str) -> Section | None:
        return self.sections.get(label)

    def output(self, label: str) -> str:
        s = self.sections.get(label)
        return s.output if s else ""

    def status(self, label: str) -> int | None:
        s = self.sections.get(label)
        return s.status if s else None


Commands = Callable[[ClusterConfig, int], dict[str, Cmd]]
Evaluate = Callable[[Probe], Outcome]
Compare = Callable[[ClusterConfig, dict[int, Outcome]], dict[int, Outcome]]


def _all_ranks(cfg: ClusterConfig, rank: int) -> bool:
    return True


@dataclass(frozen=True)
class Check:
    """One preflight check: command, parser/judgement and remedy together."""

    id: str
    step: int                      # the recipe walkthrough step it belongs to
    title: str
    commands: Commands             # label -> command, run on each rank the check applies to
    evaluate: Evaluate
    compare: Compare | None = None  # refine verdicts once every rank has reported (across hosts)
    applies: Callable[[ClusterConfig, int], bool] = _all_ranks
    own_channels: bool = False     # run each command on its own channel (probes that may time out)
    after_compare_only: bool = False  # report only once every rank has reported (pure cross-host checks)

    def command_lines(self, cfg: ClusterConfig, rank: int) -> dict[str, str]:
        return {label: as_command(cmd).line for label, cmd in self.commands(cfg, rank).items()}


@dataclass(frozen=True)
class CheckResult:
    """One check's verdict on one rank, as the pane and `preflight --json` show it."""

    check: str
    rank: int
    step: int
    title: str
    verdict: Verdict
    value: str
    remedy: str = ""
    detail: str = ""
    commands: tuple[str, ...] = ()
    raw: str = ""
    final: bool = True             # False: a cross-rank comparison may still refine it
    facts: Mapping[str, Any] = field(default_factory=dict, compare=False, repr=False)

    @property
    def code(self) -> str | None:
        """`preflight-failed` / `preflight-unknown` for a check that blocks a launch, else None."""
        return VERDICT_CODES.get(self.verdict)

    def as_dict(self) -> dict[str, Any]:
        return {"check": self.check, "rank": self.rank, "step": self.step, "title": self.title,
                "verdict": self.verdict.value, "code": self.code, "value": self.value,
                "remedy": self.remedy, "detail": self.detail, "commands": list(self.commands),
                "raw": self.raw}


@dataclass(frozen=True)
class CheckInfo:
    id: str
    step: int
    title: str
    ranks: tuple[int, ...]


@dataclass(frozen=True)
class PreflightStarted:
    checks: tuple[CheckInfo, ...]
    ranks: tuple[int, ...]


@dataclass(frozen=True)
class PreflightFinished:
    results: tuple[CheckResult, ...]
    elapsed: float

    @property
    def failed(self) -> tuple[CheckResult, ...]:
        return tuple(r for r in self.results if r.verdict is Verdict.FAIL)

    @property
    def unknown(self) -> tuple[CheckResult, ...]:
        """Checks that could not be decided (host down, no answer, unreadable output): never a pass."""
        return tuple(r for r in self.results if r.verdict is Verdict.UNKNOWN)

    @property
    def ok(self) -> bool:
        """No check failed and none is unknown (warnings do not block)."""
        return not self.failed and not self.unknown

    @property
    def code(self) -> str | None:
        """The stable error code of the whole run: `preflight-failed`, `preflight-unknown`, or None."""
        return "preflight-failed" if self.failed else "preflight-unknown" if self.unknown else None


PreflightEvent = PreflightStarted | CheckResult | PreflightFinished


def ranks_text(ranks: list[int] | tuple[int, ...]) -> str:
    """0,1,2,3 → '0-3'; 0,2,3 → '0,2-3' (clush style)."""
    out: list[str] = []
    rs = sorted(set(ranks))
    i = 0
    while i < len(rs):
        j = i
        while j + 1 < len(rs) and rs[j + 1] == rs[j] + 1:
            j += 1
        out.append(str(rs[i]) if i == j else f"{rs[i]}-{rs[j]}")
        i = j + 1
    return ",".join(out)


def majority(values: dict[int, Any]) -> tuple[Any, list[int]]:
    """The most common value (ties: the lowest rank's) and the ranks that hold a different one."""
    counts: dict[Any, list[int]] = {}
    for rank in sorted(values):
        counts.setdefault(values[rank], []).append(rank)
    best = max(counts.items(), key=lambda kv: (len(kv[1]), -kv[1][0]))[0]
    return best, [r for r in sorted(values) if values[r] != best]


def differs(outcomes: dict[int, Outcome], key: str, what: str, remedy: str) -> dict[int, Outcome]:
    """Fail the ranks whose `facts[key]` differs from the majority (ranks without the fact are left out;
    a rank that already fails keeps its own, more specific finding)."""
    values = {r: o.facts[key] for r, o in outcomes.items() if o.facts.get(key) is not None}
    if len(values) < 2:
        return {}
    _, odd = majority(values)
    if len(odd) * 2 == len(values):   # an even split names no majority: every rank is suspect
        odd = sorted(values)
    changed = {}
    for rank in odd:
        peers = [r for r in values if values[r] != values[rank]]
        o = outcomes[rank]
        if o.verdict is Verdict.FAIL:      # its own finding already says more
            continue
        changed[rank] = Outcome(Verdict.FAIL, f"{o.value} — {what} differs from rank {ranks_text(peers)} "
                                               f"({values[peers[0]]})", remedy, o.detail, o.facts)
    return changed


def human_bytes(n: float) -> str:
    """Decimal units like the card (510 GB, 48 GB); GiB for memory is done by the caller."""
    for unit in ("B", "kB", "MB", "GB", "TB", "PB"):
        if abs(n) < 1000 or unit == "PB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1000
    return f"{n:.1f} PB"


@dataclass(frozen=True)
class GroupRow:
    """Ranks that got the same answer to one check, as one row (clush style)."""

    check: str
    step: int
    title: str
    verdict: Verdict
    value: str
    ranks: tuple[int, ...]
    odd: bool              # the check's answers differ across ranks and this row is not the majority
    remedy: str = ""


# numbers, and hex IDs (a container's short ID differs on every rank)
_DIGITS = re.compile(r"\b[0-9a-f]{12,64}\b|\d+")


def group_results(results: list[CheckResult] | tuple[CheckResult, ...]) -> list[GroupRow]:
    """One row per check and distinct (verdict, value); passes whose values differ only in numbers
    (addresses, latencies, rank-numbered paths, container IDs) collapse into one row showing the lowest
    rank's value."""
    by_check: dict[str, list[CheckResult]] = {}
    for r in results:
        by_check.setdefault(r.check, []).append(r)
    rows: list[GroupRow] = []
    for check, items in by_check.items():
        items.sort(key=lambda r: r.rank)
        groups: dict[tuple[Verdict, str], list[CheckResult]] = {}
        shown: dict[tuple[Verdict, str], str] = {}
        for r in items:
            # passes that differ only in numbers (addresses, latencies, rank-numbered paths, container
            # IDs) are alike
            key = (r.verdict, _DIGITS.sub("#", r.value) if r.verdict is Verdict.PASS else r.value)
            groups.setdefault(key, []).append(r)
            shown.setdefault(key, r.value)
        biggest = max(len(g) for g in groups.values())
        for key, group in sorted(groups.items(), key=lambda kv: (-len(kv[1]), kv[1][0].rank)):
            verdict, value = key[0], shown[key]
            first = group[0]
            same = len({r.value for r in group}) == 1
            text = value if same or len(group) == 1 else f"{value} (rank {first.rank}; others alike)"
            odd = len(groups) > 1 and (len(group) < biggest or verdict is not Verdict.PASS)
            rows.append(GroupRow(check, first.step, first.title, verdict, text,
                                 tuple(r.rank for r in group), odd, first.remedy))
    return rows
