"""The benchmark's prompt set: the packaged v1 (``prompts_v1.json``) or a user's file of the same schema.

Schema (``format`` ``r37-cockpit.bench.prompts``, ``version`` 1)::

    {"format": "r37-cockpit.bench.prompts", "version": 1, "headline_excludes": ["counting"],
     "categories": {"prose": {"max_tokens": 400, "prompts": ["...", ...]}, ...},
     "filler": ["sentence", ...]}

``filler`` is the text that prefill and needle prompts are built from. A bad file is a
:class:`PromptFileError` naming the file, the key and the reason. Every request is made unique by a
prefix (:func:`unique_text`) so that no two requests share a prefix-cache hit.
"""

from __future__ import annotations

import json
import os
import secrets
import string
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

from cockpit.files import NotReadable, loads_bounded, read_bounded

FORMAT = "r37-cockpit.bench.prompts"
VERSION = 1
MAX_FILE_BYTES = 4 * 1024 * 1024
MAX_PROMPT_CHARS = 64 * 1024
MAX_PROMPTS = 256
METHOD_CATEGORIES = {"coding": 400, "json": 300, "narrative": 400, "prose": 400, "math": 300,
                     "reasoning": 300, "summary": 200, "format": 250, "counting": 600}
"""The method's categories and output budgets (docs/benchmark-method.md)."""
CEILING = "counting"


class PromptFileError(ValueError):
    """A prompt file that cannot be used: names the file, the key and the reason."""

    def __init__(self, source: str, key: str, reason: str) -> None:
        self.source, self.key, self.reason = source, key, reason
        super().__init__(f"{source}: {key}: {reason}")


@dataclass(frozen=True, slots=True)
class Category:
    name: str
    max_tokens: int
    prompts: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class PromptSet:
    version: int
    source: str
    categories: dict[str, Category]
    headline_excludes: frozenset[str]
    filler: tuple[str, ...]

    @property
    def headline(self) -> list[str]:
        """The categories the headline averages (all but the excluded ones), in file order."""
        return [c for c in self.categories if c not in self.headline_excludes]

    def differs_from_method(self) -> list[str]:
        """How this set's categories and budgets differ from the method's (empty: the same)."""
        out = []
        for name, budget in METHOD_CATEGORIES.items():
            cat = self.categories.get(name)
            if cat is None:
                out.append(f"category {name} missing")
            elif cat.max_tokens != budget:
                out.append(f"{name} budget {cat.max_tokens}, the method's is {budget}")
        out += [f"extra category {n}" for n in self.categories if n not in METHOD_CATEGORIES]
        return out

    def to_dict(self) -> dict[str, Any]:
        return {"version": self.version, "source": self.source,
                "categories": {n: c.max_tokens for n, c in self.categories.items()},
                "headline_excludes": sorted(self.headline_excludes)}


def _text_list(value: Any, source: str, key: str, limit: int) -> tuple[str, ...]:
    if not isinstance(value, list) or not value:
        raise PromptFileError(source, key, "must be a non-empty list of strings")
    if len(value) > limit:
        raise PromptFileError(source, key, f"has {len(value)} entries, at most {limit}")
    for i, item in enumerate(value):
        if not isinstance(item, str) or not item.strip():
            raise PromptFileError(source, f"{key}[{i}]", "must be a non-empty string")
        if len(item) > MAX_PROMPT_CHARS:
            raise PromptFileError(source, f"{key}[{i}]", f"longer than {MAX_PROMPT_CHARS} characters")
    return tuple(value)


def parse(raw: Any, source: str) -> PromptSet:
    """A :class:`PromptSet` from decoded JSON; raises :class:`PromptFileError`."""
    if not isinstance(raw, dict):
        raise PromptFileError(source, "(top level)", "must be a JSON object")
    if raw.get("format") != FORMAT:
        raise PromptFileError(source, "format", f"must be {FORMAT!r}, not {raw.get('format')!r:.60}")
    version = raw.get("version")
    if version != VERSION or isinstance(version, bool):
        raise PromptFileError(source, "version", f"must be {VERSION}, not {version!r:.40}")
    cats = raw.get("categories")
    if not isinstance(cats, dict) or not cats:
        raise PromptFileError(source, "categories", "must be a non-empty object of categories")
    out: dict[str, Category] = {}
    for name, body in cats.items():
        key = f"categories.{name}"
        if not name or not all(ch in string.ascii_lowercase + string.digits + "_-" for ch in name):
            raise PromptFileError(source, key, "a category name is lowercase letters, digits, _ or -")
        if not isinstance(body, dict):
            raise PromptFileError(source, key, "must be an object with max_tokens and prompts")
        budget = body.get("max_tokens")
        if not isinstance(budget, int) or isinstance(budget, bool) or not 1 <= budget <= 32768:
            raise PromptFileError(source, f"{key}.max_tokens",
                                  f"must be an integer 1-32768, not {budget!r:.40}")
        out[name] = Category(name, budget, _text_list(body.get("prompts"), source, f"{key}.prompts",
                                                      MAX_PROMPTS))
    excludes = raw.get("headline_excludes", [CEILING] if CEILING in out else [])
    if not isinstance(excludes, list) or not all(isinstance(e, str) for e in excludes):
        raise PromptFileError(source, "headline_excludes", "must be a list of category names")
    for e in excludes:
        if e not in out:
            raise PromptFileError(source, "headline_excludes", f"names {e!r:.40}, which is not a category")
    if len(set(excludes)) == len(out):
        raise PromptFileError(source, "headline_excludes", "leaves no category for the headline")
    filler = _text_list(raw.get("filler"), source, "filler", 10_000)
    return PromptSet(VERSION, source, out, frozenset(excludes), filler)


def load(path: str | os.PathLike[str] | None = None) -> PromptSet:
    """The packaged set v1, or the file at ``path``; raises :class:`PromptFileError`."""
    if path is None:
        text = resources.files("cockpit.bench").joinpath("prompts_v1.json").read_text("utf-8")
        return parse(json.loads(text), "prompts_v1.json (packaged)")
    p = Path(path)
    source = str(p)
    try:
        data = read_bounded(p, MAX_FILE_BYTES)
    except NotReadable as exc:
        raise PromptFileError(source, "(file)", exc.reason) from None
    except OSError as exc:
        raise PromptFileError(source, "(file)", exc.strerror or str(exc)) from None
    try:
        raw = loads_bounded(data.decode("utf-8"))
    except UnicodeDecodeError:
        raise PromptFileError(source, "(file)", "not UTF-8 text") from None
    except json.JSONDecodeError as exc:
        raise PromptFileError(source, "(file)", f"not JSON: {exc.msg} at line {exc.lineno}") from None
    except ValueError:
        raise PromptFileError(source, "(file)", "JSON nested too deeply") from None
    return parse(raw, source)


def new_run_tag() -> str:
    """A random tag of letters for one run (no digits: nothing in it reads as a number)."""
    return "".join(secrets.choice(string.ascii_lowercase) for _ in range(10))


def unique_text(text: str, run_tag: str, n: int) -> str:
    """``text`` behind a prefix of its own (run tag and request number): no two requests of a run, nor
    of two runs, share a first prompt-cache block."""
    return f"(bench {run_tag} request {n})\n{text}"


def filler_words(prompts: PromptSet, words: int) -> str:
    """About ``words`` words of filler text (the set's sentences, over and over, numbered so that no
    two passages are the same)."""
    out: list[str] = []
    count = 0
    i = 0
    while count < words:
        sentence = prompts.filler[i % len(prompts.filler)]
        if i % len(prompts.filler) == 0:
            sentence = f"Passage {i // len(prompts.filler) + 1}. {sentence}"
        out.append(sentence)
        count += len(sentence.split())
        i += 1
    return " ".join(out)
