"""`ib_write_bw` stand-in (perftest): see `cockpit.sim.tools._perftest`."""

from __future__ import annotations

import sys

from cockpit.sim.tools._perftest import main_for


def main(argv: list[str] | None = None) -> int:
    return main_for(False, argv)


if __name__ == "__main__":
    sys.exit(main())
