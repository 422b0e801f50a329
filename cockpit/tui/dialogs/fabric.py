"""The fabric test dialog (Preflight pane, key `f`, or the palette): shows the exact perftest commands, runs
them on Enter (one pair at a time, progress per pair), then the Gb/s and µs matrices, the slow link and its
remedy. While the engine's container runs, the test is refused until `o` confirms it anyway. The same
core as `r37-cockpit fabric` (`cockpit.recipe.fabric`); everything a host printed is neutralised."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from rich.text import Text
from textual import work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical, VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Static

from cockpit.config import ClusterConfig
from cockpit.hosts import Fleet
from cockpit.recipe.fabric import (
    FabricReport,
    PairResult,
    choose_pairs,
    engine_serving,
    fabric_text,
    planned_commands,
    run_fabric,
    save_result,
)
from cockpit.safetext import neutralise, safe
from cockpit.tui.keys import hints


class FabricScreen(ModalScreen[FabricReport | None]):
    """plan → (refused →) running → done; dismisses with the last report (None when none ran)."""

    BINDINGS = [
        Binding("enter,y", "run", "Run the test", id="fabric.run"),
        Binding("o", "run_anyway", "Run while the engine serves", id="fabric.override", show=False),
        Binding("p", "toggle_pairs", "All pairs / ring", id="fabric.pairs"),
        Binding("escape,q", "close", "Close", id="fabric.close"),
    ]
    DEFAULT_CSS = """
    FabricScreen { align: center middle; }
    FabricScreen > Vertical { width: 95%; height: 90%; border: thick $warning; background: $surface;
                              padding: 0 1; }
    FabricScreen #fabric-title { text-style: bold; }
    FabricScreen #fabric-body { height: 1fr; }
    FabricScreen #fabric-keys { height: auto; padding-top: 1; }
    """

    def __init__(self, config: ClusterConfig, fleet: Fleet | None, *, pairs: str = "all",
                 size: int | None = None, state_dir: Path | None = None) -> None:
        super().__init__(id="fabric-screen")
        self.config, self.fleet = config, fleet
        self.mode = pairs
        self.msg_size = size or config.fabric.size_bytes
        self.state = "plan"                 # plan | refused | running | done
        self.serving: list[int] = []
        self.progress: list[PairResult] = []
        self.report: FabricReport | None = None
        self.state_dir = state_dir

    @property
    def pairs(self) -> list[tuple[int, int]]:
        return choose_pairs(self.config.ranks, self.mode)

    def compose(self) -> ComposeResult:
        with Vertical():
            yield Static(id="fabric-title", markup=False)
            with VerticalScroll(id="fabric-body"):
                yield Static(id="fabric-text", markup=False)
            yield Static(id="fabric-keys", markup=False)

    def on_mount(self) -> None:
        self.refresh_view()

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action == "run":
            return self.state in ("plan", "done")
        if action == "run_anyway":
            return self.state == "refused"
        if action == "toggle_pairs":
            return self.state in ("plan", "done")
        return True

    # ---- rendering -------------------------------------------------------------------------------------

    def body(self) -> Text:
        text = Text()
        if self.state == "refused":             # first: seen without scrolling
            text.append(f"The engine runs on rank(s) {', '.join(map(str, self.serving))}: the test would "
                        "compete with its traffic and its figures would be wrong.\n\n", style="warn")
        if self.state in ("plan", "refused"):
            text.append(f"{len(self.pairs)} pair(s) ({self.mode}), one at a time; each side under `timeout "
                        f"{self.config.fabric.timeout_s:g}`, the server ended by its pid at the end:\n\n")
            for line in planned_commands(self.config, self.pairs, self.msg_size):
                text.append(f"{neutralise(line)}\n", style="muted")
        elif self.state == "running":
            text.append(f"running {len(self.progress)}/{len(self.pairs)} …\n\n")
            for p in self.progress:
                text.append_text(pair_line(p))
        elif self.report is not None:
            if self.report.refused:
                text.append(safe(self.report.refused, 600), style="fail")
            else:
                data = self.report.as_dict()
                lines = fabric_text(data, sorted(self.config.ranks)).splitlines()
                verdict = [ln for ln in lines if ln.startswith(("PASSED", "NOT PASSED", "what to do"))]
                rest = [ln for ln in lines if ln not in verdict]
                while rest and not rest[-1]:
                    rest.pop()
                for line in [*verdict, "", *rest]:      # the verdict and its remedy first: seen unscrolled
                    style = ("fail" if line.startswith(("FAIL", "NOT PASSED")) else
                             "warn" if line.startswith("SLOW") or " SLOW" in line else
                             "ok" if line.startswith("PASSED") else "")
                    text.append(line + "\n", style=style)
        return text

    def refresh_view(self) -> None:
        if not self.is_mounted:
            return
        titles = {"plan": "Fabric test — these commands will run (perftest: ib_write_bw, ib_write_lat)",
                  "refused": "Fabric test — refused while the engine serves",
                  "running": "Fabric test — running",
                  "done": "Fabric test — " + ("PASSED" if self.report and self.report.passed
                                              else "NOT PASSED")}
        self.query_one("#fabric-title", Static).update(Text(titles[self.state], style="bold"))
        self.query_one("#fabric-text", Static).update(self.body())
        actions = {"plan": ("run", "toggle_pairs", "close"), "refused": ("run_anyway", "close"),
                   "running": ("close",), "done": ("run", "toggle_pairs", "close")}[self.state]
        labels = {"run": "run again" if self.state == "done" else "run the test"}
        self.query_one("#fabric-keys", Static).update(hints(self, actions, labels=labels))

    # ---- actions ---------------------------------------------------------------------------------------

    def action_toggle_pairs(self) -> None:
        self.mode = "ring" if self.mode == "all" else "all"
        self.state = "plan"
        self.refresh_view()

    def action_run(self) -> None:
        self._start(override=False)

    def action_run_anyway(self) -> None:
        self._start(override=True)

    def action_close(self) -> None:
        self.workers.cancel_group(self, "fabric")
        self.dismiss(self.report)

    def _start(self, override: bool) -> None:
        if self.fleet is None:
            return
        self.progress = []
        self.state = "running"
        self.refresh_view()
        self._run(override)

    def pair_done(self, p: PairResult) -> None:
        self.progress.append(p)
        self.refresh_view()

    def show_report(self, report: FabricReport) -> None:
        self.report = report
        self.state = "done"
        self.refresh_view()

    def show_refused(self, serving: Sequence[int]) -> None:
        self.serving = list(serving)
        self.state = "refused"
        self.refresh_view()

    @work(exclusive=True, group="fabric", exit_on_error=False)
    async def _run(self, override: bool) -> None:
        assert self.fleet is not None
        serving = await engine_serving(self.fleet, self.config)
        if serving and not override:
            self.show_refused(serving)
            return
        report = await run_fabric(self.fleet, self.config, self.pairs, self.msg_size, self.pair_done)
        if self.state_dir is not None:
            try:
                save_result(self.state_dir, report)
            except OSError as exc:
                self.app.notify(f"the result was not kept for the launch gate: {exc}", severity="warning")
        self.show_report(report)


def pair_line(p: PairResult) -> Text:
    text = Text()
    bw = f"{p.bw.avg_gbps:.1f} Gb/s" if p.bw else "—"
    lat = f"{p.lat.avg_us:.2f} µs" if p.lat and p.lat.avg_us is not None else "—"
    text.append(f"pair {p.pair}: {bw}, {lat}")
    if p.problem:
        text.append(f" — {safe(p.problem, 200)}", style="fail" if p.verdict == "fail" else "warn")
    text.append("\n")
    return text
