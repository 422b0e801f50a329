"""Chat pane: the operator's conversation with the deployed model, and the smoke test on one key.

The API is reached through the SSH tunnel to rank 0 (or ``ctx.api_url``) via :class:`ApiEndpoint`; a
worker polls ``/health`` with backoff and the status line says whether the tunnel is down or the API is
not ready, with the remedy. Streams run in a worker; their events go through :meth:`ChatPane.feed`
(also what snapshot tests call) into buffers that a 50 ms timer renders. The stop key cancels the
worker, which closes the HTTP response, so the engine aborts the request.

No answer waits forever: the deadlines of ``[engine]`` in cluster.toml (``first_token_timeout_s``,
``idle_timeout_s``) end a stream that gets no first token, or no token mid-answer, in time; the turn then
shows the error and its remedy and the input takes the next message. Until the first token the turn shows
how long it has waited, ticked once a second on :attr:`ChatPane.clock` (tests freeze it).

Keys are the pane's bindings (remappable in ``[ui.keymap]``); the key hints under the input and every
message naming a key ask the keymap for it. Colours are the theme's roles (``cockpit.tui.styles``).

Typed commands (Enter sends anything else as a message): the table :data:`COMMANDS` (/temp, /top_p, /max,
/effort, /think, /image, /tools, /tool, /save, /load, /clear, /help); /help and the refusal of an unknown
command are made from it. With tool calls pending, a plain line is the result of the first pending call.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path

from rich.text import Text
from textual import work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.timer import Timer
from textual.widgets import Input, Static
from textual.worker import Worker, WorkerState

from cockpit.api import (
    ChatEvent,
    ChatInputError,
    ChatRequest,
    ChatResult,
    ChatSession,
    ChatStream,
    ContentDelta,
    Finished,
    ReasoningDelta,
    SmokeStep,
    StreamError,
    StreamStats,
    ToolCall,
    ToolCallDelta,
    Usage,
    load_tools,
)
from cockpit.api.chat import EFFORT_LEVELS, check_temperature, check_top_p, parse_number
from cockpit.api.choose import ModelChoiceError, choose_model
from cockpit.api.endpoint import ApiEndpoint, EndpointDown, smoke_through
from cockpit.api.errors import REMEDY_PROTOCOL
from cockpit.api.smoke import all_passed
from cockpit.api.status import ApiStatus
from cockpit.api.stream import StreamDeadlines
from cockpit.recipe.timeline_events import ApiChanged, LaunchEvent
from cockpit.remedy import cockpit_remedy
from cockpit.safetext import neutralise
from cockpit.tui.context import CockpitContext
from cockpit.tui.dialogs import ConfirmOverwrite
from cockpit.tui.keys import key_for
from cockpit.tui.messages import SmokeProgress
from cockpit.tui.pane import Pane
from cockpit.tui.widgets.chat_turns import AssistantTurn, Notice, SmokeTurn, ToolResultTurn, UserTurn
from cockpit.tui.widgets.statusline import StatusLine
from cockpit.tui.widgets.transcript import Transcript

FLUSH_EVERY = 0.05
EFFORTS = list(EFFORT_LEVELS)  # low, high, xhigh, max
MAX_TURN_WIDGETS = 400
STATE_LOOK = {  # the API's state → (mark, role)
    "ready": ("●", "ok"),
    "checking": ("…", "muted"),
    "down": ("○", "muted"),
    "models_error": ("✗", "fail"),
    "model_missing": ("✗", "fail"),
    "tunnel_down": ("✗", "fail"),
    "engine_dead": ("✗", "alarm"),
    "not_ready": ("◌", "warn"),
    "unreachable": ("◌", "warn"),
    "timeout": ("◌", "warn"),
    "http_error": ("✗", "fail"),
    "unauthorized": ("✗", "fail"),
}
UNKNOWN_LOOK = ("?", "unknown")
HINT_LABELS = {"stop": "stop/leave input", "type": "type", "toggle_thinking": "thinking",
               "cycle_effort": "effort", "fold_reasoning": "fold thinking", "toggle_markdown": "markdown",
               "copy_answer": "copy",
               "smoke": "smoke test", "clear": "clear", "prefill('/save ')": "save",
               "prefill('/load ')": "load"}


class ChatPane(Pane):
    """Status line, settings line, transcript, and the prompt input."""

    TITLE = "Chat"
    HEADLESS = "r37-cockpit smoke"

    FOCUS = "#chat-input"  # shown → typing goes to the message line (digits too, not pane keys)
    HINTS = ("stop", "type", "toggle_thinking", "cycle_effort", "fold_reasoning", "toggle_markdown",
             "copy_answer", "smoke", "clear", "prefill('/save ')", "prefill('/load ')")

    BINDINGS = [
        Binding("escape", "stop", "Stop", id="chat.stop"),
        Binding("i", "type", "Type", id="chat.type"),
        Binding("ctrl+t", "toggle_thinking", "Thinking", id="chat.thinking"),
        Binding("ctrl+r", "cycle_effort", "Effort", id="chat.effort"),
        Binding("ctrl+f", "fold_reasoning", "Fold thinking", id="chat.fold"),
        Binding("ctrl+b", "toggle_markdown", "Markdown", id="chat.markdown"),
        Binding("ctrl+y", "copy_answer", "Copy answer", id="chat.copy"),
        Binding("ctrl+g", "smoke", "Smoke test", id="chat.smoke"),
        Binding("ctrl+l", "clear", "Clear", id="chat.clear"),
        Binding("ctrl+s", "prefill('/save ')", "Save", id="chat.save"),
        Binding("ctrl+o", "prefill('/load ')", "Load", id="chat.load"),
    ]
    DEFAULT_CSS = """
    ChatPane #chat-status { height: auto; padding: 0 1; background: $panel; }
    ChatPane #chat-settings { padding: 0 1; color: $text-muted; }
    ChatPane #chat-log { height: 1fr; }
    ChatPane #chat-keys { padding: 0 1; }
    ChatPane.-short #chat-input { height: 1; border: none; padding: 0 1; background: $boost; }
    ChatPane.-short #chat-input:focus { background: $surface-lighten-2; }
    """
    SHORT = 30  # a pane lower than this (an 80×24 terminal) gives the transcript the input's border

    clock: Callable[[], float] = staticmethod(time.monotonic)
    """The clock of the time an answer has waited for its first token (a snapshot test freezes it)."""

    def __init__(self, ctx: CockpitContext, *, id: str | None = None, classes: str | None = None):
        super().__init__(ctx, id=id, classes=classes)
        self.session = ChatSession()
        self.markdown = False
        self.reasoning_collapsed = False
        engine = ctx.config.engine
        self.deadlines = StreamDeadlines.from_seconds(engine.first_token_timeout_s, engine.idle_timeout_s)
        self.endpoint = ApiEndpoint(None if ctx.api_url else ctx.fleet, ctx.config.cluster.api_port,
                                    api_url=ctx.api_url, read_timeout=engine.read_timeout_s,
                                    stream_interval=ctx.config.ui.stream_frame_ms / 1000,
                                    deadlines=self.deadlines)
        self._turn: AssistantTurn | None = None
        self._smoke: SmokeTurn | None = None
        self._streaming = False
        self._live: ChatStream | None = None  # the stream being shown (its stats are drawn per frame)
        self._last_flush = 0.0
        self._frame_timer: Timer | None = None

    # layout -----------------------------------------------------------------------------------------

    def compose(self) -> ComposeResult:
        yield Static(id="chat-status", markup=False)
        yield StatusLine(id="chat-settings")
        yield Transcript(id="chat-log")
        yield Input(id="chat-input", select_on_focus=False)  # back at the draft, a key adds to it
        yield StatusLine(id="chat-keys")

    def on_mount(self) -> None:
        self.refresh_view()

    def on_resize(self) -> None:
        self.set_class(self.size.height < self.SHORT, "-short")

    def refresh_view(self) -> None:
        """Theme or keymap changed: the status, the settings, the placeholder and the key hints again
        (the transcript's texts name roles, which the console resolves when they repaint)."""
        self._show_status()
        self._show_settings()
        self._show_keys()

    def _show_keys(self) -> None:
        self.query_one("#chat-keys", StatusLine).show([(self.key_hint_parts(HINT_LABELS), " · ")])

    def _key(self, action: str, what: str) -> str:
        """"Esc stops it" for a message: the key bound to `action` now, or the action's name when the
        keymap left it without one."""
        key = self.key_for(action)
        return f"{key} {what}" if key else f"the {action} action {what}"

    async def on_unmount(self) -> None:
        await self.endpoint.aclose()

    # API status: the live model's (the app's watcher probes it; this pane keeps no verdict of its own)

    @property
    def api_status(self) -> ApiStatus | None:
        return self.ctx.watcher.timeline.api

    def model_changed(self, event: LaunchEvent) -> None:
        if isinstance(event, ApiChanged):
            self.api_changed()

    def api_changed(self) -> None:
        """The live model's API status changed: draw it."""
        if self.is_mounted:
            self._show_status()

    def show_api_status(self, status: ApiStatus) -> None:
        """Put a status into the model and draw it (snapshot tests, with a fixed status)."""
        self.ctx.watcher.timeline.api = status
        self._show_status()

    def _show_status(self) -> None:
        s = self.api_status
        state = s.state if s is not None else "checking"
        mark, style = STATE_LOOK.get(state, UNKNOWN_LOOK)
        label = {"ready": "API ready", "tunnel_down": "tunnel down", "engine_dead": "engine dead",
                 "checking": "checking the API", "http_error": "API error",
                 "unauthorized": "API key needed or refused",
                 "down": "no model running"}.get(state, "API not ready")
        text = Text.assemble((f"{mark} {label}", style), "  ")
        if s is None or s.ready:
            text.append(self.endpoint.describe(), style="muted")
        else:
            text.append(neutralise(s.message))  # may quote the server (an error body, a model name)
            if s.remedy:
                text.append("\n  remedy: " + neutralise(self._fix(s.remedy)), style="muted")
        self.query_one("#chat-status", Static).update(text)

    def _settings_parts(self) -> list[str]:
        s = self.session.settings
        think = [f"thinking on · effort {s.reasoning_effort}"] if s.thinking else ["thinking off"]
        return [*think, f"temp {s.temperature:g}", f"top_p {s.top_p:g}",
                f"max_tokens {s.max_tokens if s.max_tokens else '-'}"]

    def _settings_label(self) -> str:
        return " · ".join(self._settings_parts())

    def _show_settings(self) -> None:
        parts = self._settings_parts()
        if self.session.tools:
            parts.append(f"tools {len(self.session.tools)}")
        if self.session.pending_images:
            parts.append(f"images {self.session.pending_images} attached")
        parts.append("markdown" if self.markdown else "plain text")
        self.query_one("#chat-settings", StatusLine).show([([Text(p) for p in parts], " · ")])
        field = self.query_one("#chat-input", Input)
        send = key_for(field, "submit") or "Enter"
        pending = self.session.pending_tool_calls()
        field.placeholder = (f"Message the model ({send} sends, /help for commands)" if not pending else
                             f"Result of tool call {pending[0].name} ({pending[0].id}) — {send} sends it")

    # transcript -------------------------------------------------------------------------------------

    @property
    def log_view(self) -> Transcript:
        return self.query_one("#chat-log", Transcript)

    def _add(self, widget: Static | AssistantTurn) -> None:
        log = self.log_view
        children = list(log.children)
        if len(children) >= MAX_TURN_WIDGETS:  # bounded transcript: the oldest turns leave the screen
            children[0].remove()
        log.mount(widget)
        log.follow()

    def _fix(self, text: str) -> str:
        """A remedy whose quoted cockpit commands carry this cockpit's --config when it is not the default."""
        return cockpit_remedy(text, self.ctx.config_path)

    def notice(self, text: str, style: str = "warn", remedy: str = "") -> None:
        self._add(Notice(text, style, remedy))

    def frame(self) -> None:
        """A read's events are in: draw them now, or, within FLUSH_EVERY of the last draw, a bit later."""
        wait = self._last_flush + FLUSH_EVERY - time.monotonic()
        if wait <= 0:
            self.flush()
        elif self._frame_timer is None:
            self._frame_timer = self.set_timer(wait, self._timed_flush)

    def _timed_flush(self) -> None:
        self._frame_timer = None
        self.flush()

    def flush(self) -> None:
        """Render buffered stream text and the live stream's timing (tests call it directly)."""
        self._last_flush = time.monotonic()
        turn = self._turn
        if turn is not None:
            if self._live is not None:
                turn.set_stats(self._live.stats)
            turn.flush()  # the transcript keeps to its end unless the operator scrolled up (Transcript)

    def begin_answer(self) -> AssistantTurn:
        """A new assistant turn that :meth:`feed` fills; it counts its wait from now."""
        turn = AssistantTurn(markdown=self.markdown, collapsed=self.reasoning_collapsed,
                             started_at=self.clock())
        turn.set_waited(0)
        self._turn = turn
        self._add(turn)
        return turn

    def tick(self) -> None:
        """Once a second while an answer streams: how long it has waited for its first token."""
        turn = self._turn
        if turn is None or not turn.streaming or turn.got_token:
            return
        if turn.stats is not None and turn.stats.ttft_s is not None:
            return
        turn.set_waited(self.clock() - turn.started_at)
        turn.flush()

    def feed(self, event: ChatEvent, stats: StreamStats | None = None) -> None:
        """One stream event into the current turn (buffers only; rendering waits for :meth:`flush`).

        ``stats`` are optional: while a stream runs, :meth:`flush` takes them from it once per frame.
        """
        turn = self._turn or self.begin_answer()
        turn.set_stats(stats)
        if isinstance(event, ReasoningDelta):
            turn.add_reasoning(event.text)
        elif isinstance(event, ContentDelta):
            turn.add_content(event.text)
        elif isinstance(event, ToolCallDelta):
            turn.add_tool_delta(event.index, event.name, event.arguments_fragment)
        elif isinstance(event, Usage):
            pass  # the stats carry usage.completion_tokens
        elif isinstance(event, Finished):
            turn.set_stats(event.stats)
            turn.finish_with(event.finish_reason, event.result.tool_calls)
            self._end_turn(event.result)
        elif isinstance(event, StreamError):
            if event.partial is not None and event.partial.stats is not None:
                turn.set_stats(event.partial.stats)  # up to when it failed
            turn.fail_with(f"stream failed ({event.kind}): {event.message}", self._fix(event.remedy),
                           event.partial.tool_calls if event.partial else ())
            turn.flush()
            self._turn = None
            self.log_view.scroll_end(animate=False)

    def _end_turn(self, result: ChatResult) -> None:
        turn = self._turn
        if turn is not None:
            turn.flush()
        self._turn = None
        try:
            self.session.add_result(result)
        except ChatInputError as exc:
            self.notice(str(exc), "fail")
        self._show_settings()

    def rebuild(self) -> None:
        """Show the session's history (after a load)."""
        self.log_view.remove_children()
        names: dict[str, str] = {}
        for msg in self.session.messages:
            role = msg.get("role")
            content = msg.get("content")
            if role == "user":
                parts = [] if isinstance(content, str) else [p for p in content or [] if isinstance(p, dict)]
                text = content if isinstance(content, str) else " ".join(
                    str(p.get("text", "")) for p in parts if p.get("type") == "text")
                images = sum(1 for p in parts if p.get("type") == "image_url")
                self._add(UserTurn(text, "", images))
            elif role == "assistant":
                turn = AssistantTurn(markdown=self.markdown, collapsed=self.reasoning_collapsed)
                self._add(turn)
                turn.add_reasoning(str(msg.get("reasoning") or ""))
                turn.add_content(str(content or ""))
                calls = [ToolCall(c["id"], c["function"]["name"], c["function"].get("arguments", ""), i)
                         for i, c in enumerate(msg.get("tool_calls") or [])]
                names.update({c.id: c.name for c in calls})
                turn.finish_with(None, calls, note="loaded")
            elif role == "tool":
                call_id = str(msg.get("tool_call_id"))
                self._add(ToolResultTurn(names.get(call_id, "?"), call_id, str(content or "")))
        self._show_settings()

    # sending ----------------------------------------------------------------------------------------

    def on_input_submitted(self, event: Input.Submitted) -> None:
        text = event.value
        event.input.value = ""
        if text.startswith("/"):
            self.command(text)
            return
        pending = self.session.pending_tool_calls()
        if pending:
            self.send_tool_result(pending[0].id, text)
            return
        self.send(text)

    def _model(self) -> str:
        """The session's model; through an --api-url gateway that does not serve it but serves exactly
        one model, that one (the rule `chat --api-url` follows: `api.choose.choose_model`)."""
        wanted = self.session.settings.model
        s = self.api_status
        if self.ctx.api_url and s is not None and s.models:
            with contextlib.suppress(ModelChoiceError):
                return choose_model(s.models, None, default=wanted, gateway=True)
        return wanted

    def _next_request(self) -> ChatRequest:
        """The session's next request, with usage in every chunk (live token counts in the turn)."""
        return self.session.request(
            model=self._model(),
            extra={"stream_options": {"include_usage": True, "continuous_usage_stats": True}},
        )

    def send(self, text: str) -> None:
        """Append a user message and stream the answer (refused while a stream runs)."""
        if self._streaming:
            self.notice(f"an answer is still streaming: {self._key('stop', 'stops it')}")
            return
        images = self.session.pending_images
        try:
            self.session.add_user(text)
            request = self._next_request()
        except ChatInputError as exc:
            self.notice(str(exc), "fail")
            return
        self._add(UserTurn(text, self._settings_label(), images))
        self._show_settings()
        self._stream(request)

    def send_tool_result(self, call_id: str, text: str) -> None:
        pending = {c.id: c for c in self.session.pending_tool_calls()}
        try:
            self.session.add_tool_result(call_id, text)
        except ChatInputError as exc:
            self.notice(str(exc), "fail")
            return
        self._add(ToolResultTurn(pending[call_id].name, call_id, text))
        self._show_settings()
        if not self.session.pending_tool_calls():
            self._stream(self._next_request())

    @work(exclusive=True, group="chat-stream", name="chat stream", exit_on_error=False)
    async def _stream(self, request: ChatRequest) -> None:
        self._streaming = True
        turn = self.begin_answer()
        stream = None
        ticker = self.set_interval(1.0, self.tick)
        try:
            try:
                client = await self.endpoint.client()
            except EndpointDown as exc:
                self.feed(StreamError(exc.status.message, "unreachable", exc.status.remedy))
                return
            self._show_status()     # the tunnel is open now (or on another port): the API line says where
            async with client.chat_stream(request) as stream:
                self._live = stream
                async for event in stream:
                    self.feed(event)
                    if not stream.buffered:  # the last event of this read: time to draw
                        self.frame()
        except Exception as exc:  # a bug, not the server (the stream types those): never "streaming…" forever
            if self._turn is turn:
                partial = ChatResult(turn.content_text, turn.reasoning_text, (), None, None, turn.stats)
                self.feed(StreamError(f"{type(exc).__name__}: {exc}", "protocol_error", REMEDY_PROTOCOL,
                                      None, partial))
        except asyncio.CancelledError:
            stats = stream.stats if stream is not None else None
            turn.set_stats(stats)
            turn.finish_with("stopped", note="stopped by the operator (request closed)")
            turn.flush()
            partial = ChatResult(turn.content_text, turn.reasoning_text, (), "abort", None, stats)
            if self._turn is turn:
                self._end_turn(partial)
            raise
        finally:
            ticker.stop()
            self._streaming = False
            self._live = None

    def action_stop(self) -> None:
        """Cancel the running stream (closing the response makes the engine abort the request) or smoke
        test; with nothing running, leave the message line for the transcript, where the app's and the
        pane's one-letter keys work and the arrows scroll (`i` types again)."""
        running = self._streaming or (self._smoke is not None and not self._smoke.done)
        if self._streaming:
            self.workers.cancel_group(self, "chat-stream")
        if self._smoke is not None and not self._smoke.done:
            self.workers.cancel_group(self, "chat-smoke")
            self._smoke.finish(False, "stopped by the operator")
        if not running and self.query_one("#chat-input", Input).has_focus:
            self.log_view.focus()

    def action_type(self) -> None:
        """Back to the message line."""
        self.query_one("#chat-input", Input).focus()

    # smoke test ---------------------------------------------------------------------------------------

    def action_smoke(self) -> None:
        self._smoke = SmokeTurn()
        self._add(self._smoke)
        self.run_smoke_test()

    @work(exclusive=True, group="chat-smoke", name="smoke test", exit_on_error=False)
    async def run_smoke_test(self) -> None:
        steps: list[SmokeStep] = []
        async for step in smoke_through(self.endpoint):
            steps.append(step)
            self.post_message(SmokeProgress(step))
        self.post_message(SmokeProgress(None, all_passed(steps)))

    def on_worker_state_changed(self, event: Worker.StateChanged) -> None:
        """A smoke test that failed with an error (the app shows it, on the error line) is over: its turn
        says FAILED instead of "running…" forever. The event goes on to the app."""
        if (event.state is WorkerState.ERROR and event.worker.group == "chat-smoke"
                and self._smoke is not None and not self._smoke.done):
            self._smoke.finish(False, "the test stopped on an error (see the error line below)")

    def on_smoke_progress(self, message: SmokeProgress) -> None:
        self.show_smoke(message.step, message.passed, message.error)

    def show_smoke(self, step: SmokeStep | None, passed: bool | None = None, error: str = "") -> None:
        if self._smoke is None:
            self._smoke = SmokeTurn()
            self._add(self._smoke)
        if step is not None:
            self._smoke.add_step(replace(step, remedy=self._fix(step.remedy)))
        if passed is not None:
            self._smoke.finish(passed, error)
        self.log_view.scroll_end(animate=False)

    # commands ---------------------------------------------------------------------------------------

    def command(self, line: str) -> None:
        """Run one /command typed into the input (the table :data:`COMMANDS`)."""
        name, _, arg = line.strip().partition(" ")
        found = BY_NAME.get(name)
        try:
            if found is None:
                raise ChatInputError(f"unknown command {name} ({HELP})")
            found.handler(self, arg.strip())
        except ChatInputError as exc:
            self.notice(str(exc), "fail")
        self._show_settings()

    @staticmethod
    def _number(text: str, lo: float, hi: float, what: str) -> float:
        value = parse_number(text, what)
        if not lo <= value <= hi:
            raise ChatInputError(f"{what} must be within {lo:g}-{hi:g}")
        return value

    def save(self, path_text: str, *, overwrite: bool = False) -> None:
        if not path_text:
            raise ChatInputError("/save PATH")
        path = Path(path_text).expanduser()
        if path.exists() and not overwrite:
            def answered(yes: bool | None) -> None:
                if yes:
                    self.save(path_text, overwrite=True)
                else:
                    self.notice(f"not saved: {path} kept as it was")
            self.app.push_screen(ConfirmOverwrite(path, "this conversation"), answered)
            return
        try:
            written = self.session.save(path, overwrite=overwrite)
        except ChatInputError as exc:
            self.notice(str(exc), "fail")
            return
        self.notice(f"saved {len(self.session.messages)} messages to {written}", "ok.soft")

    def load(self, path_text: str) -> None:
        if not path_text:
            raise ChatInputError("/load PATH")
        if self._streaming:
            raise ChatInputError(f"an answer is still streaming: {self._key('stop', 'stops it')} first")
        self.session = ChatSession.load(path_text)
        self.rebuild()
        self.notice(f"loaded {len(self.session.messages)} messages from {path_text}", "ok.soft")

    # key actions ------------------------------------------------------------------------------------

    def action_toggle_thinking(self) -> None:
        self.session.settings.thinking = not self.session.settings.thinking
        self._show_settings()

    def action_cycle_effort(self) -> None:
        s = self.session.settings
        current = s.reasoning_effort if s.reasoning_effort in EFFORTS else "xhigh"
        s.reasoning_effort = EFFORTS[(EFFORTS.index(str(current)) + 1) % len(EFFORTS)]
        self._show_settings()

    def action_fold_reasoning(self) -> None:
        self.reasoning_collapsed = not self.reasoning_collapsed
        for turn in self.query(AssistantTurn):
            turn.set_collapsed(self.reasoning_collapsed)

    def action_toggle_markdown(self) -> None:
        self.markdown = not self.markdown
        for turn in self.query(AssistantTurn):
            turn.set_markdown(self.markdown)
            turn.flush()
        self._show_settings()

    def action_copy_answer(self) -> None:
        answer = self.session.last_answer()
        if not answer:
            self.notify("no answer to copy yet", severity="warning")
            return
        self.app.copy_to_clipboard(answer)
        self.notify(f"copied the last answer ({len(answer)} characters)")

    def action_clear(self) -> None:
        if self._streaming:
            self.workers.cancel_group(self, "chat-stream")
        self.session.clear()
        self._turn = None
        self.log_view.remove_children()
        self._show_settings()

    def action_prefill(self, text: str) -> None:
        field = self.query_one("#chat-input", Input)
        field.value = text
        field.cursor_position = len(text)
        field.focus()


# ---- the slash commands: one table, the help is made from it -----------------------------------------


@dataclass(frozen=True, slots=True)
class SlashCommand:
    name: str
    args: str                                   # how the argument is written in the help ("" for none)
    help: str
    handler: Callable[[ChatPane, str], None]
    aliases: tuple[str, ...] = ()

    @property
    def usage(self) -> str:
        return f"{self.name} {self.args}".strip()


def _set_temperature(pane: ChatPane, arg: str) -> None:
    pane.session.settings.temperature = check_temperature(parse_number(arg, "temperature"))


def _set_top_p(pane: ChatPane, arg: str) -> None:
    pane.session.settings.top_p = check_top_p(parse_number(arg, "top_p"))


def _set_max(pane: ChatPane, arg: str) -> None:
    pane.session.settings.max_tokens = (None if arg in ("off", "none", "")
                                        else int(pane._number(arg, 1, 10**7, "max")))


def _set_effort(pane: ChatPane, arg: str) -> None:
    if arg not in EFFORT_LEVELS:
        raise ChatInputError(f"effort must be one of {', '.join(EFFORTS)}")
    pane.session.settings.reasoning_effort = arg


def _set_thinking(pane: ChatPane, arg: str) -> None:
    if arg not in ("on", "off"):
        raise ChatInputError("/think on or /think off")
    pane.session.settings.thinking = arg == "on"


def _attach_image(pane: ChatPane, arg: str) -> None:
    pane.session.attach_image(arg)
    pane.notice(f"attached {arg} ({pane.session.pending_images} for the next message)", "ok.soft")


def _set_tools(pane: ChatPane, arg: str) -> None:
    pane.session.tools = None if arg == "off" else load_tools(arg)
    if pane.session.tools:
        pane.notice(f"tools: {', '.join(t['function']['name'] for t in pane.session.tools)}", "ok.soft")


def _tool_result(pane: ChatPane, arg: str) -> None:
    call_id, _, text = arg.partition(" ")
    pane.send_tool_result(call_id, text)


COMMANDS: tuple[SlashCommand, ...] = (
    SlashCommand("/temp", "T", "sampling temperature", _set_temperature, ("/temperature",)),
    SlashCommand("/top_p", "P", "nucleus sampling", _set_top_p),
    SlashCommand("/max", "N|off", "the answer's token limit", _set_max),
    SlashCommand("/effort", "|".join(EFFORTS), "reasoning effort", _set_effort),
    SlashCommand("/think", "on|off", "thinking mode", _set_thinking),
    SlashCommand("/image", "PATH", "attach an image to the next message", _attach_image),
    SlashCommand("/tools", "PATH|off", "offer the tools of a JSON file", _set_tools),
    SlashCommand("/tool", "ID TEXT", "answer a pending tool call", _tool_result),
    SlashCommand("/save", "PATH", "save the conversation", lambda pane, arg: pane.save(arg)),
    SlashCommand("/load", "PATH", "load a saved conversation", lambda pane, arg: pane.load(arg)),
    SlashCommand("/clear", "", "start afresh", lambda pane, arg: pane.action_clear()),
    SlashCommand("/help", "", "this list", lambda pane, arg: _show_help(pane)),
)
BY_NAME = {name: c for c in COMMANDS for name in (c.name, *c.aliases)}
HELP = "commands: " + " · ".join(c.usage for c in COMMANDS if c.name != "/help")
"""One line, for the refusal of an unknown command."""
HELP_TABLE = "\n".join(f"{c.usage:<{max(len(d.usage) for d in COMMANDS)}}  {c.help}" for c in COMMANDS)
"""What /help shows: each command with its argument and what it does."""


def _show_help(pane: ChatPane) -> None:
    pane.notice(HELP_TABLE, "highlight")
