"""A package's public names, imported when first used (PEP 562), so that importing one small module of
a package does not import all of it: `cockpit.hosts.shell` without asyncssh, `cockpit.api.chat` without
httpx. `r37-cockpit --help` and a headless command start in the time their own modules take.

A package lists its names once, by module, for `lazy_exports`, and imports the same names under
`TYPE_CHECKING` for the type checker (tests/unit/test_lazy_exports.py keeps the two lists equal)."""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Mapping, Sequence
from typing import Any


def lazy_exports(package: str, modules: Mapping[str, Sequence[str]]
                 ) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """`(__getattr__, __dir__)` for `package`: each name of `modules[m]` is `m`'s attribute, imported
    (and kept on the package) at first access."""
    where = {name: module for module, names in modules.items() for name in names}

    def __getattr__(name: str) -> Any:
        module = where.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(module), name)
        setattr(sys.modules[package], name, value)
        return value

    def __dir__() -> list[str]:
        return sorted({*where, *vars(sys.modules[package])})

    return __getattr__, __dir__
