"""The simulated engine's timing model: the known schedule benchmarks are checked against.

One decode *step* serves every running sequence at once (continuous batching). Its duration is

    step_time(n) = base_s + per_seq_s * n            (n = sequences that emit tokens in the step; plus the
                                                      attention term below at long contexts)

and each decoding sequence gains `1 + accepted` tokens in it, where `accepted` (0..K, K = 3 draft tokens)
averages `accept_len[category] - 1`: a per-request error-diffusion counter with a small seeded dither
keeps the long-run mean exact while chunks carry 1–4 tokens. Prefill is chunked: a step also processes
up to `max_batched_tokens` prompt tokens at `prefill_tok_s`, so

    TTFT = queue + (prompt_tokens - prefix_cache_hits) / prefill_tok_s + step_time(n)

Attention cost grows with context: every decoding sequence whose context (prompt plus the tokens it has
generated) is longer than `attn_free_tokens` adds `attn_s_per_ktok` seconds per 1024 tokens beyond it:

    step_time(n, ctx) = base_s + per_seq_s * n + attn_s_per_ktok * Σ max(ctx_i - attn_free_tokens, 0) / 1024

(reading the KV cache is linear in its length; below the free window the kernels' fixed cost hides it, so
the card's short-prompt figures are unchanged). Defaults: 1 ms per 1k tokens beyond 2k, so one stream of
prose decodes at 50.5 tok/s with no context, ~44 tok/s at 8k and ~30 tok/s at 32k
(:meth:`Schedule.single_stream_at`).

Every step time is multiplied by a seeded jitter factor uniform in [1 - jitter, 1 + jitter] and by
`time_scale` (1.0 = real time; tests use e.g. 0.1 and scale their measurements back). After the engine
sat idle for at least `idle_after_s`, the steps of the following busy period run `idle_factor` times
faster (the card's idle probe: counting 83.8 tok/s, coding 75.1 tok/s).

Calibration: prose single stream = accept_len / step_time(1) = 50.50 tok/s and eight prose streams
= 8 * accept_len / step_time(8) = 229.28 tok/s.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

from cockpit import constants

CATEGORIES = ("prose", "code", "counting")


def _default_accept() -> dict[str, float]:
    # prose: calibration anchor; code / counting chosen so that after an idle period (idle_factor 1.08)
    # single streams run at the card's 75.1 / 83.8 tok/s: L = figure / 1.08 * step_time(1).
    return {"prose": 2.20, "code": 3.03, "counting": 3.38}


@dataclass(frozen=True)
class Schedule:
    """All numbers of the timing model; derived figures are methods."""

    single_stream_prose: float = constants.SINGLE_STREAM_TOKS
    aggregate_8_prose: float = constants.AGGREGATE_8_TOKS
    accept_len: dict[str, float] = field(default_factory=_default_accept)
    spec_k: int = constants.SPEC_K
    prefill_tok_s: float = 4000.0
    max_batched_tokens: int = 4096
    jitter: float = 0.02
    seed: int = 37
    idle_after_s: float = 45.0
    idle_factor: float = 1.08
    time_scale: float = 1.0
    attn_s_per_ktok: float = 0.001
    attn_free_tokens: int = 2048

    @property
    def step_1_s(self) -> float:
        """Step time with one running sequence (real time)."""
        return self.accept_len["prose"] / self.single_stream_prose

    @property
    def step_8_s(self) -> float:
        """Step time with eight running sequences (real time)."""
        return 8 * self.accept_len["prose"] / self.aggregate_8_prose

    @property
    def per_seq_s(self) -> float:
        return (self.step_8_s - self.step_1_s) / 7

    @property
    def base_s(self) -> float:
        return self.step_1_s - self.per_seq_s

    def step_time(self, n: int, context_tokens: tuple[int, ...] | list[int] = ()) -> float:
        """Mean decode step time (real seconds, no jitter, no time scale) with n emitting sequences whose
        contexts are ``context_tokens`` (the attention term; none given: short contexts)."""
        if n <= 0:
            return 0.0
        return self.base_s + self.per_seq_s * n + self.attention_s(context_tokens)

    def attention_s(self, context_tokens: tuple[int, ...] | list[int]) -> float:
        """The attention term of a step: ``attn_s_per_ktok`` per 1024 context tokens beyond the free window,
        summed over the decoding sequences."""
        beyond = sum(max(c - self.attn_free_tokens, 0) for c in context_tokens)
        return self.attn_s_per_ktok * beyond / 1024

    def single_stream_at(self, context_tokens: int, category: str = "prose") -> float:
        """Steady single-stream decode rate with ``context_tokens`` in front, tok/s (``bench --depth``)."""
        return self.tokens_per_step(category) / self.step_time(1, (context_tokens,))

    def tokens_per_step(self, category: str) -> float:
        return self.accept_len.get(category, self.accept_len["prose"])

    def single_stream(self, category: str = "prose", idle: bool = False) -> float:
        """Steady single-stream decode rate, tok/s."""
        rate = self.tokens_per_step(category) / self.step_time(1)
        return rate * self.idle_factor if idle else rate

    def aggregate(self, n: int, category: str = "prose") -> float:
        """Steady aggregate decode rate of n concurrent streams, tok/s."""
        return n * self.tokens_per_step(category) / self.step_time(n)

    def acceptance_rate(self, category: str = "prose") -> float:
        """Draft acceptance rate = accepted / drafted tokens."""
        return (self.tokens_per_step(category) - 1) / self.spec_k

    def ttft(self, prompt_tokens: int, n_running: int = 1, cached_tokens: int = 0) -> float:
        """Time to first token without queueing (real seconds)."""
        return (prompt_tokens - cached_tokens) / self.prefill_tok_s + self.step_time(n_running)

    def predict_stream(
        self, prompt_tokens: int, completion_tokens: int, category: str = "prose", n: int = 1
    ) -> dict[str, float]:
        """Expected TTFT, per-stream decode rate and total time of one of n identical concurrent streams.

        The n prompts are prefilled together (chunk-only steps cost prefill time alone, the last one
        adds step_time(n) and yields every first token); decode then runs at n streams per step.
        """
        ttft = n * prompt_tokens / self.prefill_tok_s + self.step_time(n)
        decode_s = (completion_tokens - 1) / self.tokens_per_step(category) * self.step_time(n)
        total = ttft + decode_s
        return {
            "ttft_s": ttft,
            "decode_tok_s": (completion_tokens - 1) / decode_s if decode_s else 0.0,
            "total_s": total,
            "aggregate_tok_s": n * completion_tokens / total,
        }

    def info(self) -> dict[str, object]:
        """The schedule as plain data (for `r37-cockpit sim info --json` and GET /sim/schedule)."""
        from cockpit.sim.engine import tokens

        return {
            "model": {
                "step_time_s": "base_s + per_seq_s * n",
                "base_s": round(self.base_s, 6),
                "per_seq_s": round(self.per_seq_s, 6),
                "spec_k": self.spec_k,
                "tokens_per_step": dict(self.accept_len),
                "acceptance_rate": {c: round(self.acceptance_rate(c), 4) for c in CATEGORIES},
                "prefill_tok_s": self.prefill_tok_s,
                "max_batched_tokens": self.max_batched_tokens,
                "ttft": "queue + (prompt_tokens - cached) / prefill_tok_s + step_time(n)",
                "jitter": self.jitter,
                "seed": self.seed,
                "idle_after_s": self.idle_after_s,
                "idle_factor": self.idle_factor,
                "time_scale": self.time_scale,
                "attention": "attn_s_per_ktok * sum(max(context_i - attn_free_tokens, 0)) / 1024",
                "attn_s_per_ktok": self.attn_s_per_ktok,
                "attn_free_tokens": self.attn_free_tokens,
            },
            "depth_tok_s": {str(d): round(self.single_stream_at(d), 2) for d in (0, 8192, 16384, 32768)},
            "single_stream_tok_s": {c: round(self.single_stream(c), 2) for c in CATEGORIES},
            "after_idle_tok_s": {c: round(self.single_stream(c, idle=True), 2) for c in CATEGORIES},
            "aggregate_tok_s": {
                c: {str(n): round(self.aggregate(n, c), 2) for n in range(1, 9)} for c in CATEGORIES
            },
            "step_time_s": {str(n): round(self.step_time(n), 6) for n in range(1, 9)},
            "tokenizer": tokens.DESCRIPTION,
            "settings": asdict(self),
        }


def schedule_info(schedule: Schedule | None = None) -> dict[str, object]:
    """The numbers of the default (or given) schedule."""
    return (schedule or Schedule()).info()
