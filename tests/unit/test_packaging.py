"""pyproject's package list is every package folder of `cockpit/` (it is listed, not found, so that the
top-level `themes/` folder can ship as `cockpit.themes`), and the themes are in it."""

from __future__ import annotations

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
