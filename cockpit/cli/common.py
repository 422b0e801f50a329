"""Helpers shared by the subcommands: config loading, JSON output, async running."""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from collections.abc import Coroutine
from pathlib import Path
from typing import Any, TypeVar

from cockpit.config import ClusterConfig, discover_config, load_config

T = TypeVar("T")


class CliError(Exception):
    """A failure the user can act on: printed as one sentence, no traceback."""

    def __init__(self, message: str, exit_code: int = 1):
        super().__init__(message)
        self.exit_code = exit_code


def add_json(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--json", action="store_true", help="print machine-readable JSON")


def config_path(args: argparse.Namespace) -> Path:
    return discover_config(getattr(args, "config", None))


def load(args: argparse.Namespace) -> tuple[Path, ClusterConfig]:
    path = config_path(args)
    return path, load_config(path)


def print_json(data: Any) -> None:
    json.dump(data, sys.stdout, indent=2, default=str)
    sys.stdout.write("\n")


def run_async(coro: Coroutine[Any, Any, T]) -> T:
    return asyncio.run(coro)


def run_async_fast(coro: Coroutine[Any, Any, T]) -> T:
    """Like :func:`run_async`, on uvloop when it is installed (~30 % less CPU per streamed token).

    Only for headless commands (``chat``, ``smoke``); the Textual app keeps its own asyncio loop.
    """
    try:
        import uvloop
    except ImportError:
        return asyncio.run(coro)
    return uvloop.run(coro)


def table(rows: list[list[str]], header: list[str]) -> str:
    """A plain aligned text table (no colour: safe to pipe)."""
    widths = [max(len(str(r[i])) for r in [header, *rows]) for i in range(len(header))]
    lines = ["  ".join(str(c).ljust(w) for c, w in zip(header, widths, strict=True)).rstrip()]
    lines += ["  ".join(str(c).ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in rows]
    return "\n".join(lines)
