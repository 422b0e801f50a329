"""The cockpit's top line: cluster name, host connections and the live model's verdict."""

from __future__ import annotations

from rich.text import Text
from textual.widgets import Static

from cockpit.hosts.state import HostState, HostStatus
from cockpit.recipe.timeline import ClusterTimeline

VERDICT_LABEL = {"idle": ("no model running", "dim"), "launching": ("launching", "yellow"),
                 "ready": ("READY ✔", "bold green"), "hung": ("engine HUNG", "bold white on red"),
                 "down": ("cluster DOWN", "bold white on red"), "stopped": ("stopped", "bold"),
                 "stopping": ("stopping …", "yellow"),
                 "host-lost": ("host lost", "bold red"), "unknown": ("state unknown", "bold red")}


def health_line(cluster: str, statuses: list[HostStatus], model: ClusterTimeline | None = None,
                looked: bool = True) -> Text:
    up = sum(s.state is HostState.CONNECTED for s in statuses)
    total = len(statuses)
    bad = [s for s in statuses if s.down]
    style = "bold green" if up == total else ("bold red" if bad else "yellow")
    text = Text.assemble(("r37-cockpit", "bold"), "  │  cluster ", (cluster, "bold"), "  │  hosts ",
                         (f"{up}/{total} connected", style))
    if bad:
        text.append("  ranks down: " + " ".join(str(s.rank) for s in bad), style="red")
    if model is None:
        return text
    v = model.verdict
    label, vstyle = VERDICT_LABEL.get(v.state, (v.state, ""))
    if v.state == "idle" and not looked:
        label, vstyle = "looking at the hosts …", "dim"     # not yet known: never "no model running"
    if v.state == "down" and v.first_failed is not None:
        label += f": rank {v.first_failed} failed"
    text.append("  │  ")
    text.append(label, style=vstyle)
    api = model.api
    if api is not None and v.state in ("ready", "launching", "hung"):
        text.append("  │  ")
        text.append("API ready" if api.ready else "API not ready", style="green" if api.ready else "yellow")
    if model.liveness is not None and v.state == "ready" and model.liveness.state == "serving":
        text.append(" · serving", style="green")
    return text


class ClusterHeader(Static):
    DEFAULT_CSS = "ClusterHeader { dock: top; height: 1; background: $panel; padding: 0 1; }"

    def show(self, cluster: str, statuses: list[HostStatus], model: ClusterTimeline | None = None,
             looked: bool = True) -> None:
        self.update(health_line(cluster, statuses, model, looked))
