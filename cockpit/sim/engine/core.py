"""The engine core: requests, continuous batching on the schedule of `schedule.py`, statistics.

All running requests share each step. A step processes up to `max_batched_tokens` prompt tokens
(chunked prefill) and gives every decoding sequence 1 + accepted draft tokens; a sequence whose prefill
completes in the step gets its first token. Requests receive their tokens as events on a queue.
"""

from __future__ import annotations

import asyncio
import hashlib
import itertools
import math
import random
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field

from cockpit.sim.engine import textgen, tokens
from cockpit.sim.engine.metrics import Stats
from cockpit.sim.engine.schedule import Schedule

PREFIX_BLOCK = 256
PREFIX_CACHE_BLOCKS = 65536
MIN_LAG_S = 0.002
WAKE_LAG_S = 0.05  # the first step after an idle spell may start this long after the first arrival
GATHER_S = 0.004  # the longest wait for the rest of a burst after an idle spell (see EngineCore._gather)
GATHER_POLL_S = 0.001
RELEASE_LEAD_S = 0.003  # a step's outputs are handed out this long before they are due
SPIN_S = 0.00015  # the last 150 us of a wait are spun (a blocking sleep overshoots by ~70 us)


async def sleep_until(deadline: float) -> None:
    """Wait until ``time.monotonic() >= deadline``, to within a few microseconds.

    The event loop wakes a timer up to 1 ms late (epoll's timeout is in milliseconds) plus the cost of
    the wakeup itself, which would shift every token of the schedule. The loop sleeps until
    ``RELEASE_LEAD_S`` before the deadline; the rest is slept blocking (nothing else is due then: the
    engine's step outputs all share this deadline).
    """
    clock = time.monotonic
    delay = deadline - clock()
    if delay > RELEASE_LEAD_S:
        await asyncio.sleep(delay - RELEASE_LEAD_S)
        delay = deadline - clock()
    if delay > SPIN_S:
        time.sleep(delay - SPIN_S)
    while clock() < deadline:
        pass


@dataclass
class Token:
    """One output token: kind is reasoning, content, tool_head, tool_mark or tool_args."""

    kind: str
    text: str
    category: str
    index: int = 0  # tool call index
    name: str = ""  # tool_head: function name
    call_id: str = ""  # tool_head: call id


def build_output(plan: textgen.Plan, max_tokens: int, stop: list[str]) -> tuple[list[Token], str, str | None]:
    """Token list, natural finish reason (stop/length) and the matched stop string."""
    out = [Token("reasoning", t, "prose") for t in tokens.tokenize(plan.reasoning)]
    content, stop_reason = plan.content, None
    for s in stop:
        i = content.find(s) if s else -1
        if i >= 0 and (stop_reason is None or i < content.find(stop_reason)):
            stop_reason = s
    if stop_reason is not None:
        content = content[: content.find(stop_reason)]
    out += [Token("content", t, plan.category) for t in tokens.tokenize(content)]
    for i, call in enumerate(plan.tool_calls):
        head = tokens.count(call.name) + 3
        out.append(Token("tool_head", "", "code", i, call.name, call.id))
        out += [Token("tool_mark", "", "code", i) for _ in range(head - 1)]
        out += [Token("tool_args", t, "code", i) for t in tokens.tokenize(call.arguments)]
    if len(out) > max_tokens:
        return out[:max_tokens], "length", None
    return out, "stop", stop_reason


@dataclass
class Request:
    """One chat completion inside the engine."""

    rid: str
    prompt_tokens: int
    prompt_key: list[str]
    out: list[Token]
    finish_reason: str
    stop_reason: str | None = None
    arrival: float = field(default_factory=time.monotonic)
    events: asyncio.Queue[tuple] = field(default_factory=asyncio.Queue)
    admitted: float = 0.0
    first_token: float = 0.0
    last_step: float = 0.0
    prefill_left: int = 0
    cached: int = 0
    pos: int = 0
    credit: float = 0.0
    started: bool = False
    aborted: bool = False
    done: bool = False
    gone: bool = False  # its client went away while the server waited for connections to close

    @property
    def reasoning_tokens(self) -> int:
        return sum(1 for t in self.out[: self.pos] if t.kind == "reasoning")


class EngineCore:
    """Continuous-batching scheduler on simulated time; one instance per engine."""

    def __init__(
        self,
        schedule: Schedule,
        model: str,
        max_model_len: int,
        max_num_seqs: int,
        kv_tokens: int,
        hang: Callable[[], bool] = lambda: False,
    ) -> None:
        self.sch = schedule
        self.model = model
        self.max_model_len = max_model_len
        self.max_num_seqs = max_num_seqs
        self.kv_tokens = kv_tokens
        self.hang = hang
        self._deferred_aborts: list[Request] = []
        self.stats = Stats(max_model_len=max_model_len, spec_k=schedule.spec_k)
        self.running: list[Request] = []
        self.waiting: list[Request] = []
        self._wake = asyncio.Event()
        self._rng = random.Random(schedule.seed)
        self._prefix: OrderedDict[str, None] = OrderedDict()
        self._ids = itertools.count()
        self.idle_since = time.monotonic()
        self.boost = False
        self.busy_s = 0.0  # accumulated step time (for GPU utilisation)
        self.window = {"prompt": 0, "gen": 0, "drafts": 0, "draft_tokens": 0, "accepted": 0}

    # --- submission -------------------------------------------------------------------------------
    def submit(self, req: Request) -> None:
        self.waiting.append(req)
        self._wake.set()

    def abort(self, req: Request) -> None:
        if self.hang() and not req.done:
            # a hung engine core reads no more requests, aborts included (vLLM's input queue is not
            # served): the request stays running until the hang clears
            self._deferred_aborts.append(req)
            return
        if not req.done:
            req.aborted = True
            req.done = True
            self.stats.success["abort"] += 1
            if req in self.waiting:
                self.waiting.remove(req)
            if req in self.running:
                self.running.remove(req)

    def fail_all(self, message: str) -> None:
        """End every request with an error event (engine death or shutdown)."""
        for r in [*self.running, *self.waiting]:
            if not r.done:
                r.events.put_nowait(("error", message))
                r.done = True
                self.stats.success["error"] += 1
        self.running, self.waiting = [], []

    def kv_usage(self) -> float:
        used = sum(r.prompt_tokens + r.pos for r in self.running)
        return min(1.0, used / self.kv_tokens) if self.kv_tokens else 0.0

    # --- prefix cache -----------------------------------------------------------------------------
    def _cached_tokens(self, req: Request) -> int:
        h = hashlib.sha1()
        hits, key = 0, req.prompt_key
        hashes = []
        for b in range(len(key) // PREFIX_BLOCK):
            h.update("".join(key[b * PREFIX_BLOCK : (b + 1) * PREFIX_BLOCK]).encode())
            hashes.append(h.hexdigest())
        for d in hashes:
            if d not in self._prefix:
                break
            self._prefix.move_to_end(d)
            hits += PREFIX_BLOCK
        for d in hashes:
            self._prefix[d] = None
        while len(self._prefix) > PREFIX_CACHE_BLOCKS:
            self._prefix.popitem(last=False)
        return min(hits, req.prompt_tokens - 1)

    # --- the step loop ----------------------------------------------------------------------------
    def _admit(self, now: float, arrived_by: float | None = None) -> list[Request]:
        new = []
        for r in list(self.waiting):
            if len(self.running) >= self.max_num_seqs:
                break
            if arrived_by is not None and r.arrival > arrived_by:
                continue
            self.waiting.remove(r)
            r.admitted = now
            r.cached = self._cached_tokens(r)
            r.prefill_left = r.prompt_tokens - r.cached
            self.stats.prefix_queries += r.prompt_tokens
            self.stats.prefix_hits += r.cached
            self.running.append(r)
            new.append(r)
        return new

    async def run(self) -> None:
        """The scheduler loop; runs until cancelled."""
        loop_time = time.monotonic
        next_t: float | None = None
        woken = False  # the next step is the first after an idle spell
        while True:
            arrived_by: float | None = None  # the first step after idle: the burst's window only
            if not self.running and not self.waiting:
                self.idle_since = loop_time()
                self._wake.clear()
                await self._wake.wait()
                idle = loop_time() - self.idle_since
                self.boost = idle >= self.sch.idle_after_s * self.sch.time_scale
                # The first step starts when the request arrived: the sim's own request handling
                # (JSON, tokenising) is not engine time and must not push the schedule back.
                next_t = min((r.arrival for r in self.waiting), default=None)
                if next_t is not None:
                    arrived_by = await self._gather(next_t)
                woken = True
            if self.hang():
                for r in self._admit(loop_time()):
                    r.events.put_nowait(("started",))
                await asyncio.sleep(0.05)
                next_t = None
                continue
            while self._deferred_aborts:
                self.abort(self._deferred_aborts.pop())
            self._admit(loop_time(), arrived_by)  # later arrivals of a burst: the next step
            await self._step(next_t, woken)
            next_t, woken = self._last_end, False

    _last_end: float = 0.0
    parsing: int = 0  # requests the API has received and not yet submitted (set by the API)

    async def _gather(self, first: float) -> float:
        """After an idle spell, let a burst of requests in before the first step; returns the latest
        arrival the first step admits.

        A client's batch sent at once reaches the kernel within a few milliseconds but this process's
        Python one request after another; an engine whose queue got them together admits them in one
        step. So wait until ``GATHER_S`` (at most half a step) after the first arrival has passed and
        no request came in or was being parsed for two polls (one that reached the kernel in time may
        still be unread), for at most ``WAKE_LAG_S / 2``. The step is backdated to the first arrival
        (see :meth:`_step`), so the wait is not engine time."""
        window_end = first + min(GATHER_S, self.sch.step_time(1) * self.sch.time_scale / 2)
        cap = time.monotonic() + WAKE_LAG_S / 2
        seen, quiet = len(self.waiting), 0
        while True:
            await asyncio.sleep(GATHER_POLL_S)
            now = time.monotonic()
            busy = self.parsing > 0 or len(self.waiting) != seen
            seen, quiet = len(self.waiting), 0 if busy else quiet + 1
            if now >= cap or (now >= window_end and quiet >= 2):
                return window_end

    async def _step(self, next_t: float | None, woken: bool = False) -> None:
        sch = self.sch
        budget, chunk, finishing = sch.max_batched_tokens, 0, []
        for r in self.running:
            if r.prefill_left > 0 and budget > 0:
                take = min(r.prefill_left, budget)
                r.prefill_left -= take
                chunk += take
                budget -= take
                if r.prefill_left == 0:
                    finishing.append(r)
        decoders = [r for r in self.running if r.started]
        n = len(decoders) + len(finishing)
        contexts = [r.prompt_tokens + r.pos for r in decoders] + [r.prompt_tokens for r in finishing]
        dur = chunk / sch.prefill_tok_s + sch.step_time(n, contexts)
        dur *= 1 + self._rng.uniform(-sch.jitter, sch.jitter)
        if self.boost:
            dur /= sch.idle_factor
        dur *= sch.time_scale
        now = time.monotonic()
        # Back-to-back steps start at the previous step's deadline: timer overshoot and short stalls of
        # the host (up to one step) are made up by the next step; a longer stall is lost time, as a
        # hiccup would be on real hardware (so measured rates are never inflated by more than one step).
        # (`now` is normally before `next_t`: outputs are handed out RELEASE_LEAD_S ahead of their time.)
        # The first step after an idle spell starts at the first arrival even when this process took
        # longer than a step to parse the burst (its Python is not engine time); the first tokens then
        # go out as soon as they can and the next steps catch up.
        lag = max(dur, WAKE_LAG_S if woken else MIN_LAG_S)
        start = next_t if next_t is not None and now - next_t < lag else now
        end = start + dur
        # The step's outputs are handed out RELEASE_LEAD_S early, stamped with the time they are due:
        # the API renders its chunks meanwhile and sends them at that time (`sleep_until`), so the
        # client sees the schedule rather than the sim's own Python latency.
        lead = end - RELEASE_LEAD_S - time.monotonic()
        if lead > 0:
            await asyncio.sleep(lead)
        self._last_end = end
        self.busy_s += dur
        t = max(end, time.monotonic())
        self.stats.prompt_tokens += chunk
        self.window["prompt"] += chunk
        for r in finishing:
            if not r.done:
                r.started, r.first_token = True, t
                self._emit(r, 1, t)
        for r in decoders:
            if r.done:
                continue
            cat = r.out[r.pos].category if r.pos < len(r.out) else "prose"
            r.credit += sch.tokens_per_step(cat) - 1
            accepted = max(0, min(sch.spec_k, math.floor(r.credit + self._rng.random())))
            r.credit -= accepted
            emitted = self._emit(r, 1 + accepted, t)
            got = emitted - 1
            self.stats.drafts += 1
            self.stats.draft_tokens += sch.spec_k
            self.stats.accepted_tokens += got
            for p in range(got):
                self.stats.accepted_per_pos[p] += 1
            self.window["drafts"] += 1
            self.window["draft_tokens"] += sch.spec_k
            self.window["accepted"] += got
        self.running = [r for r in self.running if not r.done]

    def _emit(self, r: Request, k: int, t: float) -> int:
        k = min(k, len(r.out) - r.pos)
        toks = r.out[r.pos : r.pos + k]
        r.pos += k
        self.stats.generation_tokens += k
        self.window["gen"] += k
        if r.last_step:
            self.stats.itl.observe(t - r.last_step)
        r.last_step = t
        finished = r.pos >= len(r.out)
        r.events.put_nowait(("tokens", toks, r.finish_reason if finished else None, t))
        if finished:
            self._finish(r, t)
        return k

    def _finish(self, r: Request, t: float) -> None:
        r.done = True
        s = self.stats
        s.success[r.finish_reason] += 1
        s.ttft.observe(r.first_token - r.arrival)
        s.e2e.observe(t - r.arrival)
        s.queue.observe(r.admitted - r.arrival)
        s.prefill.observe(r.first_token - r.admitted)
        s.decode.observe(t - r.first_token)
        assert s.req_prompt is not None and s.req_gen is not None
        s.req_prompt.observe(r.prompt_tokens)
        s.req_gen.observe(r.pos)

    def next_id(self) -> str:
        return f"{next(self._ids)}"
