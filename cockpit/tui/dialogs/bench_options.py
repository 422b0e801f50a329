"""The Bench pane's run options (`r37-cockpit bench --repeat N --depth LIST`): how many times each decode and
depth cell is measured, and the single-stream depth cells (token counts, k = 1024; empty: none). Each field
is checked by the CLI's own parser (`cockpit.bench.suite`): a bad value is said in the dialog, which stays
open. Enter in "repeat" moves to "depth", Enter in "depth" accepts, Esc cancels (dismisses with
(repeat, depths), or None)."""

from __future__ import annotations

from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import Input, Static

from cockpit.bench.suite import MAX_REPEAT, parse_depths, parse_repeat, tokens_label
from cockpit.safetext import safe
from cockpit.tui.keys import hints


def depths_text(depths: tuple[int, ...]) -> str:
    """`0,8k,32k` (what `--depth` takes); empty: none."""
    return ",".join(tokens_label(d) for d in depths)


def parse_options(repeat: str, depth: str) -> tuple[int, tuple[int, ...]]:
    """The fields as the CLI reads `--repeat` and `--depth` (repeat empty: 1; depth empty: no depth cell);
    ValueError with the CLI's message otherwise."""
    n = parse_repeat(repeat.strip()) if repeat.strip() else 1
    depths = parse_depths(depth) if depth.strip() else ()
    return n, depths


class BenchOptions(ModalScreen[tuple[int, tuple[int, ...]] | None]):
    BINDINGS = [Binding("escape", "cancel", "Cancel", id="bench_options.cancel")]
    DEFAULT_CSS = """
    BenchOptions { align: center middle; }
    BenchOptions > Vertical { width: 84; max-width: 95%; height: auto; border: round $accent;
                              background: $surface; padding: 0 1; }
    BenchOptions #bench-options-error { color: $error; }
    """

    def __init__(self, repeat: int = 1, depths: tuple[int, ...] = ()) -> None:
        super().__init__()
        self.repeat, self.depths = repeat, depths

    def compose(self) -> ComposeResult:
        with Vertical():
            yield Static("Bench run options (as `r37-cockpit bench --repeat N --depth LIST`)", markup=False)
            yield Static(f"repeat: measure every decode and depth cell N times (1 to {MAX_REPEAT}: "
                         "mean ± std and a 95 % interval per cell)", markup=False)
            yield Input(value=str(self.repeat), id="bench-repeat")
            yield Static("depth: single-stream decode with that much context in front, e.g. 0,8k,32k "
                         "(tokens, k = 1024; empty: none)", markup=False)
            yield Input(value=depths_text(self.depths), id="bench-depth")
            yield Static("", id="bench-options-error", markup=False)
            keys = hints(self, ("cancel",))
            keys.append(" · ")
            keys.append("enter", style="bold")
            keys.append(" next / accept")
            yield Static(keys, markup=False)

    @on(Input.Submitted, "#bench-repeat")
    def _repeat(self) -> None:
        self.query_one("#bench-depth", Input).focus()

    @on(Input.Submitted, "#bench-depth")
    def _accept(self) -> None:
        try:
            chosen = parse_options(self.query_one("#bench-repeat", Input).value,
                                   self.query_one("#bench-depth", Input).value)
        except ValueError as exc:
            self.query_one("#bench-options-error", Static).update(Text(safe(str(exc), 200)))
            return
        self.dismiss(chosen)

    def action_cancel(self) -> None:
        self.dismiss(None)
