"""An API key for a gateway (``--api-key`` or ``OPENAI_API_KEY``): sent as ``Authorization: Bearer``,
never shown.

:class:`ApiKey` hides its value from ``str``, ``repr``, f-strings and ``json.dumps`` (which refuses it),
so a key cannot reach a message, a log, ``--json`` output or a saved file by accident; only
:meth:`ApiKey.bearer` spells it out, for the header. :func:`scrub` takes a key out of text a server
sent back (a gateway may echo it in an error body).
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Mapping

ENV_VAR = "OPENAI_API_KEY"
MAX_KEY_CHARS = 4096
HIDDEN = "***"


class ApiKey:
    """A secret: compares and hashes by value, shows as ``***``."""

    __slots__ = ("_value",)

    def __init__(self, value: str) -> None:
        value = value.strip()
        if not value:
            raise ValueError("the API key is empty")
        if len(value) > MAX_KEY_CHARS:
            raise ValueError(f"the API key is longer than {MAX_KEY_CHARS} characters")
        if not value.isascii() or not value.isprintable() or any(c.isspace() for c in value):
            # no header injection, and nothing an HTTP header cannot carry
            raise ValueError("the API key holds spaces, control or non-ASCII characters")
        self._value = value

    def bearer(self) -> str:
        """The ``Authorization`` header value."""
        return f"Bearer {self._value}"

    def scrub(self, text: str) -> str:
        """``text`` with every occurrence of the key replaced by ``***``."""
        return text.replace(self._value, HIDDEN) if self._value in text else text

    def __repr__(self) -> str:
        return f"ApiKey({HIDDEN})"

    def __str__(self) -> str:
        return HIDDEN

    def __format__(self, spec: str) -> str:
        return HIDDEN

    def __eq__(self, other: object) -> bool:
        return isinstance(other, ApiKey) and other._value == self._value

    def __hash__(self) -> int:
        return hash(("ApiKey", self._value))

    def __reduce__(self) -> tuple[object, ...]:
        raise TypeError("an API key is not pickled")


def key_from_env(environ: Mapping[str, str] | None = None) -> ApiKey | None:
    """``OPENAI_API_KEY`` as a key; unset, empty or unusable is no key (never an error that shows it)."""
    raw = (os.environ if environ is None else environ).get(ENV_VAR, "")
    try:
        return ApiKey(raw) if raw.strip() else None
    except ValueError:
        return None


def parse_key(text: str) -> ApiKey:
    """``--api-key``'s argparse type: the error names the problem, never the value."""
    try:
        return ApiKey(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def scrub(text: str, key: ApiKey | None) -> str:
    """``text`` without ``key`` in it (``text`` itself when there is no key)."""
    return text if key is None else key.scrub(text)
