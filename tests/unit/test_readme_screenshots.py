"""The README's screenshots (made by scripts/screenshots.py): one per pane, each shown in the README, each
an SVG of that pane that stays small and shows nothing of the machine that made it."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from cockpit.tui.app import PANES

ROOT = Path(__file__).resolve().parents[2]
SHOTS = ROOT / "docs" / "screenshots"
MAX_BYTES = 300_000
TEXT_NODE = re.compile(r"<text[^>]*>([^<]*)</text>")


def pane_files() -> dict[str, Path]:
    return {pid: SHOTS / f"{n}-{pid}.svg" for n, (pid, _) in enumerate(PANES, start=1)}


def shown_text(svg: str) -> str:
    """The terminal text of a Textual screenshot (one <text> node per run of cells)."""
    return " ".join(TEXT_NODE.findall(svg)).replace("&#160;", " ").replace("\xa0", " ")


def test_every_pane_has_a_screenshot() -> None:
    missing = [path.name for path in pane_files().values() if not path.is_file()]
    assert not missing, f"run `python scripts/screenshots.py`: missing {missing}"


def test_every_screenshot_is_in_the_readme() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    shots = sorted(SHOTS.glob("*.svg"))
    assert len(shots) > len(PANES)     # one per pane, and the light-theme Hosts
    unlinked = [p.name for p in shots if f"](docs/screenshots/{p.name})" not in readme]
    assert not unlinked, f"README.md shows no image of {unlinked}"


@pytest.mark.parametrize("pid", [pid for pid, _ in PANES])
def test_screenshot_is_an_svg_of_its_pane(pid: str) -> None:
    path = pane_files()[pid]
    data = path.read_bytes()
    assert len(data) < MAX_BYTES, f"{path.name}: {len(data)} bytes"
    svg = data.decode("utf-8")
    assert svg.lstrip().startswith("<svg") and svg.rstrip().endswith("</svg>")
    title = dict(PANES)[pid].TITLE
    assert re.search(rf"\b{re.escape(title)}\b", shown_text(svg)), f"{path.name} does not show {title}"


@pytest.mark.parametrize("path", sorted(SHOTS.glob("*.svg")), ids=lambda p: p.name)
def test_screenshot_shows_no_machine_paths(path: Path) -> None:
    text = shown_text(path.read_text(encoding="utf-8"))
    for word in ("/root", "/work", "/home/"):
        assert word not in text, f"{path.name} shows {word}"
