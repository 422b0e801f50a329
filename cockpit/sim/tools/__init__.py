"""Host tool stand-ins of the simulated GB10 host (one module per tool, stdlib only, fast start).

Each stand-in is run by a small `#!/bin/sh` wrapper that `install_tools` writes into a host's bin dir;
the tools find their host through `$R37_SIM_ROOT` (see `cockpit.sim.layout`) and print the formats of
the real tools (docs/host-tools.md).
"""

from __future__ import annotations

import os


def install_tools(bin_dir: os.PathLike[str] | str, python: str, demo: bool) -> None:
    """Write the wrappers of every stand-in into `bin_dir` (see `cockpit.sim.tools.install`)."""
    from cockpit.sim.tools.install import install_tools as _install

    _install(bin_dir, python, demo)
