"""`r37-cockpit bench`: the card's benchmark (docs/benchmark-method.md) against the deployment or `--api-url`.

Refuses to start unless the live cluster model says the cluster is ready (every rank up; with
``--api-url`` there is no cluster to look at, and the run says so) and ``/metrics`` shows the API idle.
Progress goes to stderr (a line per request; a bar on a terminal); the summary to stdout, or as JSON with
``--json``. Ctrl-C cancels cleanly: every request in flight is closed, the records are written and
marked cancelled. Records: ``<state dir>/bench/results/<UTC time>/`` (never the current directory unless
``--out DIR`` names it); ``--compare`` takes a run's directory, its name there, or ``latest``.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import signal
import sys
from pathlib import Path
from typing import Any, TextIO

from cockpit.api.client import ApiClient
from cockpit.api.endpoint import ApiEndpoint
from cockpit.api.status import ApiStatus
from cockpit.bench import session
from cockpit.bench.gate import Refusal
from cockpit.bench.report import render_html
from cockpit.bench.runner import BenchEvent, CellStarted, Note, RequestDone
from cockpit.bench.suite import SUITES, parse_concurrency, parse_depths, parse_repeat, tokens_label
from cockpit.bench.summary import (
    BenchSummary,
    CompareError,
    load_earlier,
    render_markdown,
    request_counts,
    spread_text,
)
from cockpit.cli.chat_cmd import (
    _add_endpoint_args,
    _add_model_arg,
    deadlines_for,
    pick_model,
    read_timeout_for,
)
from cockpit.cli.commands import SUMMARY
from cockpit.cli.common import (
    EXIT_FAILURE,
    EXIT_INTERRUPTED,
    EXIT_REFUSED,
    EXIT_USAGE,
    CliError,
    load,
    print_json,
    remedy,
    run_async_fast,
)
from cockpit.config import EngineSection
from cockpit.errorcodes import CODES
from cockpit.safetext import safe

BAR_WIDTH = 28


def _concurrency(text: str) -> tuple[int, ...]:
    try:
        return parse_concurrency(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _depths(text: str) -> tuple[int, ...]:
    try:
        return parse_depths(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _repeat(text: str) -> int:
    try:
        return parse_repeat(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "bench", help=SUMMARY["bench"],
        description="Decode cells (C streams released together; per-stream decode without TTFT, TTFT, "
                    "aggregate with the batch wall time; tokens from usage), prefill, needle, and the "
                    "tools, vision and idle checks, on the cockpit's prompt set v1. Refuses unless every "
                    "rank is up and the API idle. Exit 0 when complete, 1 when it failed or a request "
                    "failed, 2 for bad input, 3 when refused, 130 when cancelled.")
    p.add_argument("--suite", choices=SUITES, default="quick",
                   help="quick (a few minutes), standard (the card's tables) or full (default: quick)")
    p.add_argument("--concurrency", type=_concurrency, default=None, metavar="LIST",
                   help="decode cells, e.g. 1,2,4,8 (default: quick 1,8; standard and full 1,2,4,8)")
    p.add_argument("--prompts", metavar="FILE", help="a prompt set of the same schema as the packaged v1")
    p.add_argument("-o", "--out", metavar="DIR", help="records directory (must not exist; default: "
                                                "bench/results/<UTC time> in the state directory, "
                                                "~/.local/state/r37-cockpit)")
    p.add_argument("--compare", metavar="DIR", action="append",
                   help="an earlier run's directory (its summary.json), or its name in the state "
                        "directory's bench/results, or 'latest' (the newest there); give it again for "
                        "several runs")
    p.add_argument("--repeat", type=_repeat, default=1, metavar="N",
                   help="measure every decode and depth cell N times: mean ± std and a 95 %% interval per "
                        "cell (the card comparison keeps each cell's first run; default: 1)")
    p.add_argument("--depth", type=_depths, default=(), metavar="LIST",
                   help="single-stream decode with that much context in front, e.g. 0,8k,32k (tokens, "
                        "k = 1024; the prompt's size is the engine's usage count)")
    p.add_argument("--report-only", action="store_true",
                   help="send nothing: write the Markdown and HTML comparison of the --compare runs to "
                        "a new directory (--out DIR, or one in the state directory as for a run)")
    p.add_argument("--idle", type=float, default=45.0, metavar="S",
                   help="the idle probe's controlled idle, seconds (default: 45)")
    p.add_argument("--force", action="store_true",
                   help="run even when the server cannot be shown idle (no /metrics: HTTP 404/501); the "
                        "records say idleness was not checked")
    _add_model_arg(p)
    _add_endpoint_args(p, "a request")
    p.set_defaults(func=run_bench)


# --- progress --------------------------------------------------------------------------------------


def _clock(seconds: float | None) -> str:
    if seconds is None:
        return "--:--"
    s = int(seconds)
    return f"{s // 3600}:{s // 60 % 60:02d}:{s % 60:02d}" if s >= 3600 else f"{s // 60:02d}:{s % 60:02d}"


def request_line(e: RequestDone) -> str:
    """One finished request: ``[ 3/27] prose C8 #12  ok  400 tok  TTFT 0.041 s  28.6 tok/s``."""
    r = e.record
    width = len(str(e.total))
    parts = [f"[{e.done:>{width}}/{e.total}] {r.cell} #{r.n}", "ok  " if r.ok else "FAIL"]
    if r.completion_tokens is not None and r.kind == "decode":
        parts.append(f"{r.completion_tokens} tok")
    if r.prompt_tokens is not None and r.kind != "decode":
        parts.append(f"{r.prompt_tokens} prompt tok")
    if r.ttft_s is not None:
        parts.append(f"TTFT {r.ttft_s:.3f} s")
    if r.decode_tps is not None and r.kind == "decode":
        parts.append(f"{r.decode_tps:.1f} tok/s")
    if r.error:
        parts.append(f"{r.error.get('kind')}: {safe(str(r.error.get('message')))[:160]}")
    return "  ".join(parts)


class Progress:
    """Prints the run's events to ``out``: a line per request and per cell; a bar on a terminal."""

    def __init__(self, out: TextIO, quiet: bool = False) -> None:
        self.out = out
        self.tty = out.isatty()
        self.quiet = quiet
        self._bar = ""

    def __call__(self, event: BenchEvent) -> None:
        if isinstance(event, CellStarted):
            self._line(f"== {event.cell} ({event.index}/{event.cells}, {event.requests} request"
                       f"{'s' if event.requests != 1 else ''}) at {_clock(event.elapsed_s)}")
        elif isinstance(event, RequestDone):
            if not self.quiet:
                self._line(request_line(event))
            self._draw(event)
        elif isinstance(event, Note):
            self._line(("warning: " if event.warning else "note: ") + safe(event.message))

    def _line(self, text: str) -> None:
        if self.tty and self._bar:
            self.out.write("\r\x1b[2K")
        self.out.write(text + "\n")
        if self.tty and self._bar:
            self.out.write(self._bar)
        self.out.flush()

    def _draw(self, e: RequestDone) -> None:
        if not self.tty:
            return
        filled = int(BAR_WIDTH * e.done / max(e.total, 1))
        self._bar = (f"[{'#' * filled}{'.' * (BAR_WIDTH - filled)}] {e.done}/{e.total}  {e.cell}  "
                     f"elapsed {_clock(e.elapsed_s)}  ETA {_clock(e.eta_s)}")
        self.out.write("\r\x1b[2K" + self._bar)
        self.out.flush()

    def close(self) -> None:
        if self.tty and self._bar:
            self.out.write("\n")
            self.out.flush()
            self._bar = ""


# --- the run ---------------------------------------------------------------------------------------


def _refuse(args: argparse.Namespace, refusal: Refusal) -> int:
    print(f"r37-cockpit: benchmark refused: {safe(refusal.reason)}", file=sys.stderr)
    if refusal.remedy:
        print(f"  remedy: {safe(remedy(args, refusal.remedy))}", file=sys.stderr)
    if args.json:
        print_json({"ok": False, "refused": refusal.to_dict()})
    return EXIT_REFUSED


@contextlib.asynccontextmanager
async def _endpoint(args: argparse.Namespace) -> Any:
    """(endpoint, refusal or None, engine section): ``--api-url``, or the tunnel after the live model's
    look at every rank."""
    if args.api_url:
        engine = EngineSection()
        async with ApiEndpoint(None, 0, api_url=args.api_url, read_timeout=read_timeout_for(args, engine),
                               deadlines=deadlines_for(args, engine), api_key=args.api_key) as endpoint:
            yield endpoint, None, engine, None
        return
    _, config = load(args)
    async with session.cluster_endpoint(config, read_timeout=read_timeout_for(args, config.engine),
                                  deadlines=deadlines_for(args, config.engine),
                                  api_key=args.api_key) as (endpoint, refusal, stats):
        yield endpoint, refusal, config.engine, stats


def _compares(given: list[str] | None) -> str | tuple[str, ...] | None:
    """One ``--compare DIR`` as the string it always was (config.json keeps its shape), several as a tuple."""
    if not given:
        return None
    return given[0] if len(given) == 1 else tuple(given)


def _options(args: argparse.Namespace) -> session.Options:
    return session.Options(suite=args.suite, concurrency=args.concurrency, prompts_file=args.prompts,
                     out=Path(args.out) if args.out else None, compare=_compares(args.compare),
                     idle_s=args.idle, wait_s=args.wait, timeout_s=args.timeout, force=args.force,
                     repeat=args.repeat, depths=args.depth)


async def bench_main(args: argparse.Namespace, inputs: session.Inputs) -> int:
    progress = Progress(sys.stderr)
    async with _endpoint(args) as (endpoint, refusal, engine, stats):
        if refusal is not None:
            return _refuse(args, refusal)

        async def choose(client: ApiClient, status: ApiStatus) -> str:
            return await pick_model(client, args, status)

        try:
            ready = await session.prepare(endpoint, _options(args), inputs, emit=progress, choose=choose,
                                    engine_deadlines={"first_token_s": engine.first_token_timeout_s,
                                                      "idle_s": engine.idle_timeout_s}, stats=stats)
        except session.SetupError as exc:
            raise CliError(exc.message, EXIT_USAGE, exc.code) from None
        if isinstance(ready, Refusal):
            return _refuse(args, ready)
        runner, out = ready.runner, ready.out
        print(f"bench {args.suite}: {ready.model} at {ready.url}; records in {out}", file=sys.stderr)
        task = asyncio.ensure_future(runner.run())
        loop = asyncio.get_running_loop()
        with contextlib.suppress(NotImplementedError, RuntimeError):
            loop.add_signal_handler(signal.SIGINT, task.cancel)
        try:
            await task
        except asyncio.CancelledError:
            if not task.cancelled() and not task.done():
                raise
        finally:
            with contextlib.suppress(NotImplementedError, RuntimeError):
                loop.remove_signal_handler(signal.SIGINT)
            progress.close()
    if not args.api_url:        # the cluster's recording notes the run and where its records are
        from cockpit.recipe.recording import note_bench
        note_bench(load(args)[1], runner.status, out, ready.model)
    summary = runner.summary
    assert summary is not None          # the runner sums up when it ends, also when cancelled or failed
    unwritten = [f"{out / name}: {why}" for name, why in runner.unwritten.items()]
    if args.json:
        ok = runner.status == "complete" and not summary.failed_requests and not unwritten
        print_json({"ok": ok,
                    "records": str(out), **summary.to_dict(),
                    **({"error": {"code": "write-failed", "message": "record files not written: "
                                  + "; ".join(unwritten), "remedy": CODES["write-failed"].remedy}}
                       if unwritten else {})})
    else:
        print(render_text(summary, out))
    # what was kept: every record file, or the summary above only (a full disk)
    kept = (f"records kept in {out}" if not unwritten else
            f"{len(unwritten)} record file(s) could not be written ({'; '.join(unwritten)}): "
            "the summary printed here is what was kept")
    if unwritten:
        print(f"r37-cockpit: error (write-failed): {safe(kept)}", file=sys.stderr)
        kept = "the records are not all written (above)"
    if runner.status == "cancelled":
        print(f"r37-cockpit: benchmark cancelled; {safe(kept)}", file=sys.stderr)
        return EXIT_INTERRUPTED
    if runner.status == "failed":
        print(f"r37-cockpit: benchmark failed: {safe(runner.reason or '')}; {safe(kept)}", file=sys.stderr)
        return EXIT_FAILURE
    return EXIT_FAILURE if summary.failed_requests or unwritten else 0


def render_text(s: BenchSummary, out: Path) -> str:
    """The terminal summary: headline per concurrency, depth, prefill, needle, the card and any compare."""
    def f(v: Any, nd: int = 2) -> str:
        return "—" if v is None else f"{v:.{nd}f}" if isinstance(v, float) else str(v)

    lines = [f"benchmark {s.status}: {s.suite} suite, {request_counts(s)}; records in {out}"]
    for row in s.headline:
        lines.append(f"  C{row.concurrency}: per-stream {f(row.per_stream_tps)} tok/s, aggregate "
                     f"{f(row.aggregate_tps)} tok/s (mean of {row.categories} of {row.of} categories"
                     + ("" if row.complete else ": not the method's headline") + ")")
    for cell in s.decode:
        if cell.repeats is not None:
            lines.append(f"  {cell.category} C{cell.concurrency} over {cell.repeats.n} runs: per-stream "
                         f"{spread_text(cell.repeats.per_stream_tps)} tok/s")
    for d in s.depth:
        lines.append(f"  depth {tokens_label(d.depth)}: {f(d.decode_tps) if d.ok else 'failed'} tok/s "
                     f"({d.prompt_tokens} prompt tokens"
                     + (f"; {spread_text(d.repeats.decode_tps)}"
                        if d.repeats and d.repeats.decode_tps else "")
                     + ")")
    for pre in s.prefill:
        lines.append(f"  prefill {pre.target_tokens}: {f(pre.prefill_tps)} tok/s "
                     f"({pre.prompt_tokens} tokens, TTFT {f(pre.ttft_s, 3)} s)")
    for n in s.needle:
        lines.append(f"  needle {n.context_tokens} @{n.depth:.0%}: " + ("pass" if n.passed else "FAIL"))
    lines.append("  compared with the card" + (" (each cell's first run)" if s.repeat > 1 else "") + ":")
    for card in s.card:
        if card.this_run is not None:
            lines.append(f"    {card.measure}: {f(card.this_run)} vs {f(card.card)} "
                         f"(ratio {f(card.ratio, 3)})")
    for comp in s.compare:
        lines.append(f"  compared with {safe(str(comp.source))}:")
        lines += [f"    {r.figure}: {f(r.this_run)} vs {f(r.earlier)} (ratio {f(r.ratio, 3)})"
                  for r in comp.rows if r.ratio is not None]
    return "\n".join(lines)


def report_only(args: argparse.Namespace) -> int:
    """``--report-only``: the first ``--compare`` run against the others, as summary.md and report.html in
    a new directory (``--out DIR``, or one under the state directory); nothing is sent to any engine."""
    from dataclasses import replace

    from cockpit.bench.store import RunStore, StoreError, default_dir, find_run
    from cockpit.bench.summary import Compare, compare_rows
    dirs = list(args.compare or ())
    if len(dirs) < 2:
        raise CliError("--report-only takes at least two --compare DIR (the first is compared with the "
                       "others)", EXIT_USAGE, "usage")
    try:
        loaded = [load_earlier(find_run(d)) for d in dirs]
    except CompareError as exc:
        raise CliError(f"--compare: {exc}", EXIT_USAGE, "usage") from None
    first = BenchSummary.from_dict(loaded[0])
    figs = dict(first.figures)
    summary = replace(first, compare=tuple(Compare(e.get("_source"), e.get("started_at"),
                                                   tuple(compare_rows(figs, e))) for e in loaded[1:]))
    out = Path(args.out) if args.out else default_dir()
    try:
        store = RunStore(out)
        store.write_text("summary.md", render_markdown(summary))
        store.write_text("report.html", render_html(summary, f"Comparison: {loaded[0]['_source']}"))
    except (StoreError, OSError) as exc:
        raise CliError(str(exc), EXIT_USAGE, "file-exists") from None
    if args.json:
        print_json({"ok": True, "records": str(out), **summary.to_dict()})
    else:
        print(render_text(summary, out))
    return 0


def run_bench(args: argparse.Namespace) -> int:
    if args.report_only:
        return report_only(args)
    try:
        inputs = session.load_inputs(_options(args))
    except session.SetupError as exc:
        raise CliError(exc.message, EXIT_USAGE, exc.code) from None
    return run_async_fast(bench_main(args, inputs))
