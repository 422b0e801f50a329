"""Text from hosts, the engine and the model made safe to show: the one neutraliser, and bounds.

Everything a host, the engine or the model prints may hold terminal escapes (OSC 52 writes the
operator's clipboard, OSC 0 the window title, CSI clears the screen or moves the cursor, OSC 8 makes
hyperlinks), C1 controls and bidi overrides. Every pane and every CLI line that shows such text passes it
through `neutralise` (one line) or `neutralise_block` (several lines); `--json` output escapes by itself.
"""

from __future__ import annotations

import re

_SGR = re.compile(r"\x1b\[[0-9;:]*m")
_CTRL = re.compile(r"[\x00-\x08\x0a-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069]")
_VISIBLE = {c: chr(0x2400 + c) for c in range(0x20)}
_VISIBLE[0x7F] = "\u2421"
_VISIBLE.update({c: f"\\x{c:02x}" for c in range(0x80, 0xA0)})
_VISIBLE.update({c: f"\\u{c:04x}" for c in (0x2028, 0x2029, *range(0x202A, 0x202F), *range(0x2066, 0x206A))})
_VISIBLE.pop(0x09)

TRUNCATED = "… [truncated: {n} more characters not shown]"


def neutralise(text: str) -> str:
    """One line of untrusted text made safe for a terminal: colour codes dropped, other controls shown
    as symbols.

    A trailing CR (CRLF output) is removed, tabs become spaces, ESC/CR/LF/BEL/… become their visible
    Unicode control pictures (␛ ␍ ␊ ␇), C1 controls and bidi overrides become `\\xNN` / `\\uNNNN`.
    """
    if text.isprintable():
        return text
    if text.endswith("\r"):
        text = text.rstrip("\r")
    if "\t" in text:
        text = text.expandtabs(8)
    if _CTRL.search(text) is None:
        return text
    text = _SGR.sub("", text)
    return text.translate(_VISIBLE)


def neutralise_block(text: str) -> str:
    """Several lines of untrusted text: each line neutralised, the line breaks kept (CRLF read as LF)."""
    if text.isprintable():
        return text
    return "\n".join(neutralise(line) for line in text.split("\n"))


def clip(text: str, limit: int) -> str:
    """`text` cut to `limit` characters with a visible mark saying how much was left out."""
    if len(text) <= limit:
        return text
    return text[:limit] + TRUNCATED.format(n=len(text) - limit)


def safe(text: object, limit: int = 4000) -> str:
    """Any untrusted value for one line of a message: str()'d, clipped, neutralised."""
    return neutralise(clip(str(text), limit))
