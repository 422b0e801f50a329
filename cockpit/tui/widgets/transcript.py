"""A scrolling transcript that follows its end: while the operator is at the end, new content, a resize
and being shown again after another pane keep it there; once they scroll up on purpose it stays where they
put it, until they scroll back to the end.

The follow state is taken from where the operator leaves the scroll position (every change of `scroll_y`),
not from where it happens to be when content arrives: content that grows, or a width that rewraps it, while
the transcript is hidden or mid-resize moves the end away without anyone having scrolled.
"""

from __future__ import annotations

from textual import events
from textual.containers import VerticalScroll
from textual.geometry import Size


class Transcript(VerticalScroll):
    """A VerticalScroll that keeps to its end while `following`."""

    def __init__(self, *, id: str | None = None, classes: str | None = None) -> None:
        super().__init__(id=id, classes=classes)
        self.following = True

    def watch_scroll_y(self, old_value: float, new_value: float) -> None:
        super().watch_scroll_y(old_value, new_value)
        if self.size.height:                     # a hidden transcript's position says nothing
            self.following = round(new_value) >= self.max_scroll_y

    def watch_virtual_size(self, size: Size) -> None:
        """The content's height changed (more text, or rewrapped): back to the end once laid out."""
        if self.following:
            self.scroll_end(animate=False)

    def on_resize(self, event: events.Resize) -> None:
        """Resized, or shown again after another pane: back to the end once laid out."""
        if self.following:
            self.scroll_end(animate=False)

    def follow(self) -> None:
        """To the end and following again (the operator sent a message, or a turn began)."""
        self.following = True
        self.scroll_end(animate=False)
