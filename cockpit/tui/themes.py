"""Theme files: the project's `themes/` folder and the user's own, validated, as Textual themes with roles.

A theme file is TOML: ``name``, ``dark``, a ``[colors]`` table of Textual theme colours (``primary`` is
required) and an optional ``[styles]`` table of the cockpit's semantic roles (`cockpit.tui.styles`). The
built-in files ship inside the package (``cockpit.themes``, mapped from the top-level ``themes/`` folder);
users add theirs as ``*.toml`` in the user themes directory (`cockpit.locations`). A broken file is named
with its key and reason and skipped; it never stops the app.
"""

from __future__ import annotations

import difflib
import tomllib
from collections.abc import Iterable
from dataclasses import dataclass, field
from functools import cached_property
from importlib import resources
from pathlib import Path

from rich.theme import Theme as RichTheme
from textual.color import Color, ColorParseError
from textual.theme import BUILTIN_THEMES, Theme

from cockpit.files import NotReadable, read_bounded
from cockpit.tui.styles import ROLES, StyleError, roles_for

DEFAULT_THEME = "cockpit-dark"
MAX_THEME_BYTES = 64 * 1024
COLOR_KEYS = ("primary", "secondary", "warning", "error", "success", "accent", "foreground", "background",
              "surface", "panel", "boost")
TOP_KEYS = ("name", "dark", "colors", "styles")


@dataclass(frozen=True)
class ThemeProblem:
    """Why a theme file was skipped: ``FILE: key: reason``."""

    path: Path
    key: str
    reason: str

    def __str__(self) -> str:
        return f"{self.path}: {self.key}: {self.reason}" if self.key else f"{self.path}: {self.reason}"


@dataclass(frozen=True)
class CockpitTheme:
    """A Textual theme and the roles it resolves to (a theme file's at load, to validate it; one of
    Textual's own themes when it is first shown: most are never picked)."""

    textual: Theme
    resolved: RichTheme | None = None
    source: Path | None = None       # None: one of Textual's own themes

    @cached_property
    def roles(self) -> RichTheme:
        return self.resolved if self.resolved is not None else roles_for(self.textual)


@dataclass
class ThemeSet:
    themes: dict[str, CockpitTheme] = field(default_factory=dict)
    problems: list[ThemeProblem] = field(default_factory=list)


class _Invalid(Exception):
    def __init__(self, key: str, reason: str):
        super().__init__(reason)
        self.key, self.reason = key, reason


def _hint(word: str, choices: Iterable[str]) -> str:
    close = difflib.get_close_matches(word, list(choices), n=1)
    return f" (did you mean {close[0]!r}?)" if close else ""


def parse_theme(data: dict[str, object]) -> tuple[Theme, dict[str, str]]:
    """A theme file's table → (Textual theme, role overrides); raises _Invalid naming the key."""
    for key in data:
        if key not in TOP_KEYS:
            raise _Invalid(key, "unknown key" + _hint(key, TOP_KEYS))
    name = data.get("name")
    if not isinstance(name, str) or not name.strip():
        raise _Invalid("name", "missing or not a string")
    if not all(c.isalnum() or c in "-_." for c in name) or len(name) > 64:
        raise _Invalid("name", "letters, digits, '-', '_' and '.' only (at most 64)")
    dark = data.get("dark", True)
    if not isinstance(dark, bool):
        raise _Invalid("dark", "must be true or false")
    colors = data.get("colors")
    if not isinstance(colors, dict):
        raise _Invalid("colors", "missing table [colors] (at least `primary`)")
    for key, value in colors.items():
        if key not in COLOR_KEYS:
            raise _Invalid(f"colors.{key}", "unknown colour" + _hint(key, COLOR_KEYS))
        if not isinstance(value, str):
            raise _Invalid(f"colors.{key}", "must be a colour string such as \"#0178D4\"")
        try:
            Color.parse(value)
        except ColorParseError:
            raise _Invalid(f"colors.{key}", f"{value!r} is not a colour") from None
    if "primary" not in colors:
        raise _Invalid("colors.primary", "missing (every theme needs a primary colour)")
    styles = data.get("styles", {})
    if not isinstance(styles, dict):
        raise _Invalid("styles", "must be a table of role = \"style\"")
    for key, value in styles.items():
        if key not in ROLES:
            quote = ' (write a dotted role in quotes: "rank.0" = …)' if isinstance(value, dict) else ""
            raise _Invalid(f"styles.{key}", "unknown role" + _hint(key, ROLES) + quote)
        if not isinstance(value, str):
            raise _Invalid(f"styles.{key}", "must be a style string such as \"bold #FF5F5F\"")
    given = {k: str(v) for k, v in colors.items()}
    theme = Theme(name=name, dark=dark, primary=given["primary"], secondary=given.get("secondary"),
                  warning=given.get("warning"), error=given.get("error"), success=given.get("success"),
                  accent=given.get("accent"), foreground=given.get("foreground"),
                  background=given.get("background"), surface=given.get("surface"), panel=given.get("panel"),
                  boost=given.get("boost"))
    return theme, {k: str(v) for k, v in styles.items()}


def load_theme_file(path: Path) -> CockpitTheme:
    """One theme file; raises ThemeProblem-bearing _Invalid."""
    try:
        data = tomllib.loads(read_bounded(path, MAX_THEME_BYTES).decode("utf-8"))
    except NotReadable as exc:
        raise _Invalid("", exc.reason.removeprefix("is ")) from None
    except OSError as exc:
        raise _Invalid("", f"cannot read it: {exc.strerror or exc}") from None
    except UnicodeDecodeError as exc:
        raise _Invalid("", f"not UTF-8 text (byte {exc.start})") from None
    except tomllib.TOMLDecodeError as exc:
        raise _Invalid("", f"not valid TOML: {exc}") from None
    except RecursionError:
        raise _Invalid("", "not valid TOML: tables or arrays nested too deeply") from None
    except ValueError as exc:   # an integer of more than 4300 digits
        raise _Invalid("", f"not valid TOML: {str(exc)[:120]}") from None
    theme, overrides = parse_theme(data)
    try:
        roles = roles_for(theme, overrides)
    except StyleError as exc:
        raise _Invalid(f"styles.{exc.role}" if exc.role else "styles", str(exc)) from None
    return CockpitTheme(theme, roles, path)


def builtin_theme_files() -> list[Path]:
    """The theme files shipped with the cockpit (the top-level `themes/` folder)."""
    try:
        folder = Path(str(resources.files("cockpit.themes")))
    except ModuleNotFoundError:      # run from a checkout (cwd on sys.path before the editable finder)
        folder = Path(__file__).resolve().parents[2] / "themes"
    return sorted(folder.glob("*.toml"))


def load_themes(user_dir: Path | None) -> ThemeSet:
    """Textual's own themes (roles from their colours), the shipped files, then the user's files.
    A user file may not take a built-in name; a broken file is reported and skipped."""
    found = ThemeSet()
    for theme in BUILTIN_THEMES.values():
        found.themes[theme.name] = CockpitTheme(theme)
    user_files = sorted(user_dir.glob("*.toml")) if user_dir is not None and user_dir.is_dir() else []
    for path in [*builtin_theme_files(), *user_files]:
        try:
            loaded = load_theme_file(path)
        except _Invalid as exc:
            found.problems.append(ThemeProblem(path, exc.key, exc.reason))
            continue
        name = loaded.textual.name
        if name in found.themes and path in user_files:
            found.problems.append(ThemeProblem(path, "name", f"{name!r} is already a theme of the cockpit"))
            continue
        found.themes[name] = loaded
    return found
