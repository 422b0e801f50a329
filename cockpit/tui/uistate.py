"""Small per-user UI state (the theme picked at run time), kept apart from the operator's cluster.toml."""

from __future__ import annotations

import contextlib
import json
import os
import tempfile
from pathlib import Path

from platformdirs import user_state_path


def path() -> Path:
    return user_state_path("r37-cockpit") / "ui.json"


def load() -> dict[str, str]:
    try:
        data = json.loads(path().read_text())
    except (OSError, ValueError):
        return {}
    return {k: v for k, v in data.items() if isinstance(k, str) and isinstance(v, str)} \
        if isinstance(data, dict) else {}


def save(changes: dict[str, str]) -> None:
    """Merge and write atomically; a state file that cannot be written is not worth an error."""
    with contextlib.suppress(OSError):
        target = path()
        target.parent.mkdir(parents=True, exist_ok=True)
        data = {**load(), **changes}
        fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=".ui.", suffix=".tmp")
        with os.fdopen(fd, "w") as out:
            json.dump(data, out)
        os.replace(tmp, target)
