"""Shell lines for hosts, built from argv lists. The only module that writes shell syntax."""

from __future__ import annotations

import re
import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")


@dataclass(frozen=True, slots=True)
class ShellCommand:
    """A quoted shell line for a host's login shell; `line` is also what the operator is shown."""

    line: str

    def __str__(self) -> str:
        return self.line


Cmd = ShellCommand | Sequence[str]


def command(argv: Sequence[str], *, cwd: str | None = None, env: Mapping[str, str] | None = None,
            merge_stderr: bool = False) -> ShellCommand:
    """`cd CWD && env K=V ARGV [2>&1]`, every word quoted."""
    if not argv:
        raise ValueError("empty argv")
    words = list(argv)
    if env:
        for key in env:
            if not _ENV_NAME.match(key):
                raise ValueError(f"bad environment variable name: {key!r}")
        words = ["env", *(f"{k}={v}" for k, v in env.items()), *words]
    line = shlex.join(words)
    if merge_stderr:
        line += " 2>&1"
    if cwd:
        line = f"cd -- {shlex.quote(cwd)} && {line}"
    return ShellCommand(line)


def as_command(cmd: Cmd) -> ShellCommand:
    return cmd if isinstance(cmd, ShellCommand) else command(cmd)


def sequence(*cmds: Cmd) -> ShellCommand:
    """Run each command in turn whatever the previous one returned; exit status is the last one's."""
    return ShellCommand("; ".join(as_command(c).line for c in cmds))


def every(seconds: float, cmd: Cmd, *, marker: str | None = None) -> ShellCommand:
    """A long-lived loop that runs `cmd` every `seconds` (one channel, no new SSH session per sample).

    With `marker`, a line holding only the marker is printed after each round, so a reader can tell
    where one sample ends.
    """
    if seconds <= 0:
        raise ValueError("interval must be positive")
    body = as_command(cmd).line
    if marker is not None:
        body += f"; echo {shlex.quote(marker)}"
    return ShellCommand(f"while :; do {body}; sleep {seconds:g}; done")


def read_files(paths: Sequence[str]) -> ShellCommand:
    """Print `PATH<TAB>first line` for every readable file (missing ones print `PATH<TAB>` nothing)."""
    quoted = " ".join(shlex.quote(p) for p in paths)
    return ShellCommand(
        f"for f in {quoted}; do if [ -r \"$f\" ]; then printf '%s\\t' \"$f\"; head -n 1 -- \"$f\"; fi; done"
    )


def tcp_probe(host: str, port: int, timeout_s: int = 3) -> ShellCommand:
    """Exit 0 if a TCP connection to host:port opens from the host itself (bash /dev/tcp, no nc needed)."""
    target = shlex.quote(f"/dev/tcp/{host}/{int(port)}")
    return ShellCommand(f"timeout {int(timeout_s)} bash -c {shlex.quote(f'exec 3<>{target}')}")


_LABEL = re.compile(r"[A-Za-z0-9_.:@-]+\Z")


def sections(parts: Sequence[tuple[str, Cmd]], marker: str) -> ShellCommand:
    """Several commands on one channel, each framed so its output and exit status can be told apart.

    For each `(label, cmd)` in turn: a line `MARKER begin LABEL`, the command's stdout and stderr (merged,
    stdin from /dev/null), then a newline and a line `MARKER end LABEL STATUS`. Split the output with
    `cockpit.recipe.parsers.split_sections`.
    """
    if not _LABEL.match(marker):
        raise ValueError(f"bad section marker: {marker!r}")
    body = []
    for label, cmd in parts:
        if not _LABEL.match(label):
            raise ValueError(f"bad section label: {label!r}")
        begin = shlex.quote(f"{marker} begin {label}")
        body.append(f"echo {begin}; {{ {as_command(cmd).line}\n}} </dev/null 2>&1; "
                    f"printf '\\n%s %s\\n' {shlex.quote(f'{marker} end {label}')} \"$?\"")
    return ShellCommand("; ".join(body) if body else "true")
