"""`head` stand-in: sim-owned paths from the host root (-n/-c/-q/-v), everything else real /usr/bin/head."""

from __future__ import annotations

import os
import re
import sys

from cockpit.sim.tools import _paths

REAL = "/usr/bin/head"


def _take(data: bytes, lines: int | None, nbytes: int | None) -> bytes:
    if nbytes is not None:
        return data[:nbytes] if nbytes >= 0 else data[: max(0, len(data) + nbytes)]
    n = 10 if lines is None else lines
    parts = data.splitlines(keepends=True)
    return b"".join(parts[:n] if n >= 0 else parts[: max(0, len(parts) + n)])


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    lines: int | None = None
    nbytes: int | None = None
    verbose: bool | None = None
    operands: list[str] = []
    i = 0
    try:
        while i < len(args):
            a = args[i]
            if a == "--":
                operands.extend(x for o in args[i + 1 :] for x in _paths.expand(o))
                break
            m = re.fullmatch(r"-(n|c)(-?\d+)?|--(lines|bytes)(?:=(-?\d+))?", a)
            if m:
                value = m.group(2) or m.group(4)
                if value is None:
                    i += 1
                    value = args[i]
                if (m.group(1) or m.group(3))[0] == "n" or m.group(3) == "lines":
                    lines = int(value)
                else:
                    nbytes = int(value)
            elif re.fullmatch(r"-\d+", a):
                lines = int(a[1:])
            elif a in ("-q", "--quiet", "--silent"):
                verbose = False
            elif a in ("-v", "--verbose"):
                verbose = True
            elif a.startswith("-") and a != "-":
                os.execv(REAL, ["head", *args])
            else:
                operands.extend(_paths.expand(a))
            i += 1
    except (IndexError, ValueError):
        os.execv(REAL, ["head", *args])
    if not any(_paths.owned(p) for p in operands):
        os.execv(REAL, ["head", *args])
    show = verbose if verbose is not None else len(operands) > 1
    out = sys.stdout.buffer
    rc = 0
    for k, p in enumerate(operands):
        try:
            if _paths.owned(p):
                data = _paths.read_owned(p)
            elif p == "-":
                data = sys.stdin.buffer.read()
            else:
                try:
                    with open(p, "rb") as f:
                        data = f.read()
                except OSError as e:
                    if os.path.isdir(p):
                        raise
                    out.flush()
                    sys.stderr.write(f"head: cannot open '{p}' for reading: {e.strerror}\n")
                    rc = 1
                    continue
        except OSError as e:
            out.flush()
            if (_paths.owned(p) and os.path.exists(_paths._host.root() + p)) or os.path.isdir(p):
                sys.stderr.write(f"head: error reading '{p}': {e.strerror}\n")
            else:
                sys.stderr.write(f"head: cannot open '{p}' for reading: {e.strerror}\n")
            rc = 1
            continue
        if show:
            out.write(f"{'' if k == 0 else chr(10)}==> {'standard input' if p == '-' else p} <==\n".encode())
        out.write(_take(data, lines, nbytes))
    out.flush()
    return rc


if __name__ == "__main__":
    sys.exit(main())
