"""The cockpit's top line: cluster name and overall health."""

from __future__ import annotations

from rich.text import Text
from textual.widgets import Static

from cockpit.hosts.state import HostState, HostStatus


def health_line(cluster: str, statuses: list[HostStatus], extra: list[tuple[str, str]] | None = None) -> Text:
    up = sum(s.state is HostState.CONNECTED for s in statuses)
    total = len(statuses)
    bad = [s for s in statuses if s.state in (HostState.LOST, HostState.KEY_REFUSED, HostState.AUTH_FAILED,
                                             HostState.UNREACHABLE)]
    style = "bold green" if up == total else ("bold red" if bad else "yellow")
    text = Text.assemble(("r37-cockpit", "bold"), "  │  cluster ", (cluster, "bold"), "  │  hosts ",
                         (f"{up}/{total} connected", style))
    if bad:
        text.append("  ranks down: " + " ".join(str(s.rank) for s in bad), style="red")
    for label, style_ in extra or []:
        text.append("  │  ")
        text.append(label, style=style_)
    return text


class ClusterHeader(Static):
    DEFAULT_CSS = "ClusterHeader { dock: top; height: 1; background: $panel; padding: 0 1; }"

    def show(self, cluster: str, statuses: list[HostStatus],
             extra: list[tuple[str, str]] | None = None) -> None:
        self.update(health_line(cluster, statuses, extra))
