"""Semantic styles: pane code names what a thing IS (``ok``, ``fail``, ``rank.2``); the theme, how it looks.

Every role below is a Rich style name that the app's console resolves when a widget renders, from the
active theme (``CockpitApp`` pushes the theme's roles onto its console and swaps them when the theme
changes), so content recolours with the chrome. Pane code never names a colour; it uses a role, or a
colourless attribute (``bold``, ``italic``, ``reverse``, ``underline``).

A role's value is a Rich style string in which ``$name`` stands for a Textual theme colour (``$success``,
``$error-lighten-1``, ``$foreground-muted`` …; a colour with alpha is blended over the background) and
``auto`` for the black or white that reads best on the style's background. Theme files may set any role;
what they leave out comes from :data:`DEFAULTS`, which only refer to the theme's own colours.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from rich.errors import StyleSyntaxError
from rich.style import Style
from rich.theme import Theme as RichTheme
from textual.color import Color, ColorParseError
from textual.theme import Theme

from cockpit.recipe.phases import PHASES, Phase

RANKS_STYLED = 8      # rank.0 … rank.7; rank N uses rank.(N mod 8)

# role → (what it marks, default recipe from the theme's colours)
ROLES: dict[str, tuple[str, str]] = {
    "ok": ("a verdict that is good: passed, connected, ready", "bold $success"),
    "ok.soft": ("good but not a verdict: following, serving", "$success"),
    "warn": ("a warning the operator should read", "bold $warning"),
    "warn.soft": ("in progress, waiting, launching", "$warning"),
    "fail": ("a failure: failed check, lost host, error", "bold $error-lighten-1"),
    "fail.soft": ("an error's detail, a dropped-lines count", "$error-lighten-1"),
    "alarm": ("the worst states: engine hung, cluster down, host key changed", "bold auto on $error"),
    "unknown": ("not known (never a pass): unknown check, unknown host key", "bold $secondary-lighten-3"),
    "stale": ("data that stopped arriving", "italic $foreground-muted"),
    "muted": ("secondary text: hints, fingerprints, timestamps", "$foreground-muted"),
    "accent": ("a highlighted name: a tool call, an attachment", "bold $accent"),
    "command": ("a command line that will run on a host", "$primary-lighten-2"),
    "highlight": ("a line worth a look: a launch phase in the log", "$primary-lighten-3"),
    "marked": ("the background of a marked line", "on $surface-lighten-2"),
    "user": ("the operator's own turn in the chat", "bold $primary-lighten-2"),
    **{f"rank.{i}": (f"rank {i} (and {i + RANKS_STYLED}, …) in merged views", recipe)
       for i, recipe in enumerate((
        "bold $primary-lighten-2", "bold $accent", "bold $success", "bold $error-lighten-2",
        "bold $secondary-lighten-3", "bold $warning-lighten-2", "bold $primary-lighten-3",
        "bold $success-lighten-2"))},
    **{f"phase.{p.name.lower()}": (f"the launch phase “{p.value}”", recipe) for p, recipe in {
        Phase.PENDING: "$foreground-muted", Phase.LAUNCHED: "$foreground-muted",
        Phase.RUNNING: "$foreground-darken-2", Phase.DIST_INIT: "$primary",
        Phase.ENGRAM: "$secondary-lighten-3", Phase.LOADING: "$primary-lighten-2", Phase.KV_CACHE: "$warning",
        Phase.CUDA_GRAPHS: "$primary-lighten-1",
        Phase.WAIT_HEAD: "$success-darken-1", Phase.API_START: "$success-lighten-1",
        Phase.READY: "bold $success"}.items()},
}
DEFAULTS: dict[str, str] = {role: recipe for role, (_, recipe) in ROLES.items()}
ATTRIBUTES = frozenset({"bold", "italic", "reverse", "underline", "strike", "not"})
_VAR = re.compile(r"\$([a-z][a-z0-9-]*)")


def rank_role(rank: int) -> str:
    return f"rank.{rank % RANKS_STYLED}"


def phase_role(phase: Phase) -> str:
    return f"phase.{phase.name.lower()}"


assert all(phase_role(p) in ROLES for p in PHASES)


class StyleError(ValueError):
    """A role's style cannot be resolved: unknown colour variable or bad Rich syntax (`role`: which
    role's, when known)."""

    def __init__(self, message: str, role: str = ""):
        super().__init__(message)
        self.role = role


def theme_colors(theme: Theme) -> dict[str, str]:
    """The theme's colour variables (``success``, ``error-lighten-1`` …), as Textual generates them."""
    return {**theme.to_color_system().generate(), **theme.variables}


def _color(name: str, colors: Mapping[str, str], background: Color) -> Color:
    value = colors.get(name)
    if value is None:
        raise StyleError(f"${name} is not a colour of the theme")
    try:
        color = Color.parse(value)
    except ColorParseError as exc:
        raise StyleError(f"${name} is {value!r}, not a colour") from exc
    return background + color if color.a < 1 else color


def _rich(color: Color, source: str) -> str:
    """A Rich colour for a Textual one: the terminal's own ANSI colour stays one (the textual-ansi theme)."""
    name = source.strip().lower()
    if color.ansi is not None and name.startswith("ansi_"):
        return name.removeprefix("ansi_")
    return color.hex


def resolve(recipe: str, colors: Mapping[str, str]) -> Style:
    """One role's recipe → a Rich style with concrete colours."""
    background = Color.parse(colors.get("background") or "#000000")
    words = recipe.split()
    out: list[str] = []
    bg: Color | None = None
    auto_at: int | None = None
    i = 0
    while i < len(words):
        word = words[i]
        if word == "on" and i + 1 < len(words):
            target = words[i + 1]
            bg = _color(target[1:], colors, background) if target.startswith("$") else None
            out += ["on", _rich(bg, colors[target[1:]]) if bg is not None else target]
            i += 2
            continue
        if word == "auto":
            auto_at = len(out)
            out.append("auto")
        elif word.startswith("$"):
            out.append(_rich(_color(word[1:], colors, background), colors[word[1:]]))
        else:
            out.append(word)
        i += 1
    if auto_at is not None:
        under = bg if bg is not None else background
        out[auto_at] = "#000000" if under.brightness > 0.5 else "#FFFFFF"
    try:
        return Style.parse(" ".join(out))
    except StyleSyntaxError as exc:
        raise StyleError(str(exc)) from exc


def roles_for(theme: Theme, overrides: Mapping[str, str] | None = None) -> RichTheme:
    """Every role resolved for `theme`: the theme file's own styles (which must resolve: StyleError
    otherwise) over :data:`DEFAULTS` (which fall back to their attributes alone where a theme's colour
    is not one, e.g. textual-ansi's ``ansi_default 50%``)."""
    colors = theme_colors(theme)
    styles = {}
    for role, recipe in DEFAULTS.items():
        try:
            styles[role] = resolve(recipe, colors)
        except StyleError:
            kept = [w for w in recipe.split() if w in ATTRIBUTES]
            styles[role] = Style.parse(" ".join(kept) or ("dim" if role in ("muted", "stale") else "none"))
    for role, recipe in (overrides or {}).items():
        try:
            styles[role] = resolve(recipe, colors)
        except StyleError as exc:
            raise StyleError(str(exc), role) from None
    return RichTheme(styles, inherit=False)


def valid_style(style: str) -> bool:
    """What pane code may give as a style: one role, or colourless attributes only ("bold italic").
    A role cannot be combined with anything in one string (the console looks the whole string up)."""
    words = style.split()
    return style in ROLES or (bool(words) and all(w in ATTRIBUTES for w in words)) or style == ""
