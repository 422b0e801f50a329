"""httpx, the cockpit's HTTP client, without httpx's own command-line client.

`import httpx` also imports `httpx._main`, its `httpx` shell command, which pulls in click, pygments and
rich's progress and syntax modules whenever they are installed (they are, beside textual): about a third
of httpx's import time, for a command the cockpit never runs. A `None` in `sys.modules` makes that one
import fail at once (the import system's documented way to block a module); httpx catches the
ImportError and defines a stand-in `main`. Every cockpit module takes httpx from here.
"""

from __future__ import annotations

import sys

sys.modules.setdefault("httpx._main", None)  # type: ignore[arg-type]  # None: the documented block

import httpx  # noqa: E402  (after the block above, by design)

__all__ = ["httpx"]
