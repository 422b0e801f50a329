"""The confirm dialogs: `Confirm` asks one yes/no question; `ConfirmCommands` is the modal every
host-changing action goes through.

`ConfirmCommands` shows the EXACT command line that will run on each host; Enter or `y` confirms, Esc or
`n` cancels. With `override_label`, the caller asks the operator to explicitly override a failed gate
(e.g. preflight failures): `o` ticks the box, and confirming is only possible once it is ticked.
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

from cockpit.tui.keys import hints


class Confirm(ModalScreen[bool]):
    """A question; `y` answers yes, Esc or `n` no. `yes`/`no` name what each answer does."""

    BINDINGS = [
        Binding("y", "answer(True)", "Yes", id="confirm.yes"),
        Binding("escape,n", "answer(False)", "No", id="confirm.no"),
    ]
    DEFAULT_CSS = """
    Confirm { align: center middle; }
    Confirm > Vertical { width: 90; max-width: 95%; height: auto; border: thick $warning;
                         background: $surface; padding: 0 1; }
    Confirm .confirm-keys { padding-top: 1; }
    """

    def __init__(self, question: str, *, yes: str = "yes", no: str = "no", detail: str = ""):
        super().__init__()
        self.question, self.yes, self.no, self.detail = question, yes, no, detail

    def compose(self) -> ComposeResult:
        with Vertical():
            yield Static(Text(self.question, style="bold"), markup=False, classes="confirm-question")
            if self.detail:
                yield Static(Text(self.detail), markup=False, classes="confirm-detail")
            yield Static(hints(self, ("answer(True)", "answer(False)"),
                               labels={"answer(True)": self.yes, "answer(False)": self.no}),
                         markup=False, classes="confirm-keys")

    def action_answer(self, yes: bool) -> None:
        self.dismiss(yes)


@dataclass(frozen=True)
class ConfirmResult:
    """The operator confirmed; `override` is True when they ticked the override box."""

    override: bool = False


class ConfirmCommands(ModalScreen[ConfirmResult | None]):
    """Shows `(host label, command line)` pairs; dismisses with a ConfirmResult, or None on cancel."""

    BINDINGS = [
        Binding("enter,y", "confirm", "Run these commands", id="confirm.run"),
        Binding("escape,n", "cancel", "Cancel", id="confirm.cancel"),
        Binding("o", "toggle_override", "Tick the override to allow", id="confirm.override", show=False),
    ]
    DEFAULT_CSS = """
    ConfirmCommands { align: center middle; }
    ConfirmCommands > Vertical { width: 90%; max-height: 90%; height: auto; border: thick $warning;
                                 background: $surface; padding: 0 1; }
    ConfirmCommands #confirm-commands { height: auto; max-height: 50vh; }
    ConfirmCommands .confirm-title { text-style: bold; padding-bottom: 1; }
    ConfirmCommands #confirm-override { padding-top: 1; }
    ConfirmCommands #confirm-keys { padding-top: 1; }
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
                    yield Static(Text.assemble((f"{label}\n", "bold"), ("  $ ", "muted"), (line, "command")),
                                 markup=False)
            if self.note:
                yield Static(Text(self.note, style="warn.soft"), id="confirm-note")
            if self.override_label is not None:
                yield Static(self._override_text(), id="confirm-override")
            yield Static(self._keys_text(), id="confirm-keys")

    def _override_text(self) -> Text:
        box = "[x]" if self.override else "[ ]"
        key = hints(self, ("toggle_override",)).plain.split(" ", 1)[0]
        return Text.assemble((f"{box} ", "bold"), (self.override_label or "", "fail"),
                             (f"  ({key})", "muted"))

    def _keys_text(self) -> Text:
        if self.override_label is not None and not self.override:
            return hints(self, ("toggle_override", "cancel"))
        return hints(self, ("confirm", "cancel"))

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
