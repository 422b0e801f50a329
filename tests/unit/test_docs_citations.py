"""Comments and docstrings cite the project's own docs, never files a maintainer does not have.

No file under cockpit/, tests/, perf/ or scripts/ cites the shared notes the project started from or a
path outside the repository, and every `docs/<file>.md#<anchor>` cited there names a file of docs/ with a
heading of that anchor (GitHub's slugs). Links between the docs resolve the same way. The layout of
docs/DESIGN.md names every top-level module and package of cockpit/, and every file it names exists.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
CODE_DIRS = ("cockpit", "tests", "perf", "scripts")

# What an outside citation looks like. Each is written in two pieces so that this file does not match it.
OUTSIDE = ("DOMAIN" " §", "DOMAIN" ".md", "STYLE" ".md", "/" "work/", ".." "/shared")
# The design document cited without its place in the repository (docs/DESIGN.md is the project's own).
BARE_DESIGN = re.compile(r"(?<![\w./-])" "DESIGN" r"\.md")

# Files still allowed to cite outside files, each with the reason. Empty it as they are fixed.
ALLOWED: set[str] = set()

CITATION = re.compile(r"(?<![\w./-])docs/([\w.-]+\.md)(?:#([\w-]+))?")
DOC_LINK = re.compile(r"\]\((?!\w+:)([\w./-]*?\.md)?(?:#([\w-]+))?\)")
HEADING = re.compile(r"^ {0,3}(#{1,6})[ \t]+(.*?)[ \t]*#*[ \t]*$")
FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})")
HTML_ANCHOR = re.compile(r"<a\s+(?:id|name)=\"([^\"]+)\"")


def slug(heading: str) -> str:
    """GitHub's anchor of a heading: lower case, punctuation dropped (letters, digits, `_`, `-` and
    spaces kept), spaces turned into hyphens."""
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return text.replace(" ", "-")


def anchors(markdown: str) -> set[str]:
    """Every heading anchor of a Markdown text (repeated headings get -1, -2, … as on GitHub), headings
    inside fenced code left out, plus explicit `<a id=…>` anchors."""
    found: set[str] = set()
    seen: dict[str, int] = {}
    fence: str | None = None
    for line in markdown.splitlines():
        m = FENCE.match(line)
        if m:
            mark = m.group(1)
            if fence is None:
                fence = mark[0] * 3
            elif mark.startswith(fence):
                fence = None
            continue
        if fence is not None:
            continue
        found.update(HTML_ANCHOR.findall(line))
        h = HEADING.match(line)
        if not h:
            continue
        base = slug(h.group(2))
        n = seen.get(base, 0)
        seen[base] = n + 1
        found.add(base if n == 0 else f"{base}-{n}")
    return found


def text_files() -> Iterator[tuple[str, str]]:
    """(path from the repository root, text) of every text file of the code directories."""
    for top in CODE_DIRS:
        for path in sorted((ROOT / top).rglob("*")):
            if not path.is_file() or "__pycache__" in path.parts or path.suffix == ".pyc":
                continue
            data = path.read_bytes()
            if b"\0" in data:
                continue
            yield path.relative_to(ROOT).as_posix(), data.decode("utf-8", "replace")


def numbered(text: str) -> Iterator[tuple[int, str]]:
    return enumerate(text.splitlines(), start=1)


def doc_anchors(name: str) -> set[str] | None:
    file = DOCS / name
    return anchors(file.read_text()) if file.is_file() else None


@pytest.mark.parametrize(("heading", "expected"), [
    ("ip addr", "ip-addr"),
    ("/v1/models", "v1models"),
    ("Streaming (SSE)", "streaming-sse"),
    ("`ibv_devinfo`", "ibv_devinfo"),
    ("Names, ports and paths", "names-ports-and-paths"),
    ("1. Check the hosts", "1-check-the-hosts"),
])
def test_slug_is_github_s(heading: str, expected: str) -> None:
    assert slug(heading) == expected


def test_anchors_count_repeats_and_skip_code() -> None:
    text = "# Top\n## Same\n```sh\n# not a heading\n```\n## Same\n~~~\n## Hidden\n~~~\n<a id=\"x-1\"></a>\n"
    assert anchors(text) == {"top", "same", "same-1", "x-1"}


def test_no_code_cites_outside_files() -> None:
    found = []
    for rel, text in text_files():
        if rel in ALLOWED:
            continue
        for n, line in numbered(text):
            hits = [o for o in OUTSIDE if o in line] + BARE_DESIGN.findall(line)
            if hits:
                found.append(f"{rel}:{n}: {line.strip()[:100]}")
    assert found == [], "cite the project's docs/ instead (e.g. docs/host-tools.md#nvidia-smi)"


def test_the_allow_list_names_real_files() -> None:
    assert all((ROOT / rel).is_file() for rel in ALLOWED)


def test_every_cited_doc_and_anchor_exists() -> None:
    cited, missing = 0, []
    for rel, text in text_files():
        for n, line in numbered(text):
            for m in CITATION.finditer(line):
                cited += 1
                name, anchor = m.group(1), m.group(2)
                have = doc_anchors(name)
                if have is None:
                    missing.append(f"{rel}:{n}: docs/{name} does not exist")
                elif anchor is not None and anchor not in have:
                    missing.append(f"{rel}:{n}: docs/{name} has no heading #{anchor}")
    assert cited >= 5  # the code does cite its docs: a test that finds none is looking in the wrong place
    assert missing == []


def test_links_between_the_docs_resolve() -> None:
    missing = []
    for doc in sorted(DOCS.glob("*.md")):
        for n, line in numbered(doc.read_text()):
            for m in DOC_LINK.finditer(line):
                name, anchor = m.group(1) or doc.name, m.group(2)
                if name.startswith("../") or "/" in name:
                    continue  # outside docs/ (the README): not checked here
                have = doc_anchors(name)
                if have is None:
                    missing.append(f"docs/{doc.name}:{n}: {name} does not exist")
                elif anchor is not None and anchor not in have:
                    missing.append(f"docs/{doc.name}:{n}: {name} has no heading #{anchor}")
    assert missing == []


def test_the_docs_cite_nothing_outside_the_repository() -> None:
    found = [f"docs/{doc.name}:{n}" for doc in sorted(DOCS.glob("*.md"))
             for n, line in numbered(doc.read_text()) if any(o in line for o in OUTSIDE)]
    assert found == []


def _layout_block() -> list[str]:
    design = (DOCS / ("DESIGN" ".md")).read_text()
    block = design.split("## Layout", 1)[1].split("```", 2)[1]
    return block.splitlines()


def test_the_design_layout_is_the_code() -> None:
    lines = _layout_block()
    listed = {m.group(1).rstrip("/") for line in lines if (m := re.match(r"^  ([\w]+(?:\.py|/))\s", line))}
    on_disk = {p.name if p.is_dir() else p.stem for p in (ROOT / "cockpit").iterdir()
               if (p.is_dir() and (p / "__init__.py").exists())
               or (p.suffix == ".py" and p.name not in ("__init__.py", "__main__.py"))}
    assert {n.removesuffix(".py") for n in listed} == on_disk
    named = set(re.findall(r"`([\w/]+\.py)`", "\n".join(lines)))
    files = {p.name for top in ("cockpit", "perf", "scripts") for p in (ROOT / top).rglob("*.py")}
    assert {n for n in named if n.rsplit("/", 1)[-1] not in files} == set()
    perf = re.search(r"^perf/\s+.*?\(([^)]*)\)", "\n".join(lines), re.S | re.M)
    assert perf is not None
    benches = {w.strip() for w in perf.group(1).replace("\n", " ").split(",")}
    assert benches == {p.stem for p in (ROOT / "perf").glob("*.py") if not p.name.startswith("_")}
    tops = {m.group(1) for line in lines if (m := re.match(r"^(\w+)/\s", line))}
    assert tops <= {p.name for p in ROOT.iterdir() if p.is_dir()}
