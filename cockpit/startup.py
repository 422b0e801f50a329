"""Start-up without the cyclic garbage collector.

Importing the cockpit makes a few hundred thousand objects that live as long as the process (modules,
classes, functions) and almost no garbage, yet the collector walks the growing heap again and again
while they are made: about a tenth of the TUI's start (`perf/startup.py` measures it). So the
collector is off from the first line of `r37-cockpit` (`begin`) until the command is ready to run
(`end`): a headless command before its handler, the TUI once its first frame is drawn, where it also
collects once and freezes what is left (`gc.freeze`: kept out of every later pass, which otherwise
stalls the UI ~90 ms every second or so under a log flood).

`end` turns the collector back on only if `begin` turned it off, so an app run inside a test process
(which never called `begin`) leaves that process's collector as it was.
"""

from __future__ import annotations

import gc

_paused = False


def begin() -> None:
    """Turn the collector off for the start-up (nothing if it is off already)."""
    global _paused
    if gc.isenabled():
        gc.disable()
        _paused = True


def end(*, freeze: bool = False) -> None:
    """The start-up is over: with `freeze`, collect once and move every object left into the permanent
    generation; then turn the collector back on if `begin` turned it off."""
    global _paused
    if freeze:
        gc.collect()
        gc.freeze()
    if _paused:
        _paused = False
        gc.enable()


def paused() -> bool:
    """Whether the start-up has the collector off now."""
    return _paused
