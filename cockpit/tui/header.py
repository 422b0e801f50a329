"""The cockpit's top line: cluster name, host connections, the live model's verdict and the Stats alerts.

It renders the core's models (host statuses, the cluster timeline's verdict and API status, the count of
active stats alerts) and keeps no verdict of its own. On a narrow terminal it drops the words first
("r37-cockpit", "cluster", "hosts"), never the verdict. In read-only mode a "READ-ONLY" badge ("RO" when
compact) follows the cluster's name.
"""

from __future__ import annotations

from dataclasses import dataclass

from rich.text import Text
from textual.widget import Widget

from cockpit.hosts.state import HostState, HostStatus
from cockpit.recipe.replay import ReplayClock
from cockpit.recipe.timeline import ClusterTimeline
from cockpit.telemetry.cluster_stats import Alert

VERDICT_LABEL = {"idle": ("no model running", "muted"), "launching": ("launching", "warn.soft"),
                 "ready": ("READY ✔", "ok"), "hung": ("engine HUNG", "alarm"),
                 "down": ("cluster DOWN", "alarm"), "stopped": ("stopped", "bold"),
                 "stopping": ("stopping …", "warn.soft"),
                 "host-lost": ("host lost", "fail"), "unknown": ("state unknown", "unknown"),
                 "incomplete": ("launch incomplete", "fail")}
NARROW = 100     # below this many columns the header uses its compact form
READ_ONLY_BADGE = (" READ-ONLY ", " RO ")     # (full, compact): reverse video in the "warn" role


@dataclass(frozen=True)
class HeaderModel:
    cluster: str
    statuses: tuple[HostStatus, ...]
    model: ClusterTimeline | None
    looked: bool
    alerts: tuple[Alert, ...] = ()
    read_only: bool = False
    replay: ReplayClock | None = None


def alerts_part(alerts: tuple[Alert, ...], compact: bool = False) -> Text:
    """"⚠ 2 alerts" ("⚠ 2" compact): "fail" when any alert fails, "warn" when all only warn; empty: none."""
    if not alerts:
        return Text()
    role = "fail" if any(a.severity == "fail" for a in alerts) else "warn"
    n = len(alerts)
    return Text(f"⚠ {n}" if compact else f"⚠ {n} alert{'s' if n != 1 else ''}", style=role)


def health_line(cluster: str, statuses: list[HostStatus], model: ClusterTimeline | None = None,
                looked: bool = True, *, compact: bool = False, alerts: tuple[Alert, ...] = (),
                read_only: bool = False, replay: ReplayClock | None = None) -> Text:
    """The header's line. `replay`: the replay clock; its label ("REPLAY <time> ×speed ⏸") is shown
    reversed in place of the read-only badge and of the host connections (a replay connects to none)."""
    up = sum(s.state is HostState.CONNECTED for s in statuses)
    total = len(statuses)
    bad = [s for s in statuses if s.down]
    style = "ok" if up == total else ("fail" if bad else "warn.soft")
    sep = " │ " if compact else "  │  "
    text = Text()
    if not compact:
        text.append("r37-cockpit", style="bold")
        text.append(sep + "cluster ")
    text.append(cluster, style="bold")
    if replay is not None:
        text.append(" ")
        badge = Text(f" {replay.label(compact)} ", style="accent")
        badge.stylize("reverse")
        text.append_text(badge)
    elif read_only:
        text.append(" ")
        text.append_text(read_only_badge(compact))
    if replay is None:
        text.append(sep if compact else sep + "hosts ")
        text.append(f"{up}/{total} up" if compact else f"{up}/{total} connected", style=style)
        if bad:
            ranks = " ".join(str(s.rank) for s in bad)
            word = "rank" if len(bad) == 1 else "ranks"
            text.append(f" · {word} {ranks} down" if compact else f"  {word} {ranks} down", style="fail.soft")
    if model is None:
        return _with_alerts(text, alerts, sep, compact)
    v = model.verdict
    label, vstyle = VERDICT_LABEL.get(v.state, (v.state, ""))
    if (v.state == "idle" and not looked) or (v.state == "unknown" and v.summary.startswith("reading")):
        label, vstyle = "looking at the hosts …", "muted"     # not yet known: never "no model running"
    live = model.engine_liveness() if v.state == "unknown" else None
    undecided = live is not None and live.undecided
    if undecided:     # busy, counters not yet seen to move: neither READY nor HUNG yet
        label = "engine progress unknown"
    if v.state == "down" and v.first_failed is not None:
        label += f": rank {v.first_failed} failed"
    text.append(sep)
    text.append(label, style=vstyle)
    api = model.api
    if api is not None and (v.state in ("ready", "launching", "hung") or undecided):
        text.append(sep)
        ready = ("API ready", "ok.soft") if api.ready else ("API not ready", "warn.soft")
        text.append(*ready)
    if model.liveness is not None and v.state == "ready" and model.liveness.state == "serving":
        text.append(" · serving", style="ok.soft")
    return _with_alerts(text, alerts, sep, compact)


def read_only_badge(compact: bool = False) -> Text:
    """The read-only badge: " READ-ONLY " (" RO " compact) in the "warn" role, reversed."""
    badge = Text(READ_ONLY_BADGE[compact], style="warn")
    badge.stylize("reverse")
    return badge


def _with_alerts(text: Text, alerts: tuple[Alert, ...], sep: str, compact: bool) -> Text:
    part = alerts_part(alerts, compact)
    if part.plain:
        text.append(sep)
        text.append_text(part)
    return text


class ClusterHeader(Widget):
    DEFAULT_CSS = "ClusterHeader { dock: top; height: 1; background: $panel; padding: 0 1; }"

    def __init__(self, *, id: str | None = None):
        super().__init__(id=id)
        self._shown: HeaderModel | None = None
        self._line = Text("r37-cockpit", style="bold")

    def show(self, cluster: str, statuses: list[HostStatus], model: ClusterTimeline | None = None,
             looked: bool = True, alerts: tuple[Alert, ...] = (), read_only: bool = False,
             replay: ReplayClock | None = None) -> None:
        """Render the model now; the screen is redrawn only when the line changed (the app calls this
        every second and on every model change: most calls change nothing, perf/watch_cost.py)."""
        self._shown = HeaderModel(cluster, tuple(statuses), model, looked, tuple(alerts), read_only,
                                  replay)
        self._update()

    def _update(self) -> None:
        m = self._shown
        if m is None:
            return
        line = health_line(m.cluster, list(m.statuses), m.model, m.looked, compact=self.size.width < NARROW,
                           alerts=m.alerts, read_only=m.read_only, replay=m.replay)
        if line != self._line:
            self._line = line
            self.refresh()

    def on_resize(self) -> None:
        self._update()

    def render(self) -> Text:
        return self._line
