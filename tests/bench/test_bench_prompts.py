"""The prompt set: the packaged v1 follows the method; a bad file names file, key and reason; every
request is unique."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from cockpit.bench import prompts as P


def _valid() -> dict[str, Any]:
    return {"format": P.FORMAT, "version": 1, "headline_excludes": ["counting"],
            "categories": {"prose": {"max_tokens": 400, "prompts": ["Write an essay about tides."]},
                           "counting": {"max_tokens": 600, "prompts": ["Count to 50."]}},
            "filler": ["One sentence of filler text."]}


def test_packaged_set_has_the_method_categories_and_budgets() -> None:
    ps = P.load()
    assert {n: c.max_tokens for n, c in ps.categories.items()} == P.METHOD_CATEGORIES
    assert ps.headline == ["coding", "json", "narrative", "prose", "math", "reasoning", "summary", "format"]
    assert ps.headline_excludes == {"counting"}
    assert ps.differs_from_method() == []
    assert all(len(c.prompts) >= 2 for c in ps.categories.values())


def _write(tmp_path: Path, raw: Any) -> Path:
    p = tmp_path / "set.json"
    p.write_text(raw if isinstance(raw, str) else json.dumps(raw))
    return p


@pytest.mark.parametrize(("change", "key", "reason"), [
    (lambda d: d.update(version=2), "version", "must be 1"),
    (lambda d: d.update(format="other"), "format", "must be"),
    (lambda d: d["categories"]["prose"].update(max_tokens=0), "categories.prose.max_tokens", "1-32768"),
    (lambda d: d["categories"]["prose"].update(max_tokens=True), "categories.prose.max_tokens", "integer"),
    (lambda d: d["categories"]["prose"].update(prompts=[]), "categories.prose.prompts", "non-empty list"),
    (lambda d: d["categories"]["prose"].update(prompts=["ok", 3]), "categories.prose.prompts[1]", "string"),
    (lambda d: d["categories"].update({"Bad Name": {"max_tokens": 1, "prompts": ["x"]}}),
     "categories.Bad Name", "lowercase"),
    (lambda d: d.update(headline_excludes=["nope"]), "headline_excludes", "not a category"),
    (lambda d: d.update(headline_excludes=["prose", "counting"]), "headline_excludes", "no category"),
    (lambda d: d.pop("filler"), "filler", "non-empty list"),
    (lambda d: d.pop("categories"), "categories", "non-empty object"),
])
def test_a_bad_file_names_file_key_and_reason(tmp_path: Path, change: Any, key: str, reason: str) -> None:
    raw = _valid()
    change(raw)
    path = _write(tmp_path, raw)
    with pytest.raises(P.PromptFileError) as info:
        P.load(path)
    err = info.value
    assert (err.source, err.key) == (str(path), key)
    assert reason in err.reason
    assert str(err).startswith(f"{path}: {key}: ")


@pytest.mark.parametrize(("text", "reason"), [("{not json", "not JSON"), ("[]", "JSON object")])
def test_unreadable_files(tmp_path: Path, text: str, reason: str) -> None:
    with pytest.raises(P.PromptFileError, match=reason):
        P.load(_write(tmp_path, text))


def test_missing_and_oversized_files(tmp_path: Path) -> None:
    with pytest.raises(P.PromptFileError, match="No such file"):
        P.load(tmp_path / "absent.json")
    big = tmp_path / "big.json"
    big.write_bytes(b" " * (P.MAX_FILE_BYTES + 1))
    with pytest.raises(P.PromptFileError, match="larger than"):
        P.load(big)


def test_a_user_set_that_differs_from_the_method_says_how(tmp_path: Path) -> None:
    ps = P.load(_write(tmp_path, _valid()))
    assert ps.headline == ["prose"]
    diffs = ps.differs_from_method()
    assert "category coding missing" in diffs and len(diffs) == 7


def test_every_request_is_unique_from_its_first_characters() -> None:
    tag, other = P.new_run_tag(), P.new_run_tag()
    assert tag != other and tag.isalpha()
    texts = [P.unique_text("Write an essay about tides.", tag, n) for n in range(1, 50)]
    texts.append(P.unique_text("Write an essay about tides.", other, 1))
    assert len({t[:40] for t in texts}) == len(texts)   # they differ within the first cache block
    assert all(t.endswith("Write an essay about tides.") for t in texts)


def test_filler_has_the_words_asked_for() -> None:
    ps = P.load()
    text = P.filler_words(ps, 5000)
    assert 5000 <= len(text.split()) < 5000 + 30
    assert "secret" not in text.lower() and "passphrase" not in text.lower()
