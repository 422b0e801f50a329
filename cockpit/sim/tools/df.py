"""`df` stand-in for demo hosts: paths under `srv_dir` are one filesystem of `disk_bytes` whose usage is
what is really allocated under srv_dir (st_blocks, so sparse files count as allocated); other paths,
or `disk_bytes == 0`, are the real /usr/bin/df. Fault `low-disk`: 1/256 of the simulated disk is
available, at most 30 GB (or {"avail_bytes": N}). Supported: `-P`, `-B1`/`--block-size=1`, `-h`,
`-k`, `--`; anything else (e.g. `-T`) goes to the real df.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys

from cockpit.sim.tools import _host

REAL = "/usr/bin/df"
DEVICE = "/dev/nvme0n1p2"
LOW_DISK_AVAIL = 30_000_000_000


def allocated(top: str) -> int:
    total = 0
    for dirpath, dirnames, filenames in os.walk(top):
        for name in filenames + dirnames:
            with contextlib.suppress(OSError):
                total += os.lstat(os.path.join(dirpath, name)).st_blocks * 512
    return total


def usage(spec: dict) -> tuple[int, int, int]:
    size = int(spec["disk_bytes"])
    used = min(size, allocated(spec["srv_dir"]))
    avail = size - used
    if _host.fault("low-disk"):
        default = min(LOW_DISK_AVAIL, size // 256)
        avail = min(avail, int(_host.fault_params("low-disk").get("avail_bytes", default)))
        used = size - avail
    return size, used, avail


def human(n: int) -> str:
    """coreutils -h: powers of 1024, one decimal below 10, rounded up."""
    import math

    units = "BKMGTPE"
    i = 0
    v = float(n)
    while v >= 1024 and i < len(units) - 1:
        v /= 1024
        i += 1
    if i == 0:
        return str(n)
    v = math.ceil(v * 10) / 10 if v < 10 else math.ceil(v)
    return (f"{v:.1f}" if v < 10 else f"{int(v)}") + units[i]


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    spec = _host.spec()
    srv = os.path.realpath(spec.get("srv_dir") or "/srv")
    if "--" in args:  # end of options, as coreutils takes it
        cut = args.index("--")
        opts = [a for a in args[:cut] if a.startswith("-")]
        paths = [a for a in args[:cut] if not a.startswith("-")] + args[cut + 1:]
    else:
        opts = [a for a in args if a.startswith("-")]
        paths = [a for a in args if not a.startswith("-")]
    known = {"-P", "--portability", "-B1", "--block-size=1", "-h", "--human-readable", "-k", "-Ph", "-hP"}
    sim = [p for p in paths if os.path.realpath(p) == srv or os.path.realpath(p).startswith(srv + os.sep)]
    if not int(spec.get("disk_bytes") or 0) or not sim or any(o not in known for o in opts):
        os.execv(REAL, [REAL, *args])
    human_mode = any(o in ("-h", "--human-readable", "-Ph", "-hP") for o in opts)
    block = 1 if any(o in ("-B1", "--block-size=1") for o in opts) else 1024
    portable = any(o in ("-P", "--portability", "-Ph", "-hP") for o in opts)
    rows = []
    rc = 0
    for p in paths:
        if p in sim:
            if not os.path.exists(p):
                sys.stderr.write(f"df: {p}: No such file or directory\n")
                rc = 1
                continue
            size, used, avail = usage(spec)
            pct = f"{-(-used * 100 // max(1, used + avail))}%"
            if human_mode:
                rows.append([DEVICE, human(size), human(used), human(avail), pct, srv])
            else:
                rows.append(
                    [DEVICE, str(-(-size // block)), str(-(-used // block)), str(avail // block), pct, srv]
                )
        else:
            r = subprocess.run([REAL, *opts, p], capture_output=True, text=True)
            sys.stderr.write(r.stderr)
            rc = rc or r.returncode
            rows.extend(line.split(None, 5) for line in r.stdout.splitlines()[1:])
    if human_mode:
        head = ["Filesystem", "Size", "Used", "Avail", "Use%", "Mounted on"]
    else:
        head = [
            "Filesystem",
            "1-blocks" if block == 1 else "1024-blocks" if portable else "1K-blocks",
            "Used",
            "Available",
            "Capacity" if portable else "Use%",
            "Mounted on",
        ]
    table = [head, *rows]
    widths = [max(len(r[i]) for r in table) for i in range(5)]
    for row in table:
        cells = [row[0].ljust(widths[0])] + [row[i].rjust(widths[i]) for i in range(1, 5)]
        sys.stdout.write(" ".join(cells) + " " + row[5] + "\n")
    return rc


if __name__ == "__main__":
    sys.exit(main())
