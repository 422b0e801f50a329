"""`r37-cockpit ssh RANK [--container] [-- CMD…]`: an interactive SSH session on one host (or `docker exec`
into its container) with the cockpit's own SSH settings and host-key policy, run by the OpenSSH client on
this terminal. Prints the exact command line first; exits with ssh's status. Refused read-only."""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING

from cockpit.cli.commands import SUMMARY

if TYPE_CHECKING:
    from cockpit.config import ClusterConfig

# Options accepted after RANK too (argparse hands everything after RANK to the command).
_FLAGS = {"--container": "container", "--read-only": "read_only", "--json": "json"}


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("ssh", help=SUMMARY["ssh"],
                       description="Open an interactive SSH session on rank RANK's host with the OpenSSH "
                                   "client and the cockpit's own settings: the same ~/.ssh/config (user, "
                                   "port, ProxyJump, identity), [ssh] identity_file, timeouts and keepalive, "
                                   "and host keys checked against the same known_hosts files with "
                                   "StrictHostKeyChecking=yes. --container runs `docker exec -it` into the "
                                   "host's container (bash, else sh). A command after `--` runs instead "
                                   "of a login shell. The command line is printed to stderr first; the "
                                   "exit status is ssh's (255: ssh itself failed). Refused in read-only "
                                   "mode (exit 3): a shell can change anything.",
                       usage="%(prog)s [-h] [--container] [--json] RANK [-- CMD …]")
    p.add_argument("rank", type=int, metavar="RANK", help="the host's rank")
    p.add_argument("--container", action="store_true",
                   help="into the host's container (`[cluster] container_name`) instead of the host")
    p.add_argument("--json", action="store_true", help="a refusal or error as JSON on stdout (the session "
                                                       "itself is the terminal's)")
    p.add_argument("remote", nargs=argparse.REMAINDER, metavar="CMD",
                   help="after `--`: a command to run instead of the login shell (quoted word by word)")
    p.set_defaults(func=run)


def split_remote(args: argparse.Namespace) -> tuple[list[str], list[str]]:
    """The command after RANK and the unknown options before it; the known options given between RANK
    and `--` are applied to `args` (a command starting with `-` goes after `--`)."""
    rest, unknown = list(args.remote), []
    while rest and rest[0] != "--" and rest[0].startswith("-"):
        word = rest.pop(0)
        if word in _FLAGS:
            setattr(args, _FLAGS[word], True)
        else:
            unknown.append(word)
    return (rest[1:] if rest[:1] == ["--"] else rest), unknown


def run(args: argparse.Namespace) -> int:
    from cockpit.cli.common import CliError, error_json, print_json, remedy
    json_before = args.json     # `--json` before RANK: the CLI prints the JSON error itself
    try:
        return _run(args)
    except CliError as exc:
        if args.json and not json_before:
            print_json(error_json(exc.code, remedy(args, str(exc))))
        raise


def _run(args: argparse.Namespace) -> int:
    import time

    from cockpit.cli.common import (
        EXIT_FAILURE,
        EXIT_REFUSED,
        CliError,
        check_ranks,
        load,
        refuse_if_read_only,
        usage_error,
    )
    from cockpit.hosts.shell_login import (
        SSH_MISSING,
        ShellRefused,
        run_attached,
        shell_argv,
        shown,
        ssh_client,
    )
    command, unknown = split_remote(args)
    _path, config = load(args)
    refuse_if_read_only(args, config)   # first: whatever else is wrong, read-only refuses
    if unknown:
        raise usage_error(f"ssh: {' '.join(unknown)} after RANK: only --container, --read-only and --json go "
                          "there (other options before RANK; a command to run after `--`)")
    check_ranks(config, [args.rank])
    if ssh_client() is None:
        raise CliError(SSH_MISSING, EXIT_FAILURE, "command-failed")
    tty = sys.stdin.isatty() and sys.stdout.isatty()
    try:
        argv = shell_argv(config, args.rank, container=args.container, command=command, tty=tty)
    except ShellRefused as exc:
        raise CliError(str(exc), EXIT_REFUSED, exc.code) from None
    line = shown(argv)
    print(line, file=sys.stderr, flush=True)
    started = time.time()
    status = run_attached(argv)
    _record(config, args.rank, line, started, time.time() - started, status, args.container)
    return status


def _record(config: ClusterConfig, rank: int, line: str, started: float, duration: float, status: int,
            container: bool) -> None:
    """The session in the command log (the session file of this command, as for every command)."""
    from cockpit.hosts import Fleet
    Fleet(config).record_external(rank, line, started, duration, status,
                                  note="interactive container shell" if container else "interactive shell",
                                  origin="ssh")
