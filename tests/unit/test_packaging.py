"""pyproject's package list is every package folder of `cockpit/` (it is listed, not found, so that the
top-level `themes/` folder can ship as `cockpit.themes`), and the themes are in it."""

from __future__ import annotations

import ast
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_every_package_folder_is_listed() -> None:
    setuptools = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    on_disk = {".".join(p.parent.relative_to(ROOT).parts) for p in (ROOT / "cockpit").rglob("__init__.py")}
    listed = set(setuptools["packages"])
    assert listed - {"cockpit.themes"} == on_disk
    assert setuptools["package-dir"] == {"cockpit.themes": "themes"}
    assert setuptools["package-data"]["cockpit.themes"] == ["*.toml"]


def test_the_three_shipped_themes_are_in_the_themes_folder() -> None:
    names = {p.stem for p in (ROOT / "themes").glob("*.toml")}
    assert {"cockpit-dark", "cockpit-light", "cockpit-contrast"} <= names


def test_huggingface_hub_is_an_optional_extra_imported_only_where_used() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    required = [d.lower().replace("-", "_") for d in project["dependencies"]]
    assert not [d for d in required if d.startswith("huggingface_hub")]
    assert any(d.startswith("huggingface_hub") for d in project["optional-dependencies"]["hf"])
    # No module imports it at import time: the one use (setup's revision lookup) imports it in the function.
    top_level = []
    for path in (ROOT / "cockpit").rglob("*.py"):
        for node in ast.parse(path.read_text()).body:
            names = ([a.name for a in node.names] if isinstance(node, ast.Import)
                     else [node.module or ""] if isinstance(node, ast.ImportFrom) else [])
            if any(n.split(".")[0] == "huggingface_hub" for n in names):
                top_level.append(str(path.relative_to(ROOT)))
    assert top_level == []
