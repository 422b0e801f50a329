"""Pane code names roles, never colours: every style string in `cockpit/tui` is one role of the theme or
colourless attributes, and no string there is a colour (the colours live in `themes/` and, as recipes of
the theme's own colours, in `cockpit/tui/styles.py`)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
from rich.errors import StyleSyntaxError
from rich.style import Style

from cockpit.tui.styles import DEFAULTS, ROLES, valid_style

TUI = Path(__file__).resolve().parents[2] / "cockpit" / "tui"
FILES = sorted(p for p in TUI.rglob("*.py") if p.name != "styles.py")


def _strings(tree: ast.AST) -> list[ast.Constant]:
    return [n for n in ast.walk(tree) if isinstance(n, ast.Constant) and isinstance(n.value, str)]


def _style_args(tree: ast.AST) -> list[ast.Constant]:
    """String constants in style positions: `style=`, the second item of `(text, style)` pairs, the second
    argument of `.append`/`.stylize`/`Text(...)`."""
    found: list[ast.Constant] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            found += [k.value for k in node.keywords
                      if k.arg == "style" and isinstance(k.value, ast.Constant)]
            name = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", "")
            if name in ("append", "Text") and len(node.args) >= 2 and isinstance(node.args[1], ast.Constant):
                found.append(node.args[1])
            if name == "stylize" and node.args and isinstance(node.args[0], ast.Constant):
                found.append(node.args[0])
            if name == "assemble":
                for arg in node.args:
                    pair = isinstance(arg, ast.Tuple) and len(arg.elts) == 2
                    if pair and isinstance(arg.elts[1], ast.Constant):
                        found.append(arg.elts[1])
    return [c for c in found if isinstance(c.value, str)]


def _is_colour(text: str) -> bool:
    try:
        style = Style.parse(text)
    except (StyleSyntaxError, ValueError):
        return False
    return style.color is not None or style.bgcolor is not None or "dim" in text.split()


@pytest.mark.parametrize("path", FILES, ids=lambda p: str(p.relative_to(TUI)))
def test_no_colour_in_pane_code(path: Path) -> None:
    tree = ast.parse(path.read_text(), str(path))
    bad = [f"line {c.lineno}: {c.value!r}" for c in _strings(tree) if c.value.strip() and _is_colour(c.value)]
    assert not bad, f"{path.relative_to(TUI)} names colours (use a role of cockpit.tui.styles): {bad}"


@pytest.mark.parametrize("path", FILES, ids=lambda p: str(p.relative_to(TUI)))
def test_every_style_is_one_role_or_attributes(path: Path) -> None:
    tree = ast.parse(path.read_text(), str(path))
    bad = [f"line {c.lineno}: {c.value!r}" for c in _style_args(tree) if not valid_style(c.value)]
    assert not bad, f"{path.relative_to(TUI)}: not a role (or a role combined with more words): {bad}"


def test_the_checks_catch_what_they_are_for() -> None:
    assert _is_colour("bold red") and _is_colour("on grey23") and _is_colour("#FF0000") and _is_colour("dim")
    assert not _is_colour("ok") and not _is_colour("a red herring") and not _is_colour("bold")
    assert not _is_colour("d")      # a key, though Rich reads it as "dim"
    assert not valid_style("ok bold") and not valid_style("red")
    assert valid_style("ok") and valid_style("reverse bold")
    calls = ast.parse('Text("x", style="bold red"); t.append("y", "fail"); Text.assemble(("z", "ok bold"))')
    assert [c.value for c in _style_args(calls)] == ["bold red", "fail", "ok bold"]


def test_default_recipes_use_the_themes_colours_only() -> None:
    for role, recipe in DEFAULTS.items():
        words = [w for w in recipe.split() if w not in ("on", "auto", "bold", "italic")]
        assert all(w.startswith("$") for w in words), f"{role}: {recipe}"
    assert set(DEFAULTS) == set(ROLES)
