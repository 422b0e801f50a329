"""Transport to the hosts: one SSH connection each. The only package that builds shell lines.

Its names are imported at first use (`cockpit.lazy`): `cockpit.hosts.shell` and `cockpit.hosts.state`
cost nothing of asyncssh until a `Fleet` or `Host` is needed."""

from __future__ import annotations

from typing import TYPE_CHECKING

from cockpit.lazy import lazy_exports

if TYPE_CHECKING:
    from cockpit.hosts.fleet import Fleet
    from cockpit.hosts.host import Host
    from cockpit.hosts.shell import (
        SAME,
        ShellCommand,
        command,
        every,
        every_changed,
        read_files,
        sequence,
        stats_sampler,
        tcp_probe,
    )
    from cockpit.hosts.state import (
        CommandRecord,
        CommandTimeout,
        HostState,
        HostStatus,
        HostUnavailable,
        Result,
    )

EXPORTS = {
    "cockpit.hosts.fleet": ("Fleet",),
    "cockpit.hosts.host": ("Host",),
    "cockpit.hosts.shell": ("SAME", "ShellCommand", "command", "every", "every_changed", "read_files",
                            "sequence", "stats_sampler", "tcp_probe"),
    "cockpit.hosts.state": ("CommandRecord", "CommandTimeout", "HostState", "HostStatus", "HostUnavailable",
                            "Result"),
}
__all__ = [
    "SAME", "CommandRecord", "CommandTimeout", "Fleet", "Host", "HostState", "HostStatus", "HostUnavailable",
    "Result", "ShellCommand", "command", "every", "every_changed", "read_files", "sequence", "stats_sampler",
    "tcp_probe",
]
if not TYPE_CHECKING:
    __getattr__, __dir__ = lazy_exports(__name__, EXPORTS)
