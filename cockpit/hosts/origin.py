"""Who asked for a command: the pane or command on whose behalf the hosts layer runs it.

`asking(name)` sets the origin for the code inside it; asyncio tasks copy the context when they are
created, so tasks started inside inherit it. The resolvers registered with `add_resolver` are asked
first, and the first non-empty answer wins (the TUI names the pane whose worker runs the command, inside
the app's own `asking("tui")`); then the origin set; unknown stays "".
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar

_ORIGIN: ContextVar[str] = ContextVar("cockpit_origin", default="")
_RESOLVERS: list[Callable[[], str]] = []


@contextmanager
def asking(name: str) -> Iterator[None]:
    """Commands run (and tasks started) inside are recorded as asked by `name`."""
    token = _ORIGIN.set(name)
    try:
        yield
    finally:
        _ORIGIN.reset(token)


def add_resolver(resolver: Callable[[], str]) -> None:
    """Ask `resolver` first for the origin (it returns "" when it does not know); added once."""
    if resolver not in _RESOLVERS:
        _RESOLVERS.insert(0, resolver)


def current() -> str:
    """The origin of a command run now: a resolver's answer, else the `asking` name, else ""."""
    for resolver in _RESOLVERS:
        try:
            found = resolver()
        except Exception:  # a resolver never breaks a command
            found = ""
        if found:
            return found
    return _ORIGIN.get()
