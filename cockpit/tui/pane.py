"""The Pane base: what every pane of the cockpit is and does the same way.

A pane gets the app's :class:`CockpitContext`, names the widget that takes the keyboard (``FOCUS``, a
selector; none: the pane itself), takes the focus when it is shown, builds its key hints from its own
bindings (so a key remapped in ``[ui.keymap]`` shows as remapped), redraws when the theme changes
(:meth:`refresh_view`), and shows a failed worker's error and remedy on its error line instead of
swallowing it. Panes keep no verdict of their own: they render the context's live model.

The app talks to every pane through this contract, never by pane class: it broadcasts the live model's
events (:meth:`model_changed`), the stats monitor's judgements (:meth:`stats_changed`) and host status
changes (:meth:`host_changed`) to every composed pane, and asks each pane what quitting or switching
clusters would cut short (:meth:`busy`).
"""

from __future__ import annotations

from typing import ClassVar

from rich.text import Text
from textual.binding import Binding
from textual.containers import Vertical
from textual.widget import Widget
from textual.widgets import Static, TabbedContent, TabPane
from textual.worker import Worker

from cockpit.hosts import HostStatus
from cockpit.recipe.timeline_events import LaunchEvent
from cockpit.safetext import safe
from cockpit.tui.context import CockpitContext
from cockpit.tui.keys import current_bindings, hints, key_for


class Pane(Vertical):
    """Base of every pane (subclasses set TITLE, HEADLESS, BINDINGS, and FOCUS or can_focus)."""

    TITLE: ClassVar[str] = ""
    """The tab's title (its number comes from the pane's place in the app's registry)."""
    HEADLESS: ClassVar[str] = ""
    """The headless command that does what this pane does (quoted in worker-error remedies)."""
    FOCUS: ClassVar[str | None] = None
    """Selector of the widget that takes the keyboard when the pane is shown; None: the pane itself."""
    HINTS: ClassVar[tuple[str, ...] | None] = None
    """Actions (names, without parameters) the key hints list, in order; None: every shown binding."""

    DEFAULT_CSS = """
    Pane > #pane-error { height: auto; padding: 0 1; display: none; }
    Pane > #pane-error.shown { display: block; }
    """

    def __init__(self, ctx: CockpitContext, *, id: str | None = None, classes: str | None = None):
        super().__init__(id=id, classes=classes)
        self.ctx = ctx
        self.worker_error: Text | None = None
        self._host_names: dict[int, str] = {}     # the names hosts gave themselves, as last drawn

    # ---- focus ----------------------------------------------------------------------------------------

    @property
    def keyboard_widget(self) -> Widget:
        return self.query_one(self.FOCUS) if self.FOCUS else self

    def take_focus(self) -> None:
        """Give the keys to this pane's keyboard widget, unless the focus is in the pane already."""
        focused = self.app.focused
        if focused is not None and self in focused.ancestors_with_self:
            return
        self.keyboard_widget.focus()

    def on_show(self) -> None:
        """Shown: take the keys once the tab is really the active one (focusing a widget in a hidden tab
        would make the tabbed content switch to it)."""
        self.call_after_refresh(self._focus_if_shown)

    def _focus_if_shown(self) -> None:
        if self.is_mounted and self.shown:
            self.take_focus()

    @property
    def composed(self) -> bool:
        """Mounted with its widgets: not yet (before compose) or no longer (the app is closing and its
        children went first) is a pane that a model message must not redraw."""
        return self.is_mounted and bool(self.children)

    @property
    def shown(self) -> bool:
        """Whether the app's tabs show this pane now (standalone: whether it is displayed)."""
        tab = next((a for a in self.ancestors if isinstance(a, TabPane)), None)
        tabbed = next((a for a in self.ancestors if isinstance(a, TabbedContent)), None)
        if tab is None or tabbed is None:
            return self.display
        return tabbed.active == tab.id

    # ---- keys -----------------------------------------------------------------------------------------

    def bindings(self) -> list[tuple[Binding, str]]:
        """This pane's bindings as the keymap has them now: (binding, key shown)."""
        return current_bindings(self)

    def key_for(self, action: str, *, disabled: bool = False) -> str:
        """The key bound to `action` now (e.g. "d"); "" when none is (unbound, or off now unless
        `disabled`)."""
        return key_for(self, action, disabled=disabled)

    def key_hints(self, actions: tuple[str, ...] | None = None, labels: dict[str, str] | None = None) -> Text:
        """ "d dry run · l launch · …": a status line's hints, from the bindings (HINTS by default)."""
        return hints(self, actions if actions is not None else self.HINTS, labels=labels)

    def key_hint_parts(self, labels: dict[str, str] | None = None) -> list[Text]:
        """One hint per action of HINTS that has a key now ("d dry run"), for a status line that packs
        its parts to the width."""
        parts = [self.key_hints((action,), labels=labels) for action in self.HINTS or ()]
        return [part for part in parts if part.plain]

    # ---- rendering ------------------------------------------------------------------------------------

    def refresh_view(self) -> None:
        """Draw the pane from the model again (the theme changed, the keymap changed, …)."""

    def on_mount(self) -> None:
        self.mount(Static(id="pane-error", markup=False))

    # ---- what the app tells every pane ----------------------------------------------------------------

    def busy(self) -> str:
        """What quitting or switching clusters now would cut short ("a benchmark is running …"); "" when
        nothing would."""
        return ""

    def model_changed(self, event: LaunchEvent) -> None:
        """The live model of the cluster changed (`event` says how)."""

    def stats_changed(self) -> None:
        """The stats monitor judged again (`ctx.monitor.stats` may have changed)."""

    def host_changed(self, status: HostStatus) -> None:
        """One host's connection status changed (or, when not connected, its age moved on)."""

    # ---- host names -----------------------------------------------------------------------------------

    def host_label(self, rank: int) -> str:
        """A rank's host as the panes name it: the name the host gave itself once connected (an SSH target
        may say nothing: every demo host is 127.0.0.1), else its SSH target; neutralised."""
        if rank not in self.ctx.config.ranks:
            return "?"
        return safe(self.ctx.fleet[rank].status.hostname or self.ctx.config.host(rank).ssh, 200)

    def renamed(self, status: HostStatus) -> bool:
        """Whether `status` brings a host name this pane has not drawn yet (a pane that shows
        :meth:`host_label` redraws then)."""
        if not status.hostname or self._host_names.get(status.rank) == status.hostname:
            return False
        self._host_names[status.rank] = status.hostname
        return True

    # ---- worker errors --------------------------------------------------------------------------------

    def on_worker_state_changed(self, event: Worker.StateChanged) -> None:
        """Worker state messages go to the pane only (they do not bubble): hand them to the app, which
        shows a failed worker's error (notification + this pane's error line)."""
        forward = getattr(self.app, "on_worker_state_changed", None)
        if forward is not None:
            forward(event)

    def show_worker_error(self, text: Text | None) -> None:
        """Show (or, with None, clear) the error line of a failed worker."""
        self.worker_error = text
        lines = self.query("#pane-error")
        if not lines:
            return
        line = lines.first(Static)
        line.update(text if text is not None else "")
        line.set_class(text is not None, "shown")

