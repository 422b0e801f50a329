"""`uname` stand-in: a DGX Spark (aarch64, NVIDIA kernel) with the host's simulated hostname."""

from __future__ import annotations

import os
import sys

from cockpit.sim.tools import _host

KERNEL = "Linux"
RELEASE = "6.11.0-1016-nvidia"
VERSION = "#16-Ubuntu SMP PREEMPT_DYNAMIC Sun Sep 21 16:52:46 UTC 2025"
MACHINE = "aarch64"
LONG = {
    "--kernel-name": "s",
    "--nodename": "n",
    "--kernel-release": "r",
    "--kernel-version": "v",
    "--machine": "m",
    "--processor": "p",
    "--hardware-platform": "i",
    "--operating-system": "o",
    "--all": "a",
}


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    flags = ""
    for a in args:
        if a in ("--help", "--version"):
            os.execv("/usr/bin/uname", ["uname", a])
        if a in LONG:
            flags += LONG[a]
        elif a.startswith("-") and len(a) > 1 and not a.startswith("--") and set(a[1:]) <= set("snrvmpioa"):
            flags += a[1:]
        else:
            if a.startswith("--"):
                msg = f"unrecognized option '{a}'"
            elif a.startswith("-") and len(a) > 1:
                msg = f"invalid option -- '{next(c for c in a[1:] if c not in 'snrvmpioa')}'"
            else:
                msg = f"extra operand '{a}'"
            sys.stderr.write(f"uname: {msg}\nTry 'uname --help' for more information.\n")
            return 1
    try:
        node = _host.spec().get("hostname") or os.uname().nodename
    except OSError:
        node = os.uname().nodename
    values = {
        "s": KERNEL,
        "n": node,
        "r": RELEASE,
        "v": VERSION,
        "m": MACHINE,
        "p": MACHINE,
        "i": MACHINE,
        "o": "GNU/Linux",
    }
    if not flags:
        flags = "s"
    order = "snrvmpio" if "a" in flags else "".join(c for c in "snrvmpio" if c in flags)
    sys.stdout.write(" ".join(values[c] for c in order) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
