"""Small per-user UI state (the theme picked at run time), kept apart from the operator's cluster.toml."""

from __future__ import annotations

import contextlib
import json
from pathlib import Path

from cockpit.files import NotReadable, read_json, write_atomic
from cockpit.locations import ui_state_file


def path() -> Path:
    return ui_state_file()


MAX_BYTES = 64 * 1024   # a theme name or two


def load() -> dict[str, str]:
    """The saved UI state; {} for a file that is missing or not one (a FIFO, a device, huge, not JSON,
    nested): it holds only preferences, and the next save replaces it."""
    try:
        data = read_json(path(), MAX_BYTES, max_depth=2)
    except (OSError, NotReadable):
        return {}
    return {k: v for k, v in data.items() if isinstance(k, str) and isinstance(v, str)} \
        if isinstance(data, dict) else {}


def save(changes: dict[str, str]) -> None:
    """Merge and write atomically (0600); a state file that cannot be written is not worth an error."""
    with contextlib.suppress(OSError):
        target = path()
        target.parent.mkdir(parents=True, exist_ok=True)
        write_atomic(target, json.dumps({**load(), **changes}), mode=0o600, overwrite=True)
