"""The packages whose names are imported at first use (`cockpit.lazy`): every name of `__all__` is in
the lazy table and in the type checker's imports, resolves to its module's object, and importing one
small module of the package does not import the heavy libraries."""

from __future__ import annotations

import ast
import importlib
import subprocess
import sys
from pathlib import Path

import pytest

LAZY = ("cockpit.hosts", "cockpit.api", "cockpit.config")


def type_checking_names(package: str) -> dict[str, str]:
    """name -> module of the `if TYPE_CHECKING:` imports of the package's __init__."""
    path = Path(importlib.import_module(package).__file__ or "")
    found: dict[str, str] = {}
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.If) and getattr(node.test, "id", "") == "TYPE_CHECKING":
            for stmt in node.body:
                if isinstance(stmt, ast.ImportFrom) and stmt.module:
                    found.update({a.name: stmt.module for a in stmt.names})
    return found


@pytest.mark.parametrize("package", LAZY)
def test_all_lazy_table_and_type_checking_imports_agree(package: str) -> None:
    pkg = importlib.import_module(package)
    table = {name: module for module, names in pkg.EXPORTS.items() for name in names}
    assert sorted(table) == sorted(pkg.__all__)
    assert type_checking_names(package) == table
    for name, module in table.items():
        assert getattr(pkg, name) is getattr(importlib.import_module(module), name)
    with pytest.raises(AttributeError):
        pkg.no_such_name  # noqa: B018


@pytest.mark.parametrize(("module", "heavy"), [
    ("cockpit.hosts.shell", "asyncssh"), ("cockpit.hosts.state", "asyncssh"),
    ("cockpit.api.chat", "httpx"), ("cockpit.cli", "textual"),
])
def test_a_small_module_does_not_import_the_heavy_library(module: str, heavy: str) -> None:
    code = f"import sys, {module}; print({heavy!r} in sys.modules)"
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert res.returncode == 0, res.stderr
    assert res.stdout.strip() == "False"
