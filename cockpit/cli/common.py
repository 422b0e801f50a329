"""Helpers shared by the subcommands: the exit codes, config loading, remedies, JSON output, async running.

Exit codes, the same for every command (README "Exit codes"):

    0    ok
    1    a failure found: a check or a rank failed, a host is unreachable, the API does not answer
    2    usage or config error: a bad argument or --rank, a broken or missing cluster.toml, bad input
    3    refused: needs confirmation (--yes), or blocked by a guard (an existing container, preflight
         failures, a file that exists without --force, a different cluster.env without --overwrite-env),
         or read-only mode (--read-only, [ui] read_only) and the command would change a host
    70   internal error: a bug in the cockpit (R37_DEBUG=1 prints the traceback)
    130  interrupted (Ctrl-C)
"""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
from collections.abc import Coroutine
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from cockpit.errorcodes import CODES
from cockpit.errorcodes import check as check_code
from cockpit.recipe.readonly import command_change, refusal
from cockpit.remedy import cockpit_remedy

if TYPE_CHECKING:
    from cockpit.config import ClusterConfig
    from cockpit.hosts import Fleet

# Light on purpose: every command imports this module, so `--help` would pay for what it imports. The
# config models (pydantic), the recipe and asyncio are imported where they are used.

T = TypeVar("T")

EXIT_OK = 0
EXIT_FAILURE = 1        # a failure found: check or rank failed, host unreachable, API not answering
EXIT_USAGE = 2          # usage or config error: bad argument or --rank, broken cluster.toml, bad input
EXIT_REFUSED = 3        # refused: needs confirmation (--yes) or blocked by a guard
EXIT_INTERNAL = 70      # a bug in the cockpit (EX_SOFTWARE)
EXIT_INTERRUPTED = 130  # Ctrl-C (128 + SIGINT)


_DEFAULT_CODE = {EXIT_USAGE: "usage", EXIT_REFUSED: "launch-blocked", EXIT_FAILURE: "command-failed"}


class CliError(Exception):
    """A failure the user can act on: printed as one sentence, no traceback.

    ``code`` is its stable error code (`cockpit.errorcodes`), printed in ``--json`` output.
    """

    def __init__(self, message: str, exit_code: int = EXIT_FAILURE, code: str | None = None):
        super().__init__(message)
        self.exit_code = exit_code
        self.code = check_code(code or _DEFAULT_CODE.get(exit_code, "command-failed"))


def usage_error(message: str) -> CliError:
    return CliError(message, EXIT_USAGE, "usage")


def error_json(code: str, message: str, remedy: str | None = None) -> dict[str, Any]:
    """The `--json` shape of a command that failed: `{"ok": false, "error": {code, message, remedy}}`."""
    return {"ok": False, "error": {"code": check_code(code), "message": message,
                                   "remedy": remedy if remedy is not None else CODES[code].remedy}}


def check_ranks(config: ClusterConfig, ranks: list[int] | None) -> None:
    """A usage error (exit 2) naming the ``--rank`` values no host in cluster.toml has."""
    from cockpit.recipe.checks import ranks_text
    bad = sorted(set(ranks or ()) - set(config.ranks))
    if bad:
        raise usage_error(f"no host has rank {', '.join(map(str, bad))} (ranks: {ranks_text(config.ranks)})")


def remedy(args: argparse.Namespace, text: str) -> str:
    """`text` with `--config PATH` in every quoted `r37-cockpit …` command when this command was given a
    config that default discovery would not find (see `cockpit.remedy`)."""
    return cockpit_remedy(text, getattr(args, "config", None))


def add_json(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--json", action="store_true", help="print machine-readable JSON")


def config_path(args: argparse.Namespace) -> Path:
    from cockpit.config.loading import discover_config
    return discover_config(getattr(args, "config", None))


def load(args: argparse.Namespace) -> tuple[Path, ClusterConfig]:
    """The config this command runs with: cluster.toml, with `[ui] read_only` turned on by `--read-only`
    (never off: the config's `read_only = true` holds whatever the command line says)."""
    from cockpit.config.loading import load_config
    path = config_path(args)
    config = load_config(path)
    if getattr(args, "read_only", False) and not config.ui.read_only:
        config = config.model_copy(update={"ui": config.ui.model_copy(update={"read_only": True})})
    return path, config


def refuse_if_read_only(args: argparse.Namespace, config: ClusterConfig) -> None:
    """Refused (exit 3, `read-only`) when the mode is on and this command would change a host, by the one
    list of host changes (`cockpit.recipe.readonly`); before anything connects."""
    change = command_change(getattr(args, "command", None), vars(args))
    if config.ui.read_only and change is not None:
        raise CliError(refusal(change), EXIT_REFUSED, "read-only")


def print_json(data: Any) -> None:
    json.dump(data, sys.stdout, indent=2, default=str)
    sys.stdout.write("\n")


SHUTDOWN_GRACE = 5.0  # seconds the tasks still running when a command is done get to finish


def run_async(coro: Coroutine[Any, Any, T], *, fast: bool = False) -> T:
    """Run a command's coroutine; with `fast`, on uvloop when installed (~30 % less CPU per token).

    Unlike `asyncio.run`, the tasks still pending at the end (a host connection being torn down, say)
    get a bounded grace period: a task that ignores its cancellation can never keep the command from
    exiting after it has printed its result.
    """
    import asyncio
    loop: asyncio.AbstractEventLoop | None = None
    if fast:
        try:
            import uvloop
            loop = uvloop.new_event_loop()
        except ImportError:
            loop = None
    loop = loop or asyncio.new_event_loop()
    loop.set_exception_handler(_quiet_interrupts)
    try:
        return loop.run_until_complete(coro)
    finally:
        pending = [t for t in asyncio.all_tasks(loop) if not t.done()]
        for task in pending:
            task.cancel()
        if pending:
            loop.run_until_complete(asyncio.wait(pending, timeout=SHUTDOWN_GRACE))
        with contextlib.suppress(Exception):
            loop.run_until_complete(asyncio.wait_for(loop.shutdown_asyncgens(), SHUTDOWN_GRACE))
        loop.close()


def _quiet_interrupts(loop: Any, context: dict[str, Any]) -> None:
    """Ctrl-C lands in whichever task was running; that task keeps the KeyboardInterrupt the command's own
    handler reports ("interrupted: …"). asyncio would also print it as a traceback ("exception was never
    retrieved") when the task is collected: not for an interrupt. Every other error is reported as before."""
    if isinstance(context.get("exception"), KeyboardInterrupt | SystemExit):
        return
    loop.default_exception_handler(context)


def run_async_fast(coro: Coroutine[Any, Any, T]) -> T:
    """`run_async` on uvloop: only for headless commands (`chat`, `smoke`); the TUI keeps asyncio."""
    return run_async(coro, fast=True)


async def connected_fleet(fleet: Fleet, cfg: ClusterConfig) -> None:
    """Wait for the fleet's first connections (a host that does not connect in time is shown as such)."""
    await fleet.wait_connected(cfg.ssh.connect_timeout + 5)


def table(rows: list[list[str]], header: list[str]) -> str:
    """A plain aligned text table (no colour: safe to pipe)."""
    widths = [max(len(str(r[i])) for r in [header, *rows]) for i in range(len(header))]
    lines = ["  ".join(str(c).ljust(w) for c, w in zip(header, widths, strict=True)).rstrip()]
    lines += ["  ".join(str(c).ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in rows]
    return "\n".join(lines)
