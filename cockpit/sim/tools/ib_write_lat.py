"""`ib_write_lat` stand-in (perftest): see `cockpit.sim.tools._perftest`."""

from __future__ import annotations

import sys

from cockpit.sim.tools._perftest import main_for


def main(argv: list[str] | None = None) -> int:
    return main_for(True, argv)


if __name__ == "__main__":
    sys.exit(main())
