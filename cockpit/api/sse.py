"""Incremental Server-Sent Events decoder (WHATWG event-stream rules), bytes in, events out.

Feed it the bytes of an HTTP body in whatever pieces the network delivers; it handles UTF-8 split
across pieces, ``\\r\\n`` / ``\\n`` / ``\\r`` line ends (also a ``\\r`` and ``\\n`` in different pieces),
``data:`` with or without the space, multi-line data, ``:`` comments, ``event:``/``id:`` fields, and
dispatches on a blank line. Memory is bounded: a line or event above ``max_event_bytes`` is an error.
"""

from __future__ import annotations

import codecs
from dataclasses import dataclass

DONE = "[DONE]"
MAX_EVENT_BYTES = 1024 * 1024
"""The largest line or event the decoder keeps (characters); a larger one is an :class:`SseTooLarge`."""


class SseError(ValueError):
    """The byte stream is not a valid event stream (bad UTF-8, an oversized line or event)."""


class SseTooLarge(SseError):
    """A line or an event larger than the decoder's ``max_event_bytes``."""


@dataclass(frozen=True, slots=True)
class SseEvent:
    """One dispatched event; ``data`` lines are joined with ``\\n``."""

    data: str
    event: str = "message"
    id: str | None = None

    @property
    def is_done(self) -> bool:
        """True for OpenAI's end-of-stream sentinel ``data: [DONE]``."""
        return self.data.strip() == DONE


class SseDecoder:
    """Stateful decoder: call :meth:`feed` per received piece, :meth:`close` at end of body."""

    def __init__(self, max_event_bytes: int = MAX_EVENT_BYTES) -> None:
        self._utf8 = codecs.getincrementaldecoder("utf-8")(errors="strict")
        self._max = max_event_bytes
        self._buf = ""
        self._skip_lf = False  # the previous piece ended in "\r": a leading "\n" belongs to it
        self._first = True
        self._data: list[str] = []
        self._data_size = 0
        self._event = ""
        self._last_id: str | None = None
        self.comments = 0
        self.lines = 0

    def feed(self, chunk: bytes) -> list[SseEvent]:
        """Decode one piece of the body and return the events it completed (maybe none)."""
        try:
            text = self._utf8.decode(chunk)
        except UnicodeDecodeError as exc:
            raise SseError(f"event stream is not UTF-8: {exc.reason}") from exc
        return self._feed_text(text)

    def close(self) -> list[SseEvent]:
        """End of body. Per the spec an event without its closing blank line is discarded."""
        try:
            tail = self._utf8.decode(b"", final=True)
        except UnicodeDecodeError as exc:
            raise SseError("event stream ends inside a UTF-8 sequence") from exc
        events = self._feed_text(tail)
        if self._buf:
            events += self._line(self._buf)
            self._buf = ""
        return events

    @property
    def pending(self) -> bool:
        """True if a partial line or undispatched data is buffered (the body ended mid-event)."""
        return bool(self._buf or self._data)

    def _feed_text(self, text: str) -> list[SseEvent]:
        if self._first and text:
            self._first = False
            text = text.removeprefix("\ufeff")
        if self._skip_lf and text:
            self._skip_lf = False
            if text[0] == "\n":
                text = text[1:]
        if self._buf or self._data or self._event or "\r" in text:
            return self._feed_lines(text)
        # Fast path (what servers send): "\n" line ends, nothing pending. Whole events are the blocks
        # between blank lines; a single-line "data:" block is an event as it stands, any other block
        # goes through the line rules, and so does the unfinished tail.
        blocks = text.split("\n\n")
        tail = blocks.pop()
        events: list[SseEvent] = []
        for block in blocks:
            if block.startswith("data:") and "\n" not in block and len(block) <= self._max:
                self.lines += 2
                events.append(
                    SseEvent(block[6:] if block[5:6] == " " else block[5:], "message", self._last_id)
                )
            else:
                events += self._feed_lines(block + "\n\n")
        if tail:
            events += self._feed_lines(tail)
        return events

    def _feed_lines(self, text: str) -> list[SseEvent]:
        """The general rules: any line ends, pending partial lines and data, every field."""
        self._buf += text
        events: list[SseEvent] = []
        start = 0
        buf = self._buf
        n = len(buf)
        while True:
            cr = buf.find("\r", start)
            lf = buf.find("\n", start)
            if cr < 0 and lf < 0:
                break
            end = lf if cr < 0 or (0 <= lf < cr) else cr
            events += self._line(buf[start:end])
            if buf[end] == "\r":
                if end + 1 < n:
                    start = end + 2 if buf[end + 1] == "\n" else end + 1
                else:
                    self._skip_lf = True
                    start = end + 1
            else:
                start = end + 1
        self._buf = buf[start:]
        if len(self._buf) > self._max:
            raise SseTooLarge(f"event stream line longer than {self._max} characters")
        return events

    def _line(self, line: str) -> list[SseEvent]:
        self.lines += 1
        if not line:
            return self._dispatch()
        if line[0] == ":":
            self.comments += 1
            return []
        name, colon, value = line.partition(":")
        if colon and value.startswith(" "):
            value = value[1:]
        if name == "data":
            self._data_size += len(value) + 1
            if self._data_size > self._max:
                raise SseTooLarge(f"event stream event larger than {self._max} characters")
            self._data.append(value)
        elif name == "event":
            self._event = value
        elif name == "id" and "\0" not in value:
            self._last_id = value
        # "retry" and unknown fields are ignored, as the spec says.
        return []

    def _dispatch(self) -> list[SseEvent]:
        if not self._data:
            self._event = ""
            return []
        event = SseEvent("\n".join(self._data), self._event or "message", self._last_id)
        self._data = []
        self._data_size = 0
        self._event = ""
        return [event]
