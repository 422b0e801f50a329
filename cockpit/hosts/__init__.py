"""Transport to the hosts: one SSH connection each. The only package that builds shell lines."""

from cockpit.hosts.fleet import Fleet
from cockpit.hosts.host import Host
from cockpit.hosts.shell import ShellCommand, command, every, read_files, sequence, stats_sampler, tcp_probe
from cockpit.hosts.state import (
    CommandRecord,
    CommandTimeout,
    HostState,
    HostStatus,
    HostUnavailable,
    Result,
)

__all__ = [
    "CommandRecord", "CommandTimeout", "Fleet", "Host", "HostState", "HostStatus", "HostUnavailable",
    "Result", "ShellCommand", "command", "every", "read_files", "sequence", "stats_sampler", "tcp_probe",
]
