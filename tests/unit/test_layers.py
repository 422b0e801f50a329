"""The layer rules of docs/DESIGN.md#layers, read from the import statements of every module.

Imports point down only: `cli` → `tui` → `bench` → `recipe` → `telemetry` → `api` → `hosts` → the base modules
(`BASE`: the config package and the small modules at the package root). A module may import its own
layer and the layers below; base modules may import each other but nothing above them. `cli` (the
`demo` and `sim` commands) is the only layer that may import `sim`, and `sim` imports nothing of the
cockpit but `cockpit.constants` and `cockpit.kstamp`. Imports by name through `importlib.import_module`
or `__import__` with a constant `"cockpit.…"` string count like `import` statements.
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2] / "cockpit"
SIM_MAY_IMPORT = {"cockpit.constants", "cockpit.kstamp"}  # no cockpit logic: the sim stands in for the world

ORDER = ("cli", "tui", "bench", "recipe", "telemetry", "api", "hosts", "base")   # top to bottom
BASE = {"__init__", "config", "constants", "envfile", "errorcodes", "files", "kstamp", "lazy", "locations",
        "loopback", "redact", "remedy", "safetext", "startup"}
"""Modules and packages at the package root below every layer (`__init__`: `cockpit.__version__`)."""
ENTRY = {"__main__"}   # `python -m cockpit`: runs the CLI, so it sits with it
MAY_ALSO_IMPORT = {"cli": {"sim"}}   # `r37-cockpit demo` / `sim` start the simulated cluster

# Known upward imports, each waiting for a fix its owner has in hand. Empty this when they land.
KNOWN_UPWARD: set[tuple[str, str]] = set()


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _is_package(path: Path) -> bool:
    return path.name == "__init__.py"


def _constant_import(node: ast.Call) -> str | None:
    """The module named by `importlib.import_module("cockpit.x")` / `import_module(...)` / `__import__`."""
    func = node.func
    name = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else None
    if name not in ("import_module", "__import__") or not node.args:
        return None
    arg = node.args[0]
    return arg.value if isinstance(arg, ast.Constant) and isinstance(arg.value, str) else None


def imports(path: Path) -> set[str]:
    """Every module ``path`` imports (``from cockpit import x`` counts as ``cockpit.x``; relative imports
    resolved; constant-string imports through importlib too)."""
    found: set[str] = set()
    package = _module_name(path) if _is_package(path) else _module_name(path).rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                module = ".".join(base + ([node.module] if node.module else []))
            else:
                module = node.module or ""
            found.add(module)
            found.update(f"{module}.{alias.name}" for alias in node.names)
        elif isinstance(node, ast.Call):
            named = _constant_import(node)
            if named:
                found.add(named)
    return found


def modules(layer: str) -> list[Path]:
    return sorted((ROOT / layer).rglob("*.py"))


def resolve(name: str) -> str | None:
    """The cockpit module an imported name lives in (`cockpit.config.ClusterConfig` -> `cockpit.config`);
    None for a name outside the cockpit."""
    parts = name.split(".")
    if parts[0] != "cockpit":
        return None
    for end in range(len(parts), 1, -1):
        where = ROOT.joinpath(*parts[1:end])
        if where.with_suffix(".py").is_file() or (where / "__init__.py").is_file():
            return ".".join(parts[:end])
    return "cockpit"


def layer_of(module: str) -> str:
    """The layer of a cockpit module by its name: its top package, `base`, `cli` for the entry point."""
    head = module.split(".")[1] if "." in module else "__init__"
    if head in BASE:
        return "base"
    if head in ENTRY:
        return "cli"
    return head


def may_import(layer: str, target: str) -> bool:
    if layer == target or target in MAY_ALSO_IMPORT.get(layer, set()):
        return True
    if layer not in ORDER or target not in ORDER:
        return False
    return ORDER.index(target) > ORDER.index(layer)


def upward_imports(path: Path) -> list[str]:
    """`name (layer)` for every import of `path` that points up or sideways out of its layer."""
    own = layer_of(_module_name(path))
    if own not in ORDER:
        return []          # in no layer: test_every_module_is_in_a_layer says so
    bad = set()
    for name in imports(path):
        module = resolve(name)
        if module is None:
            continue
        target = layer_of(module)
        if not may_import(own, target):
            bad.add(f"{module} ({target})")
    return sorted(bad)


NOT_SIM = [p for p in sorted(ROOT.rglob("*.py")) if p.relative_to(ROOT).parts[0] != "sim"]


def test_every_module_is_in_a_layer() -> None:
    known = set(ORDER) | {"sim"}
    stray = sorted(str(p.relative_to(ROOT)) for p in NOT_SIM if layer_of(_module_name(p)) not in known)
    assert stray == [], f"put these in BASE or a layer of ORDER (tests/unit/test_layers.py): {stray}"


@pytest.mark.parametrize("path", NOT_SIM, ids=lambda p: str(p.relative_to(ROOT)))
def test_imports_point_down_only(path: Path) -> None:
    rel = str(path.relative_to(ROOT))
    known = {f"{m} ({layer_of(m)})" for r, m in KNOWN_UPWARD if r == rel}
    bad = [b for b in upward_imports(path) if b not in known]
    assert not bad, (f"{rel} ({layer_of(_module_name(path))}) imports above its layer: {bad} "
                     f"(order: {' -> '.join(ORDER)})")


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


@pytest.mark.parametrize(("source", "expected"), [
    ("from cockpit.tui.app import CockpitApp", ["cockpit.tui.app (tui)"]),
    ("import cockpit.cli", ["cockpit.cli (cli)"]),
    ("from cockpit import recipe", ["cockpit.recipe (recipe)"]),
    ("import importlib\nimportlib.import_module('cockpit.recipe.phases')",
     ["cockpit.recipe.phases (recipe)"]),
    ("from importlib import import_module\nimport_module('cockpit.tui')", ["cockpit.tui (tui)"]),
    ("from .. import recipe", ["cockpit.recipe (recipe)"]),
    ("from cockpit.hosts import Fleet\nfrom cockpit.config import ClusterConfig\nfrom . import logline", []),
])
def test_the_reader_sees_every_kind_of_import(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, source: str,
                                              expected: list[str]) -> None:
    """A module placed in telemetry/: each kind of upward import is caught, downward ones are not."""
    fake_root = tmp_path / "cockpit"
    for p in ROOT.rglob("*.py"):           # the real tree's module names, for `resolve`
        (fake_root / p.relative_to(ROOT)).parent.mkdir(parents=True, exist_ok=True)
        (fake_root / p.relative_to(ROOT)).touch()
    probe = fake_root / "telemetry" / "probe_module.py"
    probe.write_text(source + "\n")
    monkeypatch.setattr(sys.modules[__name__], "ROOT", fake_root)
    assert upward_imports(probe) == expected
