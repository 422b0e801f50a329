"""The suites: which cells a run measures (``quick``, ``standard``, ``full``).

- ``quick`` (a few minutes): C1 and C8 on prose, coding and json; one prefill size (32k); the needle at 50 %
  of 8k; the tools and vision checks when :mod:`cockpit.bench.checks` is there.
- ``standard`` (the card's tables): C1, 2, 4, 8 on all eight categories and the counting ceiling at C1;
  prefill 1k, 8k, 32k, 128k; the needle at 50 % of 32k; the checks and the idle probe.
- ``full``: as standard, with the ceiling at every concurrency, prefill up to 512k and the needle at
  25, 50 and 75 % of 32k and 128k.

Prefill and needle sizes past the server's context length are left out (and the run says so).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, replace
from typing import Any, Literal

from cockpit.bench.prompts import PromptSet

SuiteName = Literal["quick", "standard", "full"]
SUITES: tuple[SuiteName, ...] = ("quick", "standard", "full")
DEFAULT_CONCURRENCY = (1, 2, 4, 8)
K = 1024
CONTEXT_MARGIN = 64
"""Tokens kept free below the context length for the question and the answer of a sized prompt."""


@dataclass(frozen=True, slots=True)
class Plan:
    """What one run measures."""

    suite: SuiteName
    categories: tuple[str, ...]
    concurrency: tuple[int, ...]
    ceiling: tuple[str, ...]
    ceiling_concurrency: tuple[int, ...]
    prefill_sizes: tuple[int, ...]
    needles: tuple[tuple[int, float], ...]       # (context tokens, depth 0..1)
    checks: bool = True
    idle_probe: bool = False
    warmup: bool = True
    skipped: tuple[str, ...] = field(default=())

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def decode_cells(self) -> list[tuple[str, int]]:
        """(category, concurrency) of every decode cell, in the order they run."""
        return ([(c, n) for c in self.categories for n in self.concurrency]
                + [(c, n) for c in self.ceiling for n in self.ceiling_concurrency])

    def capped(self, context: int | None) -> Plan:
        """Without the prefill sizes and needles that do not fit in ``context`` tokens."""
        if context is None:
            return self
        fits = context - CONTEXT_MARGIN
        skipped = [f"prefill {_k(s)}: larger than the context length {context}" for s in self.prefill_sizes
                   if s > fits]
        skipped += [f"needle in {_k(s)}: larger than the context length {context}" for s, _ in self.needles
                    if s > fits]
        return replace(self, prefill_sizes=tuple(s for s in self.prefill_sizes if s <= fits),
                       needles=tuple(n for n in self.needles if n[0] <= fits),
                       skipped=self.skipped + tuple(skipped))


def tokens_label(tokens: int) -> str:
    """``8k`` for 8192, ``1000`` for 1000, ``0`` for 0."""
    return f"{tokens // K}k" if tokens % K == 0 and tokens else str(tokens)


_k = tokens_label


def plan_for(suite: SuiteName, prompts: PromptSet, concurrency: tuple[int, ...] | None = None) -> Plan:
    """The plan of ``suite`` over ``prompts``; ``concurrency`` (``--concurrency``) replaces the suite's
    cells (quick: 1 and 8; the others: 1, 2, 4, 8)."""
    main = prompts.headline
    ceiling = [c for c in prompts.categories if c in prompts.headline_excludes]
    if suite == "quick":
        preferred = [c for c in ("prose", "coding", "json") if c in main]
        cats = (preferred + [c for c in main if c not in preferred])[:3]
        conc = concurrency or (1, 8)
        return Plan(suite, tuple(cats), tuple(conc), (), (), (32 * K,), ((8 * K, 0.5),), checks=True)
    conc = concurrency or DEFAULT_CONCURRENCY
    if suite == "standard":
        return Plan(suite, tuple(main), tuple(conc), tuple(ceiling), (min(conc),),
                    (1 * K, 8 * K, 32 * K, 128 * K), ((32 * K, 0.5),), checks=True, idle_probe=True)
    needles = tuple((s, d) for s in (32 * K, 128 * K) for d in (0.25, 0.5, 0.75))
    return Plan(suite, tuple(main), tuple(conc), tuple(ceiling), tuple(conc),
                (1 * K, 8 * K, 32 * K, 128 * K, 256 * K, 512 * K), needles, checks=True, idle_probe=True)


def parse_concurrency(text: str) -> tuple[int, ...]:
    """``1,2,4,8`` as a sorted tuple of distinct positive integers (at most 256); ValueError if not."""
    try:
        values = sorted({int(part) for part in text.split(",") if part.strip()})
    except ValueError:
        raise ValueError(f"--concurrency takes integers separated by commas, not {text!r:.60}") from None
    if not values or values[0] < 1 or values[-1] > 256:
        raise ValueError(f"--concurrency takes integers from 1 to 256, not {text!r:.60}")
    return tuple(values)


MAX_DEPTH = 1024 * K
MAX_REPEAT = 100


def parse_depths(text: str) -> tuple[int, ...]:
    """``0,8k,32k`` as distinct token counts in the order given (``k`` = 1024); ValueError if not."""
    out: list[int] = []
    for part in text.split(","):
        part = part.strip().lower()
        if not part:
            continue
        try:
            value = int(part[:-1]) * K if part.endswith("k") else int(part)
        except ValueError:
            raise ValueError(f"--depth takes token counts like 0,8k,32k, not {text!r:.60}") from None
        if value < 0 or value > MAX_DEPTH:
            raise ValueError(f"--depth takes token counts from 0 to {MAX_DEPTH // K}k, not {part!r:.20}")
        if value not in out:
            out.append(value)
    if not out:
        raise ValueError(f"--depth takes token counts like 0,8k,32k, not {text!r:.60}")
    return tuple(out)


def parse_repeat(text: str) -> int:
    """``--repeat N``: 1 to MAX_REPEAT; ValueError if not."""
    try:
        n = int(text)
    except ValueError:
        raise ValueError(f"--repeat takes a whole number, not {text!r:.20}") from None
    if not 1 <= n <= MAX_REPEAT:
        raise ValueError(f"--repeat takes 1 to {MAX_REPEAT}, not {n}")
    return n
