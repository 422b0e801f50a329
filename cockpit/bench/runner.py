"""One benchmark run: warm-up, decode cells, prefill, needle, checks; progress as events; records kept.

Every measured request: temperature 0, thinking off (``chat_template_kwargs``), streamed with
``include_usage``, and a prompt of its own (:func:`~cockpit.bench.prompts.unique_text`). A decode cell
releases its C streams at once and waits for all of them. Cancelling the task that runs
:meth:`Runner.run` cancels every request in flight (each one's HTTP stream is closed, so the server drops
it), then the records are written and marked cancelled, and the cancellation goes on.
"""

from __future__ import annotations

import asyncio
import gc
import importlib
import json
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from types import ModuleType
from typing import Any, Literal

from cockpit.api.chat import ChatRequest
from cockpit.api.client import ApiClient, ModelInfo
from cockpit.api.errors import ApiError
from cockpit.api.liveness import read_metrics_text
from cockpit.api.stream import ChatResult, Finished, StreamDeadlines, StreamError, StreamStats
from cockpit.bench import prompts as P
from cockpit.bench.gate import context_length
from cockpit.bench.records import (
    PROMPT_HEAD_CHARS,
    CellRepeats,
    DecodeCell,
    DepthCell,
    RecordKind,
    RequestRecord,
)
from cockpit.bench.report import render_html
from cockpit.bench.store import RunStore
from cockpit.bench.suite import CONTEXT_MARGIN, Plan, tokens_label
from cockpit.bench.summary import BenchSummary, RunFacts, build_summary, render_markdown
from cockpit.bench.telemetry import CellTelemetry, TelemetrySource

RunStatus = Literal["running", "complete", "cancelled", "failed"]
FATAL_KINDS = frozenset({"unreachable", "engine_dead", "first_token_timeout", "idle_timeout", "not_ready"})
"""Error kinds that end the run when every request of a cell failed with one of them."""
PREFILL_QUESTION = "\n\nReply with the single word OK."
NEEDLE_QUESTION = ("\n\nWhat is the secret passphrase stated in the text above? "
                   "Answer with the passphrase alone.")
WARMUP_TOKENS = 32
CALIBRATE_WORDS = (60, 1200)


@dataclass(frozen=True, slots=True)
class CellStarted:
    cell: str
    index: int
    cells: int
    requests: int
    elapsed_s: float


@dataclass(frozen=True, slots=True)
class RequestDone:
    cell: str
    record: RequestRecord
    done: int
    total: int
    elapsed_s: float
    eta_s: float | None


@dataclass(frozen=True, slots=True)
class Note:
    message: str
    warning: bool = True


BenchEvent = CellStarted | RequestDone | Note


class RunFailed(Exception):
    """The run cannot go on (the API went away, the warm-up failed)."""


def checks_module() -> ModuleType | None:
    """:mod:`cockpit.bench.checks` (tools, vision, idle probe) when it is installed, else None."""
    try:
        return importlib.import_module("cockpit.bench.checks")
    except ModuleNotFoundError:
        return None


class Runner:
    """Runs ``plan`` against ``client`` for ``model``; ``emit`` gets every :data:`BenchEvent`.

    After :meth:`run` (also when it was cancelled or failed), ``status``, ``reason`` and the figures are
    set and, with a ``store``, every record is on disk.
    """

    def __init__(self, client: ApiClient, model: str, plan: Plan, prompts: P.PromptSet, *,
                 store: RunStore | None = None, emit: Callable[[BenchEvent], None] | None = None,
                 deadlines: StreamDeadlines | None = None, config: dict[str, Any] | None = None,
                 run_tag: str | None = None, idle_s: float = 45.0,
                 earlier: dict[str, Any] | list[dict[str, Any]] | None = None, repeat: int = 1,
                 depths: tuple[int, ...] = (), telemetry: TelemetrySource | None = None) -> None:
        self.client, self.model, self.plan, self.prompts = client, model, plan, prompts
        self.store, self.deadlines = store, deadlines
        self._emit = emit or (lambda _e: None)
        self.config = dict(config or {})
        self.tag = run_tag or P.new_run_tag()
        self.idle_s = idle_s
        self.earlier = [earlier] if isinstance(earlier, dict) else list(earlier or [])
        self.repeat = max(int(repeat), 1)
        self.depths = tuple(depths)
        self.telemetry = telemetry
        self.summary: BenchSummary | None = None
        self.depth: list[DepthCell] = []
        self.status: RunStatus = "running"
        self.reason: str | None = None
        self.records: list[RequestRecord] = []
        self.decode: list[DecodeCell] = []
        self.prefill: list[dict[str, Any]] = []
        self.needles: list[dict[str, Any]] = []
        self.checks: list[dict[str, Any]] = []
        self.idle_probe: list[dict[str, Any]] = []
        self.notes: list[str] = []
        self.unwritten: dict[str, str] = {}   # record file -> why it could not be written (a full disk)
        self.models: list[ModelInfo] = []
        self.metrics_before: str | None = None
        self.metrics_after: str | None = None
        self.started_at = time.time()
        self.ended_at: float | None = None
        self._t0 = time.perf_counter()
        self._n = 0
        self._done = 0
        self._work_done = 0.0
        self._work_total = 1.0
        self._requests_total = 0
        self._tokens_per_word: tuple[float, float] | None = None   # (per word, overhead)
        self._context: int | None = None

    # ---- progress -------------------------------------------------------------------------------

    def note(self, message: str, warning: bool = True) -> None:
        self.notes.append(message)
        self._emit(Note(message, warning))

    def elapsed(self) -> float:
        return time.perf_counter() - self._t0

    def _plan_work(self) -> None:
        plan = self.plan
        work = 0.0
        requests = 0
        for cat, c in plan.decode_cells():
            work += self.prompts.categories[cat].max_tokens * (1 + 0.1 * (c - 1)) * self.repeat
            requests += c * self.repeat
        if self.depths:
            depth_tokens = self.prompts.categories[self._depth_category()].max_tokens
            work += sum(d / 80 + depth_tokens for d in self.depths) * self.repeat
            requests += len(self.depths) * self.repeat
        if plan.prefill_sizes or plan.needles or any(self.depths):
            work += 2 * 50 + sum(s / 80 for s in plan.prefill_sizes)
            work += sum(s / 80 + 64 for s, _ in plan.needles)
            requests += len(CALIBRATE_WORDS) + len(plan.prefill_sizes) + len(plan.needles)
        self._work_total = max(work, 1.0)
        self._requests_total = requests

    def _eta(self) -> float | None:
        if self._work_done <= 0:
            return None
        left = max(self._work_total - self._work_done, 0.0)
        return self.elapsed() * left / self._work_done

    def _finished(self, rec: RequestRecord, work: float) -> None:
        self.records.append(rec)
        if rec.kind == "warmup":
            return
        self._done += 1
        self._work_done += work
        self._emit(RequestDone(rec.cell, rec, self._done, self._requests_total, self.elapsed(), self._eta()))

    # ---- requests -------------------------------------------------------------------------------

    def _record(self, kind: RecordKind, cell: str, category: str, c: int, max_tokens: int,
                text: str) -> tuple[RequestRecord, str]:
        self._n += 1
        prompt = P.unique_text(text, self.tag, self._n)
        rec = RequestRecord(self._n, kind, cell, category, c, max_tokens, len(prompt),
                            prompt[:PROMPT_HEAD_CHARS])
        return rec, prompt

    async def _send(self, rec: RequestRecord, prompt: str, work: float) -> RequestRecord:
        request = ChatRequest([{"role": "user", "content": prompt}], model=self.model, thinking=False,
                              reasoning_effort=None, temperature=0.0, top_p=None, max_tokens=rec.max_tokens)
        result: ChatResult | None = None
        stats: StreamStats | None = None
        error: StreamError | None = None
        stream = self.client.chat_stream(request, deadlines=self.deadlines)
        try:
            async with stream:
                async for event in stream:
                    if isinstance(event, Finished):
                        result, stats = event.result, event.stats
                    elif isinstance(event, StreamError):
                        error = event
        except asyncio.CancelledError:
            rec.take(None, stream.stats, None)
            rec.cancelled()
            self.records.append(rec)
            raise
        rec.take(result, stats, error)
        self._finished(rec, work)
        return rec

    async def _batch(self, jobs: list[tuple[RequestRecord, str, float]]) -> list[RequestRecord]:
        """Send every job at once (one synchronized batch) and wait for all of them.

        The connections are opened first: a request that had to connect would go out a connect later
        than the rest, and the batch's wall time (from the first send) would count that delay. The
        garbage collector is held off while the requests go out (one turn of the loop, when each task
        sends on its kept connection): a full collection in between spread a batch's sends over up to
        6 ms, so part of it missed the engine's first step."""
        await self.client.prepare(len(jobs))
        async with asyncio.TaskGroup() as group:
            tasks = [group.create_task(self._send(rec, prompt, work)) for rec, prompt, work in jobs]
            collecting = gc.isenabled()
            gc.disable()
            try:
                await asyncio.sleep(0)      # the one turn in which every task sends
            finally:
                if collecting:
                    gc.enable()
        return [t.result() for t in tasks]

    def _fatal(self, records: list[RequestRecord], what: str) -> None:
        kinds = {(r.error or {}).get("kind") for r in records}
        if records and all(not r.ok for r in records) and kinds <= FATAL_KINDS:
            first = records[0].error or {}
            raise RunFailed(f"{what}: every request failed ({first.get('kind')}: {first.get('message')})")

    # ---- the run --------------------------------------------------------------------------------

    async def run(self) -> None:
        """The whole plan; sets ``status`` (complete, cancelled or failed) and writes the records."""
        self._t0 = time.perf_counter()
        try:
            await self._begin()
            if self.plan.warmup:
                await self._warmup()
            await self._decode_cells()
            await self._depth_cells()
            await self._sized()
            await self._checks()
            self.status = "complete"
        except asyncio.CancelledError:
            self.status, self.reason = "cancelled", "cancelled before the end: the figures are partial"
            task = asyncio.current_task()
            if task is not None:
                task.uncancel()
            await self._end()
            raise
        except (RunFailed, ApiError) as exc:
            self.status, self.reason = "failed", str(exc)
        await self._end()

    async def _begin(self) -> None:
        self.models = await self.client.models()
        if not any(m.id == self.model for m in self.models):
            raise RunFailed(f"the server does not list the model {self.model!r}; it lists "
                            + (", ".join(m.id for m in self.models) or "none"))
        context = context_length(self.models, self.model)
        self._context = context
        self.plan = self.plan.capped(context)
        for skipped in self.plan.skipped:
            self.note(f"left out: {skipped}")
        for diff in self.prompts.differs_from_method():
            self.note(f"prompt set differs from the method: {diff}")
        if 1 not in self.plan.concurrency or (self.plan.suite != "quick" and 8 not in self.plan.concurrency):
            self.note("the cells do not include C1 and C8: the card's two headline figures are not measured")
        try:
            self.metrics_before = await read_metrics_text(self.client)
        except ApiError as exc:
            self.note(f"/metrics before the run could not be read: {exc.message}")
        self._plan_work()
        self.config.update({"plan": self.plan.to_dict(), "prompts": self.prompts.to_dict(),
                            "model": self.model, "context_length": context, "run_tag": self.tag})
        if self.store is not None:
            self._write("config.json", json.dumps(self.config, indent=2, ensure_ascii=False) + "\n")
            self._write("models.json", json.dumps([_model(m) for m in self.models], indent=2,
                                                  ensure_ascii=False) + "\n")
            if self.metrics_before is not None:
                self._write("metrics-before.prom", self.metrics_before)
            if self.unwritten:   # nothing can be kept: do not spend the engine's time on a run
                raise RunFailed(f"the records cannot be written in {self.store.directory}: "
                                + "; ".join(f"{name}: {why}" for name, why in self.unwritten.items()))

    async def _warmup(self) -> None:
        cat = self.plan.categories[0] if self.plan.categories else next(iter(self.prompts.categories))
        rec, prompt = self._record("warmup", "warm-up", cat, 1, WARMUP_TOKENS,
                                   self.prompts.categories[cat].prompts[0])
        self._emit(CellStarted("warm-up", 0, self._cells(), 1, self.elapsed()))
        await self._send(rec, prompt, 0.0)
        if not rec.ok:
            raise RunFailed(f"the warm-up request failed: {(rec.error or {}).get('message')}")

    def _cells(self) -> int:
        plan = self.plan
        sized = ((1 if plan.prefill_sizes or plan.needles or any(self.depths) else 0)
                 + len(plan.prefill_sizes) + len(plan.needles))
        return (len(plan.decode_cells()) + len(self.depths) + sized + (1 if plan.checks else 0)
                + (1 if plan.idle_probe else 0))

    async def _decode_cells(self) -> None:
        cells = self.plan.decode_cells()
        headline = set(self.prompts.headline)
        for i, (cat, c) in enumerate(cells, 1):
            category = self.prompts.categories[cat]
            label = f"{cat} C{c}"
            self._emit(CellStarted(label, i, self._cells(), c, self.elapsed()))
            work = category.max_tokens * (1 + 0.1 * (c - 1)) / c
            runs: list[DecodeCell] = []
            tokens = 0
            self._telemetry_begin()
            try:
                for run in range(self.repeat):
                    jobs = []
                    for k in range(c):
                        rec, prompt = self._record("decode", label, cat, c, category.max_tokens,
                                                   category.prompts[k % len(category.prompts)])
                        if self.repeat > 1:
                            rec.extra["run"] = run + 1
                        jobs.append((rec, prompt, work))
                    records = await self._batch(jobs)
                    runs.append(DecodeCell.of(cat, c, records, cat in headline))
                    tokens += sum(r.completion_tokens or 0 for r in records)
                    self._save_records()
                    self._fatal(records, label)
            finally:
                telemetry = await self._telemetry_end(tokens)
                if runs:
                    self.decode.append(replace(runs[0], telemetry=telemetry, repeats=(
                        CellRepeats.of(runs) if self.repeat > 1 else None)))

    def _telemetry_begin(self) -> None:
        if self.telemetry is not None:
            self.telemetry.begin()

    async def _telemetry_end(self, tokens: int) -> CellTelemetry | None:
        if self.telemetry is None:
            return None
        return await self.telemetry.end(tokens or None)

    def _depth_category(self) -> str:
        cats = self.prompts.categories
        if "prose" in cats:
            return "prose"
        return self.plan.categories[0] if self.plan.categories else next(iter(cats))

    async def _depth_cells(self) -> None:
        """Single-stream decode with ``depth`` tokens of filler in front of a prose prompt; the depth's
        filler calibrated by ``usage`` (as the prefill's), the prompt's real size the engine's count."""
        if not self.depths:
            return
        cat = self._depth_category()
        category = self.prompts.categories[cat]
        index = len(self.plan.decode_cells())
        for depth in self.depths:
            index += 1
            label = f"depth {tokens_label(depth)}"
            if self._context is not None and depth > self._context - CONTEXT_MARGIN - category.max_tokens:
                self.note(f"left out: {label}: larger than the context length {self._context}")
                continue
            words = await self._words_for(depth) if depth > 0 else 0
            self._emit(CellStarted(label, index, self._cells(), self.repeat, self.elapsed()))
            records: list[RequestRecord] = []
            self._telemetry_begin()
            try:
                for run in range(self.repeat):
                    filler = P.filler_words(self.prompts, words) + "\n\n" if words else ""
                    rec, prompt = self._record("depth", label, cat, 1, category.max_tokens,
                                               filler + category.prompts[run % len(category.prompts)])
                    rec.extra["depth_tokens"] = depth
                    if self.repeat > 1:
                        rec.extra["run"] = run + 1
                    await self._send(rec, prompt, depth / 80 + category.max_tokens)
                    records.append(rec)
                    self._save_records()
                    self._fatal([rec], label)
            finally:
                telemetry = await self._telemetry_end(sum(r.completion_tokens or 0 for r in records))
                if records:
                    self.depth.append(replace(DepthCell.of(depth, records), telemetry=telemetry))

    async def _calibrate(self) -> tuple[float, float]:
        """Tokens per filler word and the fixed overhead of a prompt, from two sized requests."""
        if self._tokens_per_word is None:
            self._emit(CellStarted("calibrate", len(self.plan.decode_cells()) + 1, self._cells(),
                                   len(CALIBRATE_WORDS), self.elapsed()))
            counts = []
            for words in CALIBRATE_WORDS:
                rec, prompt = self._record("calibrate", "calibrate", "filler", 1, 1,
                                           P.filler_words(self.prompts, words) + PREFILL_QUESTION)
                await self._send(rec, prompt, 50)
                if not rec.ok or rec.prompt_tokens is None:
                    raise RunFailed("the filler could not be calibrated: "
                                    + str((rec.error or {}).get("message") or "no usage in the answer"))
                counts.append((len(P.filler_words(self.prompts, words).split()), rec.prompt_tokens))
            (w1, p1), (w2, p2) = counts
            per_word = (p2 - p1) / (w2 - w1) if w2 != w1 and p2 > p1 else max(p2 / max(w2, 1), 0.5)
            self._tokens_per_word = (per_word, max(p1 - per_word * w1, 0.0))
        return self._tokens_per_word

    async def _words_for(self, tokens: int) -> int:
        per_word, overhead = await self._calibrate()
        return max(int((tokens - overhead) / per_word), 1)

    async def _sized(self) -> None:
        plan = self.plan
        index = len(plan.decode_cells()) + len(self.depths) + 1
        for size in plan.prefill_sizes:
            words = await self._words_for(size)
            index += 1
            label = f"prefill {size // 1024}k" if size % 1024 == 0 else f"prefill {size}"
            self._emit(CellStarted(label, index, self._cells(), 1, self.elapsed()))
            rec, prompt = self._record("prefill", label, "filler", 1, 1,
                                       P.filler_words(self.prompts, words) + PREFILL_QUESTION)
            rec.extra["target_tokens"] = size
            await self._send(rec, prompt, size / 80)
            ttft = rec.ttft_s
            rate = rec.prompt_tokens / ttft if rec.ok and rec.prompt_tokens and ttft else None
            self.prefill.append({"target_tokens": size, "prompt_tokens": rec.prompt_tokens,
                                 "ttft_s": None if ttft is None else round(ttft, 4),
                                 "prefill_tps": None if rate is None else round(rate, 2), "ok": rec.ok,
                                 "error": rec.error})
            self._save_records()
            self._fatal([rec], label)
        for size, depth in plan.needles:
            words = await self._words_for(size - 40)
            index += 1
            label = f"needle {size // 1024}k @{depth:.0%}"
            self._emit(CellStarted(label, index, self._cells(), 1, self.elapsed()))
            secret = f"{P.new_run_tag()[:6]}-{P.new_run_tag()[:6]}"
            before = int(words * depth)
            text = (P.filler_words(self.prompts, before) + f" The secret passphrase is {secret}. "
                    + P.filler_words(self.prompts, max(words - before, 1)) + NEEDLE_QUESTION)
            rec, prompt = self._record("needle", label, "needle", 1, 64, text)
            rec.extra.update({"context_tokens": size, "depth": depth, "secret": secret})
            await self._send(rec, prompt, size / 80 + 64)
            passed = rec.ok and secret.lower() in rec.text.lower()
            self.needles.append({"context_tokens": size, "prompt_tokens": rec.prompt_tokens, "depth": depth,
                                 "passed": passed, "secret": secret, "answer": rec.text[:500],
                                 "error": rec.error})
            self._save_records()
            self._fatal([rec], label)

    async def _checks(self) -> None:
        if not (self.plan.checks or self.plan.idle_probe):
            return
        module = checks_module()
        if module is None:
            self.note("tools, vision and idle-probe checks are not installed in this build: left out",
                      warning=False)
            return
        index = self._cells() - (1 if self.plan.idle_probe else 0)
        if self.plan.checks:
            self._emit(CellStarted("checks", index, self._cells(), 7, self.elapsed()))
            found = await module.run_checks(self.client, self.model, deadlines=self.deadlines)
            self.checks = [c.to_dict() for c in found]
        if self.plan.idle_probe:
            self._emit(CellStarted(f"idle probe ({self.idle_s:g} s idle)", index + 1, self._cells(), 4,
                                   self.elapsed()))
            found = await module.idle_probe(self.client, self.model, self.idle_s, deadlines=self.deadlines)
            self.idle_probe = [p.to_dict() for p in found]

    # ---- records --------------------------------------------------------------------------------

    def _write(self, name: str, text: str) -> bool:
        """Write one record file; a failure (a full disk) is kept in `unwritten` with its cause, never
        raised: the run and the other files go on."""
        assert self.store is not None
        try:
            self.store.write_text(name, text)
        except OSError as exc:
            first = name not in self.unwritten
            self.unwritten[name] = exc.strerror or str(exc)
            if first:
                self.note(f"{self.store.directory / name} could not be written: {self.unwritten[name]}")
            return False
        self.unwritten.pop(name, None)   # written now (space freed since)
        return True

    def _save_records(self) -> None:
        if self.store is not None:
            lines = "".join(json.dumps(r.to_dict(), ensure_ascii=False) + "\n" for r in self.records)
            self._write("requests.jsonl", lines)

    async def _end(self) -> None:
        self.ended_at = time.time()
        try:
            self.metrics_after = await read_metrics_text(self.client)
        except (ApiError, OSError) as exc:
            self.note(f"/metrics after the run could not be read: {getattr(exc, 'message', exc)}")
        self.summary = build_summary(RunFacts(
            status=self.status, reason=self.reason, suite=self.plan.suite, model=self.model,
            base_url=self.client.base_url, started_at=self.started_at, ended_at=self.ended_at,
            records=self.records, prompts=self.prompts.to_dict(), headline_categories=self.prompts.headline,
            decode=self.decode, prefill=self.prefill, needles=self.needles, checks=self.checks,
            idle_probe=self.idle_probe, metrics_before=self.metrics_before, metrics_after=self.metrics_after,
            notes=self.notes, depth=self.depth, repeat=self.repeat), self.earlier)
        if self.store is None:
            return
        self._save_records()
        if self.metrics_after is not None:
            self._write("metrics-after.prom", self.metrics_after)
        self._write("summary.json", json.dumps(self.summary.to_dict(), indent=2, ensure_ascii=False) + "\n")
        self._write("summary.md", render_markdown(self.summary))
        self._write("report.html", render_html(self.summary))


def _model(m: ModelInfo) -> dict[str, Any]:
    return {"id": m.id, "owned_by": m.owned_by, "max_model_len": m.max_model_len, "root": m.root}
