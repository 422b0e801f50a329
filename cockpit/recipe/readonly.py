"""Read-only mode: the one list of what changes a host, read by the headless commands and the TUI alike.

`--read-only` or `[ui] read_only = true` turns the mode on (either one; nothing turns it off). A command
or pane action listed here is refused (headless: exit 3, code `read-only`) or hidden (TUI: its key and
its palette entry). Everything else only reads the hosts or writes local files (`hosts trust` writes the
admin box's own known_hosts, `config …` local files, `logs` saves locally) and keeps working.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from cockpit.errorcodes import CODES


@dataclass(frozen=True)
class HostChange:
    """One host-changing operation: the headless command (with the option that selects it) and the TUI
    actions (`pane.action`) that do it."""

    name: str
    what: str                       # what it would change, for the refusal
    command: str                    # the headless command doing it
    option: str | None = None       # only with this option set (`--replace-stopped`)
    unless: str | None = None       # not with this option set: it then changes nothing (`--dry-run`)
    actions: tuple[str, ...] = ()   # TUI pane actions doing it: "launch.stop"

    @property
    def shown(self) -> str:
        option = f" --{self.option.replace('_', '-')}" if self.option else ""
        return f"`{self.command}{option}`"


# Most specific first: `launch --replace-stopped` before `launch`.
HOST_CHANGES: tuple[HostChange, ...] = (
    # The setup pane's plan is the first step of a setup run, as `setup JOB` prints its plan before it
    # asks: refused whole, like the command. Cancelling acts only on a run, which read-only never starts.
    HostChange("setup", "runs setup jobs on the hosts (downloads, image load, Engram rows, writing "
               "cluster.env)", "setup",
               actions=("setup.plan", "setup.start", "setup.resume", "setup.cancel_all",
                        "setup.cancel_rank")),
    HostChange("replace-stopped", "removes stopped containers, then starts the engine's containers",
               "launch", option="replace_stopped", unless="dry_run", actions=("launch.relaunch",)),
    # `launch --dry-run` only runs the recipe's DRY_RUN=1 launcher and reads: allowed (without the lock).
    HostChange("launch", "starts the engine's containers and takes the cluster lock on rank 0's host",
               "launch", unless="dry_run", actions=("launch.launch",)),
    HostChange("stop", "stops the engine's containers (under the cluster lock on rank 0's host)", "stop",
               actions=("launch.stop",)),
    # An interactive shell (or a command given to `ssh RANK -- …`) can change anything on the host: the
    # cockpit cannot tell a look from a change, so read-only opens none, in the container or out.
    HostChange("shell", "opens an interactive shell on a host (or in its container), where anything can "
               "be changed", "ssh", actions=("hosts.shell", "hosts.container_shell")),
)

def command_change(command: str | None, options: Mapping[str, object]) -> HostChange | None:
    """The host change a headless command with these parsed options would make; None: it changes none."""
    for change in HOST_CHANGES:
        if change.command != command:
            continue
        if change.option is not None and not options.get(change.option):
            continue
        if change.unless is not None and options.get(change.unless):
            continue
        return change
    return None


def action_change(pane: str, action: str) -> HostChange | None:
    """The host change a TUI pane action (`"launch"`, `"stop"`) makes; None: it changes none."""
    key = f"{pane}.{action}"
    return next((c for c in HOST_CHANGES if key in c.actions), None)


def refusal(change: HostChange) -> str:
    """The sentence a refused command prints."""
    return (f"refused in read-only mode (--read-only or [ui] read_only): {change.shown} {change.what}; "
            f"nothing was run on any host ({CODES['read-only'].remedy})")
