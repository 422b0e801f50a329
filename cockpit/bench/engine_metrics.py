"""The engine's ``/metrics`` around a run: raw text kept, counters read, speculative decoding summed up.

Tolerant: a line that does not read as ``name{labels} value`` is skipped; values are summed over label
sets; a counter the text lacks is absent (None), never zero.
"""

from __future__ import annotations

import math
from typing import Any

DRAFTS = "vllm:spec_decode_num_drafts_total"
DRAFT_TOKENS = "vllm:spec_decode_num_draft_tokens_total"
ACCEPTED = "vllm:spec_decode_num_accepted_tokens_total"
GENERATION = "vllm:generation_tokens_total"
PROMPT = "vllm:prompt_tokens_total"
COUNTERS = (DRAFTS, DRAFT_TOKENS, ACCEPTED, GENERATION, PROMPT)
MAX_LINE = 4096


def counters(text: str, names: tuple[str, ...] = COUNTERS) -> dict[str, float]:
    """The summed value of every family in ``names`` that the text carries."""
    wanted = set(names)
    out: dict[str, float] = {}
    for line in text.splitlines():
        if not line or line[0] == "#" or len(line) > MAX_LINE:
            continue
        name = line.split("{", 1)[0].split(" ", 1)[0]
        if name not in wanted:
            continue
        try:
            value = float(line.rsplit("}", 1)[-1].split()[0] if "}" in line else line.split()[1])
        except (IndexError, ValueError):
            continue
        if math.isfinite(value):
            out[name] = out.get(name, 0.0) + value
    return out


def spec_decode(before: str | None, after: str | None) -> dict[str, Any]:
    """What the run added to the counters, and the draft acceptance (accepted / draft tokens) and mean
    acceptance length (1 + accepted / drafts) over it; figures the texts cannot give are None."""
    if before is None or after is None:
        return {"available": False, "reason": "/metrics was not read before and after the run"}
    b, a = counters(before), counters(after)
    delta = {n: a[n] - b[n] for n in COUNTERS if n in a and n in b and a[n] >= b[n]}
    drafts, tokens, accepted = delta.get(DRAFTS), delta.get(DRAFT_TOKENS), delta.get(ACCEPTED)
    return {
        "available": drafts is not None and tokens is not None and accepted is not None,
        "drafts": drafts, "draft_tokens": tokens, "accepted_tokens": accepted,
        "acceptance_rate": round(accepted / tokens, 4) if accepted is not None and tokens else None,
        "mean_acceptance_length": (round(1 + accepted / drafts, 4)
                                   if accepted is not None and drafts else None),
        "generation_tokens": delta.get(GENERATION), "prompt_tokens": delta.get(PROMPT),
    }
