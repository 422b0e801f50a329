"""Small messages the app's workers and listeners post to the UI."""

from __future__ import annotations

from dataclasses import dataclass

from textual.message import Message

from cockpit.hosts.state import HostStatus


@dataclass
class HostStatusChanged(Message):
    status: HostStatus


@dataclass
class ClusterChanged(Message):
    """The live model of the cluster changed (`event` says how)."""

    event: object
