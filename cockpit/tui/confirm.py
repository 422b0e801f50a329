"""ConfirmCommands: the modal every host-changing action goes through.

It shows the EXACT command line that will run on each host; Enter or `y` confirms, Esc or `n` cancels.
With `override_label`, the caller asks the operator to explicitly override a failed gate (e.g.
preflight failures): `o` ticks the box, and confirming is only possible once it is ticked.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical, VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Static


@dataclass(frozen=True)
class ConfirmResult:
    """The operator confirmed; `override` is True when they ticked the override box."""

    override: bool = False


class ConfirmCommands(ModalScreen[ConfirmResult | None]):
    """Shows `(host label, command line)` pairs; dismisses with a ConfirmResult, or None on cancel."""

    BINDINGS = [
        Binding("enter,y", "confirm", "Confirm", id="confirm.yes"),
        Binding("escape,n", "cancel", "Cancel", id="confirm.no"),
        Binding("o", "toggle_override", "Override", id="confirm.override", show=False),
    ]
    DEFAULT_CSS = """
    ConfirmCommands { align: center middle; }
    ConfirmCommands > Vertical { width: 90%; max-height: 90%; height: auto; border: thick $warning;
                                 background: $surface; padding: 0 1; }
    ConfirmCommands #confirm-commands { height: auto; max-height: 24; }
    ConfirmCommands .confirm-title { text-style: bold; padding-bottom: 1; }
    ConfirmCommands #confirm-override { padding-top: 1; }
    ConfirmCommands #confirm-keys { padding-top: 1; color: $text-muted; }
    """

    def __init__(self, title: str, commands: Sequence[tuple[str, str]], *, note: str = "",
                 override_label: str | None = None):
        super().__init__()
        self.title_text = title
        self.commands = list(commands)
        self.note = note
        self.override_label = override_label
        self.override = False

    def compose(self) -> ComposeResult:
        with Vertical():
            yield Static(Text(self.title_text), classes="confirm-title")
            with VerticalScroll(id="confirm-commands"):
                for label, line in self.commands:
                    yield Static(Text.assemble((f"{label}\n", "bold"), ("  $ ", "dim"), (line, "cyan")),
                                 markup=False)
            if self.note:
                yield Static(Text(self.note, style="yellow"), id="confirm-note")
            if self.override_label is not None:
                yield Static(self._override_text(), id="confirm-override")
            yield Static(self._keys_text(), id="confirm-keys")

    def _override_text(self) -> Text:
        box = "[x]" if self.override else "[ ]"
        return Text.assemble((f"{box} ", "bold"), (self.override_label or "", "bold red"), ("  (o)", "dim"))

    def _keys_text(self) -> Text:
        if self.override_label is not None and not self.override:
            return Text("o tick the override to allow · Esc cancel")
        return Text("Enter / y run these commands · Esc / n cancel")

    def action_toggle_override(self) -> None:
        if self.override_label is None:
            return
        self.override = not self.override
        self.query_one("#confirm-override", Static).update(self._override_text())
        self.query_one("#confirm-keys", Static).update(self._keys_text())

    def action_confirm(self) -> None:
        if self.override_label is not None and not self.override:
            self.app.bell()
            return
        self.dismiss(ConfirmResult(self.override))

    def action_cancel(self) -> None:
        self.dismiss(None)


class ConfirmQuit(ModalScreen[bool]):
    """Quit while something is in progress? `y` quits, Esc or `n` stays."""

    BINDINGS = [
        Binding("y", "answer(True)", "Quit", id="quit.yes"),
        Binding("escape,n", "answer(False)", "Stay", id="quit.no"),
    ]
    DEFAULT_CSS = """
    ConfirmQuit { align: center middle; }
    ConfirmQuit > Vertical { width: 70%; height: auto; border: thick $warning; background: $surface;
                             padding: 0 1; }
    """

    def __init__(self, why: str):
        super().__init__()
        self.why = why

    def compose(self) -> ComposeResult:
        with Vertical():
            yield Static(Text(f"Quit now? {self.why}.", style="bold"), markup=False)
            yield Static(Text("y quit · Esc / n stay"), markup=False)

    def action_answer(self, yes: bool) -> None:
        self.dismiss(yes)
