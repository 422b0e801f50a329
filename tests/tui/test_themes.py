"""Themes: the shipped three load and define every role; a user's theme file loads, a broken one is named
with its key and reason and skipped; the high-contrast theme stays readable in 16 colours; a theme switch
recolours pane content, and the choice is remembered."""

from __future__ import annotations

import json
import os
import re
import time
import tomllib
from pathlib import Path

import pytest
from rich._palettes import STANDARD_PALETTE
from rich.color import Color as RichColor
from tuihelpers import report_status

from cockpit.hosts.state import HostState, HostStatus
from cockpit.tui.app import CockpitApp
from cockpit.tui.styles import ROLES
from cockpit.tui.themes import builtin_theme_files, load_themes

SHIPPED = ("cockpit-dark", "cockpit-light", "cockpit-contrast")
STANDARD_16 = {tuple(c) for c in STANDARD_PALETTE._colors}


def _luminance(rgb: tuple[int, int, int]) -> float:
    def channel(c: int) -> float:
        s = c / 255
        return s / 12.92 if s <= 0.03928 else ((s + 0.055) / 1.055) ** 2.4
    r, g, b = (channel(c) for c in rgb)
    return 0.2126 * r + 0.7152 * g + 0.0722 * b


def contrast(a: tuple[int, int, int], b: tuple[int, int, int]) -> float:
    la, lb = sorted((_luminance(a), _luminance(b)), reverse=True)
    return (la + 0.05) / (lb + 0.05)


def _rgb(color: RichColor | None) -> tuple[int, int, int] | None:
    if color is None:
        return None
    triplet = color.get_truecolor()
    return (triplet.red, triplet.green, triplet.blue)


def test_the_shipped_themes_load_and_set_every_role() -> None:
    found = load_themes(None)
    assert not found.problems
    for name in SHIPPED:
        theme = found.themes[name]
        assert theme.source is not None and theme.source.parent.name == "themes"
        data = tomllib.loads(theme.source.read_text())
        assert set(data["styles"]) == set(ROLES), f"{name} leaves roles to the defaults"
    assert found.themes["cockpit-light"].textual.dark is False


@pytest.mark.parametrize("name", SHIPPED)
def test_every_role_reads_on_its_background(name: str) -> None:
    theme = load_themes(None).themes[name]
    background = _rgb(RichColor.parse(theme.textual.background or "#000000"))
    assert background is not None
    for role, style in theme.roles.styles.items():
        fg, bg = _rgb(style.color), _rgb(style.bgcolor)
        if fg is None:
            continue
        ratio = contrast(fg, bg or background)
        floor = 3.0 if role.startswith("phase.") or role in ("muted", "stale") else 4.5
        assert ratio >= floor, f"{name}: {role} {style} has contrast {ratio:.2f} < {floor}"


def test_the_high_contrast_theme_is_sixteen_colours_and_never_dim() -> None:
    theme = load_themes(None).themes["cockpit-contrast"]
    colours = {theme.textual.background, theme.textual.foreground, theme.textual.panel, theme.textual.primary}
    for value in colours:
        assert _rgb(RichColor.parse(value or "#000000")) in STANDARD_16, value
    for role, style in theme.roles.styles.items():
        for c in (style.color, style.bgcolor):
            if c is not None:
                assert _rgb(c) in STANDARD_16, f"{role}: {c} is not one of the 16 terminal colours"
        assert not style.dim, role
        fg = _rgb(style.color)
        if fg is not None:
            assert contrast(fg, _rgb(style.bgcolor) or (0, 0, 0)) >= 4.5, role


GOOD = """name = "ops-amber"
dark = true
[colors]
primary = "#FFB000"
background = "#101010"
[styles]
ok = "bold #00FF7F"
"""
BROKEN = {
    "bad-toml.toml": ("name = ", "", "not valid TOML"),
    "unknown-key.toml": ('name = "x1"\ncolour = 1\n[colors]\nprimary = "#000000"\n', "colour", "unknown key"),
    "bad-colour.toml": ('name = "x2"\n[colors]\nprimary = "#zz0000"\n', "colors.primary", "not a colour"),
    "no-primary.toml": ('name = "x3"\n[colors]\nerror = "#ff0000"\n', "colors.primary", "missing"),
    "bad-role.toml": ('name = "x4"\n[colors]\nprimary = "#000000"\n[styles]\nokk = "bold"\n', "styles.okk",
                      "did you mean 'ok'"),
    "bad-style.toml": ('name = "x5"\n[colors]\nprimary = "#000000"\n[styles]\nfail = "bold $nosuch"\n',
                       "styles.fail", "$nosuch is not a colour"),
    "dotted.toml": ('name = "x6"\n[colors]\nprimary = "#000000"\n[styles]\nrank.0 = "bold"\n', "styles.rank",
                    "in quotes"),
    "taken.toml": ('name = "cockpit-dark"\n[colors]\nprimary = "#000000"\n', "name", "already a theme"),
}


def test_a_user_theme_loads_and_broken_ones_are_named_and_skipped(tmp_path: Path) -> None:
    (tmp_path / "ops-amber.toml").write_text(GOOD)
    for file, (text, _key, _reason) in BROKEN.items():
        (tmp_path / file).write_text(text)
    found = load_themes(tmp_path)
    assert "ops-amber" in found.themes
    assert str(found.themes["ops-amber"].roles.styles["ok"].color.get_truecolor().hex).upper() == "#00FF7F"
    problems = {p.path.name: p for p in found.problems}
    assert set(problems) == set(BROKEN)
    for file, (_text, key, reason) in BROKEN.items():
        assert problems[file].key == key and reason in problems[file].reason, problems[file]
        assert str(problems[file]).startswith(f"{tmp_path / file}: ")
    assert found.themes["cockpit-dark"].source in builtin_theme_files()   # not replaced by the user's file


async def test_the_app_offers_a_user_theme_and_reports_a_broken_one(fixed_config, tmp_path: Path) -> None:
    (tmp_path / "ops-amber.toml").write_text(GOOD)
    (tmp_path / "bad-colour.toml").write_text(BROKEN["bad-colour.toml"][0])
    app = CockpitApp(fixed_config, connect=False, themes_dir=tmp_path)
    async with app.run_test(size=(120, 30)) as pilot:
        await pilot.pause()
        assert "ops-amber" in app.available_themes and "x2" not in app.available_themes
        notes = [n.message for n in app._notifications]
        assert any("bad-colour.toml: colors.primary" in m and "not a colour" in m for m in notes), notes
        app.theme = "ops-amber"
        await pilot.pause()
        assert app.theme == "ops-amber"


def _fills(app: CockpitApp) -> set[str]:
    return {c.upper() for c in re.findall(r"fill: (#[0-9a-fA-F]{6})", app.export_screenshot())}


async def test_switching_the_theme_recolours_content_and_is_remembered(fixed_config) -> None:
    app = CockpitApp(fixed_config, connect=False)
    async with app.run_test(size=(120, 30)) as pilot:
        report_status(app, HostStatus(rank=0, target="spark-0", state=HostState.CONNECTED, latency_ms=1.0,
                                   hostname="spark-0", fingerprint="SHA256:abc", since=time.time()))
        await pilot.pause()
        seen = {}
        for name in SHIPPED:
            app.theme = name
            await pilot.pause()
            await pilot.pause()
            ok = app.themes.themes[name].roles.styles["ok"].color.get_truecolor().hex.upper()
            seen[name] = ok
            assert ok in _fills(app), f"{name}: the connected state is not drawn in its ok colour {ok}"
        assert len(set(seen.values())) == 3
    state = Path(os.environ["XDG_STATE_HOME"]) / "r37-cockpit" / "ui.json"
    assert json.loads(state.read_text())["theme"] == "cockpit-contrast"
    again = CockpitApp(fixed_config, connect=False)
    async with again.run_test(size=(120, 30)) as pilot:
        await pilot.pause()
        assert again.theme == "cockpit-contrast"



async def test_a_plain_log_line_is_drawn_in_the_themes_text_colour(fixed_config) -> None:
    """A log line has no style of its own: it must still be drawn in the theme's foreground (not the
    terminal's default, which is unreadable on the light theme's background)."""
    from cockpit.telemetry.logline import LogLine
    from cockpit.tui.panes.logs import LogsPane

    app = CockpitApp(fixed_config, connect=False)
    async with app.run_test(size=(120, 30)) as pilot:
        app.theme = "cockpit-light"
        app.action_show_pane("logs")
        pane = app.query_one(LogsPane)
        pane.ingest(0, [LogLine(1_700_000_000_000_000_000, 0, "plain words of an ordinary line")])
        pane.flush(now=True)
        await pilot.pause()
        await pilot.pause()
        view = pane.view
        row = next(view.render_line(y) for y in range(view.size.height)
                   if "ordinary line" in view.render_line(y).text)
        foreground = app.themes.themes["cockpit-light"].textual.foreground
        words = [s for s in row if "ordinary" in s.text]
        assert words and words[0].style is not None and words[0].style.color is not None
        assert words[0].style.color.get_truecolor().hex.upper() == foreground.upper()
