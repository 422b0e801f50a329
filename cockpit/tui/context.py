"""What every pane gets: the config, the fleet, and a small store of facts panes share."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cockpit.config import ClusterConfig
from cockpit.hosts import Fleet


@dataclass
class CockpitContext:
    config: ClusterConfig
    config_path: Path | None
    fleet: Fleet
    api_url: str | None = None          # --api-url: an authenticated gateway instead of the SSH tunnel
    read_only: bool = False             # hides every host-changing action
    facts: dict[str, Any] = field(default_factory=dict)
    _watchers: dict[str, list[Callable[[Any], None]]] = field(default_factory=dict)

    def publish(self, key: str, value: Any) -> None:
        """Share a fact (e.g. the latest preflight verdict) with every pane that watches it."""
        self.facts[key] = value
        for fn in list(self._watchers.get(key, [])):
            fn(value)

    def watch(self, key: str, fn: Callable[[Any], None]) -> None:
        self._watchers.setdefault(key, []).append(fn)
