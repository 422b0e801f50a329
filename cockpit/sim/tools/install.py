"""Write the stand-in wrappers into a host's bin dir."""

from __future__ import annotations

import os
import shlex
from pathlib import Path

PACKAGE_PARENT = str(Path(__file__).resolve().parents[3])

COMMON = {
    "uname": "uname",
    "nvidia-smi": "nvidia_smi",
    "docker": "docker",
    "rdma": "rdma",
    "ibv_devinfo": "ibv_devinfo",
    "ibdev2netdev": "ibdev2netdev",
    "hf": "hf",
    "ib_write_bw": "ib_write_bw",
    "ib_write_lat": "ib_write_lat",
    "journalctl": "journalctl",
    "py-spy": "py_spy",          # the engine image's py-spy (the sim's "container" sees the host PATH)
}
DEMO_ONLY = {"ip": "ip", "ss": "ss", "df": "df", "hostname": "hostname"}
# cat/head only start Python when an operand is a path the sim owns.
OWNED_CASE = "/proc/meminfo|/sys/class/infiniband|/sys/class/infiniband/*"


def _runner(python: str, module: str) -> str:
    """`python -S` (no site: ~15 ms instead of ~60 ms) with the package put on sys.path by hand."""
    code = (
        f"import sys;sys.path.insert(0,{PACKAGE_PARENT!r});"
        f"from cockpit.sim.tools.{module} import main;sys.exit(main())"
    )
    return f'exec {shlex.quote(python)} -S -c {shlex.quote(code)} "$@"'


def wrapper(python: str, module: str) -> str:
    return f"#!/bin/sh\n# r37 sim stand-in: cockpit.sim.tools.{module}\n{_runner(python, module)}\n"


def owned_path_wrapper(python: str, module: str, real: str) -> str:
    """bash (for `exec -a`, so the real tool's messages say `cat:` and not `/bin/cat:`)."""
    name = os.path.basename(real)
    return (
        f"#!/bin/bash\n# r37 sim stand-in: cockpit.sim.tools.{module} for sim paths, else {real}\n"
        f'for a in "$@"; do\n  case $a in {OWNED_CASE}) {_runner(python, module)} ;; esac\ndone\n'
        f'exec -a {name} {real} "$@"\n'
    )


def _write(path: Path, text: str) -> None:
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(text)
    tmp.chmod(0o755)
    tmp.replace(path)


def install_tools(bin_dir: os.PathLike[str] | str, python: str, demo: bool) -> None:
    """Write every wrapper (idempotent). `python` runs the stand-ins and `python3` (prepare-engram)."""
    bin_dir = Path(bin_dir)
    bin_dir.mkdir(parents=True, exist_ok=True)
    tools = dict(COMMON, **(DEMO_ONLY if demo else {}))
    for name, module in tools.items():
        _write(bin_dir / name, wrapper(python, module))
    _write(bin_dir / "cat", owned_path_wrapper(python, "cat", "/bin/cat"))
    _write(bin_dir / "head", owned_path_wrapper(python, "head", "/usr/bin/head"))
    _write(bin_dir / "python3", f'#!/bin/sh\nexec {shlex.quote(python)} "$@"\n')
