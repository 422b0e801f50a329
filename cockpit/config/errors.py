"""ConfigError: a config that cannot be used, with one (key path, reason) pair per problem."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from cockpit.safetext import clip, neutralise


class ConfigError(Exception):
    """A config that cannot be used; `problems` are (key path, reason) pairs."""

    def __init__(self, path: Path | None, problems: list[tuple[str, str]], code: str = "config-invalid"):
        self.path = path
        self.problems = problems
        self.code = code  # stable error code (cockpit.errorcodes): config-invalid, config-missing, …
        super().__init__(self.render())

    def render(self) -> str:
        """One `FILE: KEY: REASON` line per problem, neutralised (a key or path may hold escapes)."""
        where = str(self.path) if self.path else "<config>"
        return "\n".join(neutralise(clip(f"{where}: {key}: {reason}" if key else f"{where}: {reason}", 2000))
                         for key, reason in self.problems)

    def as_json(self) -> dict[str, Any]:
        return {"ok": False, "path": str(self.path) if self.path else None,
                "problems": [{"key": k, "reason": r} for k, r in self.problems]}
