"""Bench pane: the card's benchmark (docs/benchmark-method.md), as ``r37-cockpit bench`` runs it.

Choose the suite (quick, standard, full) and the run options (`--repeat N`, `--depth 0,8k,32k`: a dialog
that checks them with the CLI's parsers; the pane shows the command line they make), start, watch the
progress (cell, request n/N, elapsed, ETA, the last requests), cancel cleanly (the requests in flight are
closed; the records are kept, marked cancelled). The run is set up by :mod:`cockpit.bench.session`, the
CLI's own way (the same options, the same runner): it refuses unless the live model says every rank is up
(not looked at through ``--api-url``) and ``/metrics`` shows the API idle, and the refusal's reason and
remedy are shown here with nothing started. Records go to
``<state dir>/bench/results/<UTC time>/`` (:func:`cockpit.locations.state_dir`), never in the
checkout. When the run ends the summary shows: the
decode, prefill, needle, checks and idle-probe figures and the card comparison, or, on the plots key,
text bar charts of decode against concurrency and prefill against context. The bench changes no host, so
it runs in read-only mode too.
"""

from __future__ import annotations

import asyncio
from collections import deque
from pathlib import Path
from typing import ClassVar, Literal

from rich.console import RenderableType
from rich.text import Text
from textual import work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.reactive import reactive
from textual.widgets import Static

from cockpit.api.endpoint import ApiEndpoint
from cockpit.api.stream import StreamDeadlines
from cockpit.bench import session
from cockpit.bench.gate import Refusal, cluster_refusal
from cockpit.bench.runner import BenchEvent, CellStarted, Note, RequestDone, Runner
from cockpit.bench.store import RESULTS_DIR, default_dir
from cockpit.bench.suite import SUITES, SuiteName
from cockpit.bench.summary import BenchSummary
from cockpit.locations import state_dir
from cockpit.recipe.recording import note_bench
from cockpit.remedy import cockpit_remedy
from cockpit.safetext import safe
from cockpit.tui.context import CockpitContext
from cockpit.tui.dialogs.bench_options import BenchOptions, depths_text
from cockpit.tui.pane import Pane
from cockpit.tui.widgets.bench_plot import plots
from cockpit.tui.widgets.bench_view import notes_block, progress_block, refusal_block, summary_block
from cockpit.tui.widgets.statusline import StatusLine

Phase = Literal["idle", "checking", "running", "cancelling", "finished", "refused"]
LAST_REQUESTS = 6
MAX_NOTES = 50
HINT_LABELS = {"cycle_suite": "suite", "options": "repeat/depth", "start": "start", "cancel": "cancel",
               "toggle_plots": "plots/tables"}
PHASE_LOOK = {"idle": ("○ ready to start", "muted"),
              "checking": ("… checking the cluster and the API", "warn.soft"),
              "running": ("● running", "warn.soft"), "cancelling": ("◌ cancelling", "warn"),
              "finished": ("● finished", "ok.soft"), "refused": ("✗ refused", "fail")}
RUN_LOOK = {"complete": ("● complete", "ok.soft"), "cancelled": ("◌ cancelled: records kept", "warn"),
            "failed": ("✗ failed: records kept", "fail")}


class BenchPane(Pane):
    """Status line, the body (progress, refusal or summary; plots on a key), notes, key hints."""

    TITLE = "Bench"
    HEADLESS = "r37-cockpit bench"
    HINTS = ("cycle_suite", "options", "start", "cancel", "toggle_plots")
    can_focus = True

    BINDINGS: ClassVar[list[Binding]] = [  # type: ignore[assignment]
        Binding("s", "cycle_suite", "Suite", id="bench.suite"),
        Binding("o", "options", "Repeat/depth", id="bench.options"),
        Binding("r", "start", "Start", id="bench.start"),
        Binding("x", "cancel", "Cancel", id="bench.cancel"),
        Binding("p", "toggle_plots", "Plots", id="bench.plots"),
        Binding("pagedown,space", "scroll(1)", "Page down", id="bench.page_down", show=False),
        Binding("pageup", "scroll(-1)", "Page up", id="bench.page_up", show=False),
    ]
    DEFAULT_CSS = """
    BenchPane #bench-status { height: auto; padding: 0 1; background: $panel; }
    BenchPane #bench-body { height: 1fr; }
    BenchPane #bench-body > Static { height: auto; padding: 0 1; }
    BenchPane #bench-notes { margin-top: 1; }
    BenchPane #bench-keys { padding: 0 1; }
    """

    phase: reactive[Phase] = reactive("idle", bindings=True)
    """Where the run is: the footer greys out the keys that do not apply (start while running, …)."""

    def __init__(self, ctx: CockpitContext, *, id: str | None = None, classes: str | None = None):
        super().__init__(ctx, id=id, classes=classes)
        self.suite: SuiteName = "quick"
        self.repeat = 1                           # --repeat N
        self.depths: tuple[int, ...] = ()         # --depth LIST
        self.show_plots = False
        self.refusal: Refusal | None = None
        self.cell: CellStarted | None = None
        self.last: deque[RequestDone] = deque(maxlen=LAST_REQUESTS)
        self.notes: list[tuple[str, bool]] = []
        self.summary: BenchSummary | None = None
        self.out: Path | None = None
        self.target = ""          # "model at url", once the run is set up
        self.runner: Runner | None = None
        self.results_base: Path = state_dir()   # records under here: <state dir>/bench/results/<UTC time>

    # ---- layout ---------------------------------------------------------------------------------------

    def compose(self) -> ComposeResult:
        yield Static(id="bench-status")
        with VerticalScroll(id="bench-body", can_focus=False):
            yield Static(id="bench-main")
            yield Static(id="bench-notes")
        yield StatusLine(id="bench-keys")

    def on_mount(self) -> None:
        self.set_interval(1.0, self._tick)
        self.refresh_view()

    def on_resize(self) -> None:
        """The plots are drawn to the width."""
        if self.is_mounted:
            self._show_body()

    def refresh_view(self) -> None:
        if not self.is_mounted:
            return
        self._show_status()
        self._show_body()
        self.query_one("#bench-keys", StatusLine).show([(self.key_hint_parts(HINT_LABELS), " · ")])

    def _width(self) -> int:
        return max(40, (self.size.width or self.app.size.width) - 2)

    def _show_status(self) -> None:
        label, role = PHASE_LOOK[self.phase]
        status = self.summary.status if self.summary is not None else None
        if self.phase == "finished" and status in RUN_LOOK:
            label, role = RUN_LOOK[status]
        text = Text.assemble((label, role), "  suite ", (self.suite, "bold"))
        if self.repeat > 1:
            text.append_text(Text.assemble("  repeat ", (str(self.repeat), "bold")))
        if self.depths:
            text.append_text(Text.assemble("  depth ", (depths_text(self.depths), "bold")))
        if self.target:
            text.append(f"  {self.target}", style="muted")
        if self.out is not None:
            text.append("\nrecords ", style="muted")
            text.append(safe(str(self.out), 300))
        self.query_one("#bench-status", Static).update(text)

    def _body(self) -> RenderableType:
        if self.phase == "refused" and self.refusal is not None:
            return refusal_block(self.refusal, cockpit_remedy(self.refusal.remedy, self.ctx.config_path))
        if self.summary is not None and self.phase == "finished":
            if self.show_plots:
                return plots(self.summary, self._width())
            return summary_block(self.summary, None)   # the status line shows the records
        if self.phase in ("running", "cancelling"):
            elapsed = self.runner.elapsed() if self.runner is not None else None
            return progress_block(self.cell, list(self.last), elapsed, self._width())
        if self.phase == "checking":
            return Text("checking that every rank is up and the API idle …", style="muted")
        return Text.assemble(
            ("The card's benchmark: decode cells, prefill, needle, vision and tools, idle probe.\n", ""),
            (f"{self._key('cycle_suite', 'chooses the suite')}; {self._key('start', 'starts')}; "
             f"{self._key('cancel', 'cancels a run (records kept)')}.\n", "muted"),
            ("quick: a few minutes · standard: the card's tables · full: larger prefill, more cells; "
             f"{self._key('options', 'sets --repeat and --depth')}\n", "muted"),
            ("will run: ", "bold"), (self.command_line(), "command"), ("\n", ""),
            ("It refuses unless every rank is up and the API idle. Records: "
             f"{safe(str(self.results_base / RESULTS_DIR))}/<UTC time>/", "muted"))

    def _show_body(self) -> None:
        self.query_one("#bench-main", Static).update(self._body())
        notes = self.query_one("#bench-notes", Static)
        notes.update(notes_block(self.notes) if self.notes else "")
        notes.display = bool(self.notes)

    def _key(self, action: str, what: str) -> str:
        key = self.key_for(action, disabled=True)     # named also while it is off (cancel before a run)
        return f"{key} {what}" if key else f"the {action} action {what}"

    def _tick(self) -> None:
        if self.phase in ("running", "cancelling") and self.shown:
            self._show_body()

    # ---- keys -----------------------------------------------------------------------------------------

    @property
    def working(self) -> bool:
        """A run is being checked, running or being cancelled."""
        return self.phase in ("checking", "running", "cancelling")

    def busy(self) -> str:
        return "a benchmark is running (quitting cancels it; its records so far are kept)" if self.working \
            else ""

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action in ("cycle_suite", "options", "start"):
            return not self.working
        if action == "cancel":
            return self.working
        if action == "toggle_plots":
            return self.summary is not None
        return True

    def _changed(self) -> None:
        self.refresh_bindings()
        self.refresh_view()

    def action_cycle_suite(self) -> None:
        if self.working:
            return
        self.suite = SUITES[(SUITES.index(self.suite) + 1) % len(SUITES)]
        self._changed()

    def action_options(self) -> None:
        if not self.working:
            self.app.push_screen(BenchOptions(self.repeat, self.depths), self._options_chosen)

    def _options_chosen(self, chosen: tuple[int, tuple[int, ...]] | None) -> None:
        if chosen is not None and not self.working:
            self.repeat, self.depths = chosen
            self._changed()

    def command_line(self) -> str:
        """The headless command this pane's choices make (what a start runs, the CLI's way)."""
        line = f"r37-cockpit bench --suite {self.suite}"
        if self.repeat > 1:
            line += f" --repeat {self.repeat}"
        if self.depths:
            line += f" --depth {depths_text(self.depths)}"
        return line

    def action_toggle_plots(self) -> None:
        self.show_plots = not self.show_plots
        self.query_one("#bench-body", VerticalScroll).scroll_home(animate=False)
        self._changed()

    def action_scroll(self, pages: int) -> None:
        body = self.query_one("#bench-body", VerticalScroll)
        (body.scroll_page_down if pages > 0 else body.scroll_page_up)(animate=False)

    def action_start(self) -> None:
        if self.working:
            return
        self.begin()
        self.run_bench(self.options())

    def action_cancel(self) -> None:
        if self.phase in ("checking", "running"):
            self.phase = "cancelling" if self.runner is not None else "idle"
            self.workers.cancel_group(self, "bench-run")
            self._changed()

    def options(self) -> session.Options:
        return session.Options(suite=self.suite, out=default_dir(self.results_base), repeat=self.repeat,
                               depths=self.depths)

    # ---- the model of the run (the worker and snapshot tests feed it) --------------------------------

    def begin(self) -> None:
        """A new run: everything of the last one cleared."""
        self.phase, self.refusal, self.cell, self.summary, self.out = "checking", None, None, None, None
        self.target, self.runner, self.show_plots = "", None, False
        self.last.clear()
        self.notes.clear()
        self._changed()

    def started(self, target: str, out: Path) -> None:
        self.phase, self.target, self.out = "running", target, out
        self._changed()

    def feed(self, event: BenchEvent) -> None:
        """One event of the runner."""
        if isinstance(event, CellStarted):
            self.cell = event
        elif isinstance(event, RequestDone):
            self.last.append(event)
        elif isinstance(event, Note) and len(self.notes) < MAX_NOTES:
            self.notes.append((event.message, event.warning))
        if self.is_mounted:
            self._show_body()

    def refuse(self, refusal: Refusal) -> None:
        self.phase, self.refusal = "refused", refusal
        self._changed()

    def finish(self, summary: BenchSummary, out: Path | None) -> None:
        self.phase, self.summary, self.out = "finished", summary, out
        self.runner = None
        self._changed()

    # ---- the worker ------------------------------------------------------------------------------------

    def _endpoint(self) -> ApiEndpoint:
        ctx = self.ctx
        engine = ctx.config.engine
        return ApiEndpoint(None if ctx.api_url else ctx.fleet, ctx.config.cluster.api_port,
                           api_url=ctx.api_url, read_timeout=engine.read_timeout_s,
                           deadlines=StreamDeadlines.from_seconds(engine.first_token_timeout_s,
                                                                  engine.idle_timeout_s))

    @work(exclusive=True, group="bench-run", name="benchmark", exit_on_error=False)
    async def run_bench(self, options: session.Options) -> None:
        engine = self.ctx.config.engine
        async with self._endpoint() as endpoint:
            try:
                inputs = session.load_inputs(options)
                if not self.ctx.api_url:
                    refusal = await cluster_refusal(self.ctx.fleet, self.ctx.config)
                    if refusal is not None:
                        self.refuse(refusal)
                        return
                ready = await session.prepare(endpoint, options, inputs, emit=self.feed,
                                        engine_deadlines={"first_token_s": engine.first_token_timeout_s,
                                                          "idle_s": engine.idle_timeout_s},
                                        stats=None if self.ctx.api_url else self.ctx.monitor.stats)
            except session.SetupError as exc:
                self.refuse(Refusal(exc.message, exc.remedy, "bench-setup"))
                return
            except asyncio.CancelledError:
                self.phase = "idle"
                self._changed()
                raise
            if isinstance(ready, Refusal):
                self.refuse(ready)
                return
            self.runner = ready.runner
            self.started(f"{safe(ready.model, 80)} at {ready.url}", ready.out)
            try:
                await ready.runner.run()
            finally:
                if ready.runner.unwritten:   # a full disk: say what was not kept, and why
                    self.notify(safe("record files not written: " + "; ".join(
                        f"{ready.out / name}: {why}" for name, why in ready.runner.unwritten.items()), 600),
                        title="write-failed", severity="error", markup=False)
                note_bench(self.ctx.config, ready.runner.status, ready.out, ready.model)
                if ready.runner.summary is not None:
                    self.finish(ready.runner.summary, ready.out)
                else:       # the run broke before it could sum up (the error line says why)
                    self.phase, self.runner = "idle", None
                    self._changed()
