"""The layer rules of docs/DESIGN.md#layers, read from the import statements of every module."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2] / "cockpit"
SIM_MAY_IMPORT = {"cockpit.constants", "cockpit.kstamp"}  # no cockpit logic: the sim stands in for the world


def imports(path: Path) -> set[str]:
    """Every module ``path`` imports (``from cockpit import x`` counts as ``cockpit.x``)."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            found.add(node.module)
            found.update(f"{node.module}.{alias.name}" for alias in node.names)
    return found


def modules(layer: str) -> list[Path]:
    return sorted((ROOT / layer).rglob("*.py"))


@pytest.mark.parametrize("path", modules("tui"), ids=lambda p: str(p.relative_to(ROOT)))
def test_tui_never_imports_the_transports(path: Path) -> None:
    bad = {m for m in imports(path) if m.split(".")[0] in {"asyncssh", "httpx"}}
    assert not bad, f"{path.relative_to(ROOT)} imports {sorted(bad)}"


@pytest.mark.parametrize("path", modules("sim"), ids=lambda p: str(p.relative_to(ROOT)))
def test_sim_imports_only_shared_constants_of_the_cockpit(path: Path) -> None:
    bad = {m for m in imports(path) if m.startswith("cockpit") and not m.startswith("cockpit.sim")
           and m != "cockpit" and m not in SIM_MAY_IMPORT}
    assert not bad, f"{path.relative_to(ROOT)} imports {sorted(bad)}"


def test_only_hosts_reaches_hosts_over_ssh() -> None:
    users = {str(p.relative_to(ROOT)) for p in ROOT.rglob("*.py")
             if "asyncssh" in {m.split(".")[0] for m in imports(p)}}
    assert {u for u in users if not u.startswith(("hosts/", "sim/"))} == set()
