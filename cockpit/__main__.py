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
        return main()       # main handles Ctrl-C in a command; this, in the imports before it runs
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    raise SystemExit(run())
