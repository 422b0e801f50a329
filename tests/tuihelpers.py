"""Helpers for TUI tests without a fleet connection (`connect=False`)."""

from __future__ import annotations

from cockpit.hosts import HostStatus
from cockpit.tui.app import CockpitApp


def report_status(app: CockpitApp, status: HostStatus) -> None:
    """What the fleet does when a host's status changes: the host holds it (the header reads it from the
    fleet), then the app is told (every pane renders it)."""
    app.fleet[status.rank].status = status
    app.show_status(status)
