"""The Chat transcript follows a streaming answer to its end: also across a switch to another pane and back
and across terminal resizes; an operator who scrolled up on purpose stays where they scrolled to, until
they scroll back to the end (issue 25)."""

from __future__ import annotations

from typing import Any

from textual.containers import VerticalScroll

from cockpit.api import ContentDelta, RoleStarted
from cockpit.api.status import ApiStatus
from cockpit.tui.app import CockpitApp
from cockpit.tui.panes.chat import ChatPane

READY = ApiStatus("ready", "ready", url="http://127.0.0.1:40123", checked_at=0.0)


class Answer:
    """An answer streaming into the pane a few lines at a time, as the stream worker feeds it."""

    def __init__(self, pane: ChatPane) -> None:
        self.pane, self.lines = pane, 0
        pane.session.add_user("Count from 1 to 500, one number a line.")
        pane.rebuild()
        pane.begin_answer()
        pane.feed(RoleStarted())

    def more(self, n: int = 12) -> None:
        self.pane.feed(ContentDelta("".join(f"{self.lines + i + 1}\n" for i in range(n))))
        self.lines += n
        self.pane.flush()


async def settle(pilot: Any) -> None:
    for _ in range(3):
        await pilot.pause()


def at_end(log: VerticalScroll) -> bool:
    return log.max_scroll_y > 0 and log.scroll_y == log.max_scroll_y


async def open_chat(app: CockpitApp, pilot) -> ChatPane:  # type: ignore[no-untyped-def]
    """The Chat pane shown, the API ready."""
    await pilot.pause()
    app.action_show_pane("chat")
    pane = app.query_one(ChatPane)
    pane.show_api_status(READY)
    await settle(pilot)
    return pane


async def test_the_transcript_follows_the_answer_across_a_pane_switch_and_resizes(fixed_config) -> None:  # type: ignore[no-untyped-def]
    app = CockpitApp(fixed_config, connect=False)
    async with app.run_test(size=(120, 36)) as pilot:
        pane = await open_chat(app, pilot)
        log = pane.log_view
        answer = Answer(pane)
        for _ in range(4):
            answer.more()
            await settle(pilot)
        assert at_end(log), (log.scroll_y, log.max_scroll_y)

        app.action_show_pane("hosts")          # away while the answer goes on streaming
        await settle(pilot)
        for _ in range(3):
            answer.more()
            await pilot.pause()
        app.action_show_pane("chat")           # and back: at the end, the newest lines in view
        await settle(pilot)
        assert at_end(log), (log.scroll_y, log.max_scroll_y)
        answer.more()
        await settle(pilot)
        assert at_end(log), (log.scroll_y, log.max_scroll_y)

        for size in ((80, 24), (160, 48), (100, 30)):    # narrower rewraps, taller shows more
            await pilot.resize_terminal(*size)
            await settle(pilot)
            assert at_end(log), (size, log.scroll_y, log.max_scroll_y)
            answer.more()
            await settle(pilot)
            assert at_end(log), (size, log.scroll_y, log.max_scroll_y)


async def test_a_deliberate_scroll_up_is_kept_until_the_operator_scrolls_back_down(fixed_config) -> None:  # type: ignore[no-untyped-def]
    app = CockpitApp(fixed_config, connect=False)
    async with app.run_test(size=(120, 36)) as pilot:
        pane = await open_chat(app, pilot)
        log = pane.log_view
        answer = Answer(pane)
        for _ in range(6):
            answer.more()
            await settle(pilot)
        assert at_end(log)

        log.scroll_page_up(animate=False)      # what PageUp or the wheel does: the operator reads back
        await settle(pilot)
        kept = log.scroll_y
        assert 0 < kept < log.max_scroll_y
        answer.more()
        await settle(pilot)
        assert log.scroll_y == kept

        app.action_show_pane("hosts")
        await settle(pilot)
        answer.more()
        app.action_show_pane("chat")
        await settle(pilot)
        assert log.scroll_y == kept

        await pilot.resize_terminal(100, 40)
        await settle(pilot)
        answer.more()
        await settle(pilot)
        assert log.scroll_y == kept and log.scroll_y < log.max_scroll_y

        while log.scroll_y < log.max_scroll_y:  # back to the end by hand: following again
            log.scroll_page_down(animate=False)
            await settle(pilot)
        answer.more()
        await settle(pilot)
        assert at_end(log), (log.scroll_y, log.max_scroll_y)
