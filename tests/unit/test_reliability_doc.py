"""docs/RELIABILITY.md names only tests and benchmarks that exist."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "RELIABILITY.md"


def _references() -> list[tuple[str, list[str]]]:
    """Each `tests/…py` named in the table, with the `::test` names that follow it in its cell."""
    refs = []
    for cell in (c for line in DOC.read_text().splitlines() if line.startswith("|") for c in line.split("|")):
        current = None
        for token in re.findall(r"(tests/[\w/]+\.py|perf/\w+\.py)|::(\w+)", cell):
            path, name = token
            if path:
                current = (path, [])
                refs.append(current)
            elif current is not None:
                current[1].append(name)
    return refs


def test_every_test_the_doc_names_exists() -> None:
    refs = _references()
    assert len(refs) > 40
    missing = []
    for path, names in refs:
        file = ROOT / path
        if not file.is_file():
            missing.append(path)
            continue
        text = file.read_text()
        missing += [f"{path}::{n}" for n in names if not re.search(rf"^\s*(async )?def {n}\b", text, re.M)]
    assert missing == []
