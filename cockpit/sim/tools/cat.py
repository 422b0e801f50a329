"""`cat` stand-in: sim-owned paths are read from the host root, everything else is the real /bin/cat."""

from __future__ import annotations

import os
import sys

from cockpit.sim.tools import _paths

REAL = "/bin/cat"


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    operands: list[str] = []
    end_of_opts = False
    for a in args:
        if not end_of_opts and a == "--":
            end_of_opts = True
        elif not end_of_opts and a.startswith("-") and a != "-":
            os.execv(REAL, ["cat", *args])  # options: the real tool (sim paths are only read plainly)
        else:
            operands.extend(_paths.expand(a))
    if not any(_paths.owned(p) for p in operands):
        os.execv(REAL, ["cat", *args])
    rc = 0
    out = sys.stdout.buffer
    for p in operands:
        try:
            if _paths.owned(p):
                out.write(_paths.read_owned(p))
            elif p == "-":
                out.write(sys.stdin.buffer.read())
            else:
                with open(p, "rb") as f:
                    out.write(f.read())
        except OSError as e:
            out.flush()
            sys.stderr.write(f"cat: {p}: {e.strerror}\n")
            rc = 1
    out.flush()
    return rc


if __name__ == "__main__":
    sys.exit(main())
