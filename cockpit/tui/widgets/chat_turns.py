"""Widgets of the chat transcript: user turns, assistant turns (thinking apart, collapsible), notices.

Model text is never interpreted as console markup: it is rendered as ``rich.text.Text`` (plain) or
``rich.markdown.Markdown`` (the operator's toggle), and every text from the model or the server (answer,
thinking, tool calls, error messages, smoke details) is neutralised first (``cockpit.safetext``), so
terminal escapes in it show as visible symbols and ``[bold]…[/]`` as the characters it is.
Streamed text is buffered by :class:`AssistantTurn`
and rendered by :meth:`AssistantTurn.flush`, which the pane calls on a ~50 ms timer, so a burst of
chunks costs one render per frame, not one per chunk. Until its first token, an answer shows how long it
has waited (the pane ticks it once a second); a failed one shows its error and remedy in the turn.
Styles are the theme's semantic roles (``cockpit.tui.styles``), never colours.
"""

from __future__ import annotations

import json
from collections.abc import Sequence

from rich.console import RenderableType
from rich.markdown import Markdown
from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Vertical
from textual.widgets import Collapsible, Static

from cockpit.api import SmokeStep, StreamStats, ToolCall
from cockpit.api.stream import stats_parts
from cockpit.safetext import neutralise, neutralise_block


def pretty_arguments(arguments_json: str) -> str:
    """Tool-call arguments pretty-printed; invalid JSON is shown as the model produced it."""
    try:
        return json.dumps(json.loads(arguments_json or "{}"), indent=2, ensure_ascii=False)
    except (ValueError, TypeError, RecursionError):
        return arguments_json


def stats_text(stats: StreamStats | None, finish: str | None, *, streaming: bool,
               note: str = "", waited: int | None = None) -> Text:
    """`TTFT 0.31 s · 50.5 tok/s · 128 tokens · finish stop`; tok/s only from usage, never from chunks.

    ``waited``: whole seconds the answer has waited for its first token so far (shown while it waits).
    """
    parts = stats_parts(stats, finish, streaming=streaming, waited=waited, estimates=False)
    if note:
        parts.append(note)
    if streaming:
        style = "warn.soft"
    else:
        style = {"error": "fail.soft", "abort": "warn", "stopped": "warn"}.get(finish or "", "muted")
    return Text(" · ".join(parts), style=style)


class UserTurn(Static):
    """What the operator sent (text, attached images, settings used)."""

    DEFAULT_CSS = "UserTurn { margin: 1 0 0 0; padding: 0 1; background: $boost; }"

    def __init__(self, text: str, settings: str, images: int = 0, *, id: str | None = None):
        body = Text.assemble(("you", "user"), ("  " + settings, "muted"))
        if images:
            body.append(f"  [{images} image{'s' if images > 1 else ''}]", style="accent")
        body.append("\n")
        body.append(neutralise_block(text))  # a loaded session's text is a file's
        super().__init__(body, markup=False, id=id)


class ToolResultTurn(Static):
    """A tool result the operator typed back."""

    DEFAULT_CSS = "ToolResultTurn { margin: 1 0 0 0; padding: 0 1; background: $boost; }"

    def __init__(self, name: str, call_id: str, content: str, *, id: str | None = None):
        head = neutralise(f"  {name} ({call_id})") + "\n"
        body = Text.assemble(("tool result", "accent"), (head, "muted"), neutralise_block(content))
        super().__init__(body, markup=False, id=id)


class Notice(Static):
    """A line from the cockpit itself (error, hint, saved file), never from the model."""

    DEFAULT_CSS = "Notice { margin: 1 0 0 0; padding: 0 1; }"

    def __init__(self, text: str, style: str = "warn", remedy: str = "", *, id: str | None = None):
        """`style`: the role of the text (``warn``, ``fail``, ``ok.soft`` …)."""
        body = Text(neutralise_block(text), style=style)  # may quote the server (an error message)
        if remedy:
            body.append("\nremedy: " + neutralise_block(remedy), style="muted")
        super().__init__(body, markup=False, id=id)


class SmokeTurn(Static):
    """The smoke test's steps as they finish: PASS/FAIL, timing, detail."""

    DEFAULT_CSS = "SmokeTurn { margin: 1 0 0 0; padding: 0 1; border: round $accent; height: auto; }"

    def __init__(self, *, id: str | None = None):
        super().__init__(Text("smoke test: running…", style="bold"), markup=False, id=id)
        self.steps: list[SmokeStep] = []
        self.done = False

    def add_step(self, step: SmokeStep) -> None:
        self.steps.append(step)
        self._render_steps()

    def finish(self, passed: bool, error: str = "") -> None:
        self.done = True
        self._render_steps(passed, error)

    def _render_steps(self, passed: bool | None = None, error: str = "") -> None:
        if passed is None:
            head = Text("smoke test: running…", style="bold")
        else:
            head = Text("smoke test: " + ("PASSED" if passed else "FAILED"), style="ok" if passed else "fail")
        lines = [head]
        for s in self.steps:
            line = Text.assemble(("PASS " if s.ok else "FAIL ", "ok" if s.ok else "fail"),
                                 f"{s.name:<13} ", (f"{s.seconds:7.3f} s  ", "muted"), neutralise(s.detail))
            lines.append(line)
            if not s.ok and s.remedy:
                lines.append(Text("      remedy: " + neutralise(s.remedy), style="muted"))
        if error:
            lines.append(Text(neutralise(error), style="fail.soft"))
        self.update(Text("\n").join(lines))


class AssistantTurn(Vertical):
    """One answer: thinking (collapsible), content, tool calls, and a stats line; fed in pieces."""

    DEFAULT_CSS = """
    AssistantTurn { height: auto; margin: 1 0 0 0; padding: 0 1; }
    AssistantTurn .turn-head { color: $success; text-style: bold; }
    AssistantTurn Collapsible { padding: 0; margin: 0; border: none; background: $surface; }
    AssistantTurn .reasoning { color: $text-muted; padding: 0 0 0 2; }
    AssistantTurn .tool-calls { color: $warning; }
    AssistantTurn .error { color: $error; }
    """

    def __init__(self, *, markdown: bool = False, collapsed: bool = False, started_at: float = 0.0,
                 id: str | None = None):
        super().__init__(id=id)
        self.started_at = started_at  # on the pane's clock: when the request was sent
        self.waited: int | None = None
        self.error: tuple[str, str] | None = None  # message, remedy
        self.markdown = markdown
        self.collapsed = collapsed
        self.reasoning: list[str] = []
        self.content: list[str] = []
        self.tool_calls: list[ToolCall] = []
        self.tool_names: dict[int, str] = {}
        self.tool_args: dict[int, list[str]] = {}
        self.stats: StreamStats | None = None
        self.finish: str | None = None
        self.note = ""
        self.streaming = True
        self._dirty = True
        self._ready = False

    def compose(self) -> ComposeResult:
        yield Static(Text("model"), classes="turn-head", markup=False)
        with Collapsible(title="thinking", collapsed=self.collapsed, classes="thinking"):
            yield Static("", classes="reasoning", markup=False)
        yield Static("", classes="content", markup=False)
        yield Static("", classes="tool-calls", markup=False)
        yield Static("", classes="stats", markup=False)
        yield Static("", classes="error", markup=False)

    def on_mount(self) -> None:
        self._ready = True
        self._dirty = True
        self.flush()  # whatever was fed before the turn was on screen

    # feeding (cheap: no rendering here) -------------------------------------------------------------

    def add_reasoning(self, text: str) -> None:
        self.reasoning.append(text)
        self._dirty = True

    def add_content(self, text: str) -> None:
        self.content.append(text)
        self._dirty = True

    def add_tool_delta(self, index: int, name: str | None, fragment: str) -> None:
        if name:
            self.tool_names[index] = self.tool_names.get(index, "") + name
        self.tool_args.setdefault(index, []).append(fragment)
        self._dirty = True

    def set_stats(self, stats: StreamStats | None) -> None:
        if stats is not None and stats != self.stats:
            self.stats = stats
            self._dirty = True

    @property
    def got_token(self) -> bool:
        """True once any content, thinking or tool-call text arrived."""
        return bool(self.content or self.reasoning or self.tool_args)

    def set_waited(self, seconds: float) -> None:
        """How long the answer has waited for its first token (shown in whole seconds)."""
        whole = max(int(seconds), 0)
        if whole != self.waited:
            self.waited = whole
            self._dirty = True

    def fail_with(self, message: str, remedy: str = "", tool_calls: Sequence[ToolCall] = ()) -> None:
        """The stream failed: ``finish error``, and the error with its remedy under the stats line."""
        self.error = (message, remedy)
        self.finish_with("error", tool_calls)

    def finish_with(self, finish: str | None, tool_calls: Sequence[ToolCall] = (), note: str = "") -> None:
        self.finish = finish
        self.tool_calls = list(tool_calls)
        self.note = note
        self.streaming = False
        self._dirty = True

    def set_markdown(self, on: bool) -> None:
        self.markdown = on
        self._dirty = True

    def set_collapsed(self, collapsed: bool) -> None:
        self.collapsed = collapsed
        if self._ready:
            self.query_one(Collapsible).collapsed = collapsed

    @property
    def content_text(self) -> str:
        return "".join(self.content)

    @property
    def reasoning_text(self) -> str:
        return "".join(self.reasoning)

    # rendering (once per frame at most) -------------------------------------------------------------

    def flush(self) -> None:
        """Render what arrived since the last flush (no-op when nothing changed)."""
        if not self._dirty or not self._ready:
            return
        self._dirty = False
        reasoning = self.reasoning_text
        thinking = self.query_one(Collapsible)
        thinking.display = bool(reasoning)
        thinking.title = f"thinking · {len(reasoning)} chars" + (" (streaming)" if self.streaming else "")
        self.query_one(".reasoning", Static).update(Text(neutralise_block(reasoning)))
        content = neutralise_block(self.content_text)
        body: RenderableType = Markdown(content) if self.markdown and content else Text(content)
        self.query_one(".content", Static).update(body)
        self.query_one(".tool-calls", Static).update(self._tool_text())
        self.query_one(".stats", Static).update(
            stats_text(self.stats, self.finish, streaming=self.streaming, note=self.note, waited=self.waited))
        error = self.query_one(".error", Static)
        error.display = self.error is not None
        if self.error is not None:
            message, remedy = self.error
            text = Text(neutralise_block(message))
            if remedy:
                text.append("\nremedy: " + neutralise_block(remedy), style="muted")
            error.update(text)

    def _tool_text(self) -> Text:
        calls = [(c.name, c.id, c.arguments_json) for c in self.tool_calls]
        if not calls:  # still streaming: show what arrived so far
            calls = [(self.tool_names.get(i, "?"), "", "".join(self.tool_args.get(i, [])))
                     for i in sorted(self.tool_args)]
        out = Text()
        for name, call_id, args in calls:
            if out:
                out.append("\n")
            out.append("tool call ", style="bold")
            out.append(neutralise(name), style="accent")
            if call_id:
                out.append(f"  id {neutralise(call_id)}", style="muted")
            out.append("\n")
            out.append(neutralise_block(pretty_arguments(args) if not self.streaming else args))
        return out
