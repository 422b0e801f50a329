"""Supervision of the core's long-lived loops: a loop that raises is logged, said in the model (so nothing
it fed is shown as current while it is down) and started again with a growing delay, never left dead."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable

log = logging.getLogger(__name__)

FIRST_DELAY_S = 1.0
MAX_DELAY_S = 30.0
HEALTHY_AFTER_S = 60.0     # a loop that ran this long before failing starts again at the first delay


async def supervised(name: str, body: Callable[[], Awaitable[None]],
                     on_error: Callable[[str, float], None], *, first_delay: float = FIRST_DELAY_S,
                     max_delay: float = MAX_DELAY_S) -> None:
    """Run `body()` until it returns; when it raises, tell `on_error(what, seconds until the restart)`,
    wait, and run it again (the delay doubling up to `max_delay`). Cancellation ends it at once."""
    delay = first_delay
    while True:
        began = time.monotonic()
        try:
            await body()
            return
        except asyncio.CancelledError:
            raise
        except Exception as exc:       # any bug or OSError: the loop must come back, and say it was down
            if time.monotonic() - began >= HEALTHY_AFTER_S:
                delay = first_delay
            what = f"{type(exc).__name__}: {exc}"[:300]
            log.warning("%s failed (%s); restarting in %g s", name, what, delay, exc_info=True)
            on_error(what, delay)
            await asyncio.sleep(delay)
            delay = min(delay * 2, max_delay)
