"""Which model to ask: ``--model``, the cluster's served name, or the one a gateway lists.

Through the tunnel the model is the served name unless ``--model`` names another. Through ``--api-url``
the server may serve anything: the served name if ``/v1/models`` lists it, else the only model listed;
several (and no ``--model``) is an error that lists them, as is a ``--model`` that is not listed.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from cockpit.api.errors import one_line

if TYPE_CHECKING:
    from cockpit.api.client import ApiClient

MAX_LISTED = 20
"""The most model names an error lists (the rest are counted)."""


class ModelChoiceError(Exception):
    """No model can be chosen. ``usage``: the command line must say which (``--model``), else the server
    offers nothing to choose from."""

    def __init__(self, message: str, *, usage: bool, listed: Sequence[str] = ()) -> None:
        super().__init__(message)
        self.message = message
        self.usage = usage
        self.listed = tuple(listed)


def listing(ids: Sequence[str]) -> str:
    """Model names for a message: one line each, at most :data:`MAX_LISTED`, the rest counted."""
    shown = ", ".join(one_line(i, 100) for i in ids[:MAX_LISTED])
    more = len(ids) - MAX_LISTED
    return shown + (f" and {more} more" if more > 0 else "")


def choose_model(listed: Sequence[str], wanted: str | None, *, default: str, gateway: bool) -> str:
    """The model to send; raises :class:`ModelChoiceError`. ``listed``: what ``/v1/models`` lists (only
    read when ``wanted`` is given or ``gateway``)."""
    if wanted:
        if wanted in listed:
            return wanted
        where = f"/v1/models lists {listing(listed)}" if listed else "/v1/models lists no model"
        raise ModelChoiceError(f"--model {one_line(wanted, 100)} is not served here: {where}", usage=True,
                               listed=listed)
    if not gateway or default in listed:
        return default
    if len(listed) == 1:
        return listed[0]
    if not listed:
        raise ModelChoiceError("/v1/models lists no model: there is nothing to ask", usage=False)
    raise ModelChoiceError(f"the server lists {len(listed)} models and none is {default}: choose one with "
                           f"--model NAME ({listing(listed)})", usage=True, listed=listed)


async def resolve_model(client: ApiClient, listed: Sequence[str], wanted: str | None, *, default: str,
                        gateway: bool) -> str:
    """:func:`choose_model` with the list read from ``client`` when ``listed`` (a readiness probe's) is
    empty. Through the tunnel without ``wanted`` the served name is sent unasked. Raises
    :class:`ModelChoiceError`, or :class:`ApiError` when the list cannot be read."""
    if not gateway and not wanted:
        return default
    names = list(listed) or [m.id for m in await client.models()]
    return choose_model(names, wanted, default=default, gateway=gateway)
