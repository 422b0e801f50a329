"""The cluster picker: every cluster the cockpit knows (main cluster.toml, `cluster.d/*.toml`, more
`--config`s), the active one marked, a broken file with its reason; Enter opens the highlighted one."""

from __future__ import annotations

from collections.abc import Sequence

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import OptionList, Static
from textual.widgets.option_list import Option

from cockpit.config.clusters import ClusterRef
from cockpit.safetext import safe
from cockpit.tui.keys import hints


def cluster_label(ref: ClusterRef, active: bool) -> Text:
    """`● name  path` (or `○`), with the first problem of a file that cannot be used."""
    text = Text("● " if active else "○ ", style="bold" if active else "")
    text.append(safe(ref.name, 60), style="bold" if active else "")
    text.append(f"  {safe(str(ref.path), 120)}", style="muted")
    if ref.error is not None:
        key, reason = ref.error.problems[0] if ref.error.problems else ("", "cannot be used")
        problem = f"{key}: {reason}" if key else reason
        text.append(f"\n    cannot be used: {safe(problem, 200)}", style="fail.soft")
    return text


class ClusterPicker(ModalScreen[ClusterRef | None]):
    """Dismisses with the chosen ClusterRef, or None on Esc."""

    BINDINGS = [
        Binding("enter", "choose", "Open this cluster", id="clusters.open"),
        Binding("escape,q", "cancel", "Cancel", id="clusters.cancel"),
    ]
    DEFAULT_CSS = """
    ClusterPicker { align: center middle; }
    ClusterPicker > Vertical { width: 100; max-width: 95%; height: auto; max-height: 80%;
                               border: thick $accent; background: $surface; padding: 0 1; }
    ClusterPicker .clusters-title { text-style: bold; padding-bottom: 1; }
    ClusterPicker OptionList { height: auto; max-height: 60vh; }
    ClusterPicker .clusters-keys { padding-top: 1; }
    """

    def __init__(self, clusters: Sequence[ClusterRef], active: int | None):
        super().__init__()
        self.clusters = list(clusters)
        self.active = active        # the index of the open cluster (the app's own rule for which it is)

    def compose(self) -> ComposeResult:
        with Vertical():
            yield Static("Clusters", classes="clusters-title")
            yield OptionList(*(Option(cluster_label(ref, i == self.active), id=str(i))
                               for i, ref in enumerate(self.clusters)), id="clusters-list")
            yield Static(hints(self, ("choose", "cancel")), markup=False, classes="clusters-keys")

    def on_mount(self) -> None:
        options = self.query_one(OptionList)
        options.highlighted = self.active or 0
        options.focus()

    def on_option_list_option_selected(self, event: OptionList.OptionSelected) -> None:
        event.stop()
        self.dismiss(self.clusters[int(event.option.id or 0)])

    def action_choose(self) -> None:
        index = self.query_one(OptionList).highlighted
        self.dismiss(self.clusters[index] if index is not None else None)

    def action_cancel(self) -> None:
        self.dismiss(None)
