"""`python -m cockpit` and the `r37-cockpit` script: the CLI. Ctrl-C while the modules are still being
imported is an interruption like any other (exit 130), not a traceback. The garbage collector is off
while the modules are imported (`cockpit.startup`)."""

from __future__ import annotations

import sys

from cockpit import startup


def run() -> int:
    startup.begin()
    try:
        from cockpit.cli import main
        code = main()       # main handles Ctrl-C in a command; this, in the imports before it runs
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        code = 130
    _forget_handled_interrupts()
    return code


def _forget_handled_interrupts() -> None:
    """The cockpit handles every Ctrl-C itself, so its exit status is the one `run` returns. CPython 3.11
    marks a Ctrl-C that ended an `exec()`'d string (dataclasses build their methods so: one landing during
    the imports often does) as unhandled even after it was handled, and `python -m` then ends the process
    by SIGINT instead. Every new `exec()` clears that mark."""
    exec("pass")


if __name__ == "__main__":
    raise SystemExit(run())
