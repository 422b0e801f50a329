"""The headless commands' event loop: Ctrl-C that lands in a side task (a connection's wait, a reader) ends
the command with KeyboardInterrupt for its own handler, and no asyncio traceback reaches the operator."""

from __future__ import annotations

import asyncio
import gc

import pytest

from cockpit.cli.common import run_async


async def _interrupted_beside_a_wait() -> None:
    async def side() -> None:
        await asyncio.sleep(0.01)
        raise KeyboardInterrupt      # where the signal lands: whichever task was running

    task = asyncio.ensure_future(side())
    await asyncio.wait_for(asyncio.sleep(5), 10)
    await task


def _asyncio_errors(caplog: pytest.LogCaptureFixture) -> str:
    """What asyncio logged (unconfigured logging prints it to stderr: the traceback an operator sees)."""
    return "\n".join(r.getMessage() + str(r.exc_info) for r in caplog.records if r.name == "asyncio")


def test_an_interrupt_in_a_side_task_prints_no_traceback(caplog: pytest.LogCaptureFixture) -> None:
    with pytest.raises(KeyboardInterrupt):
        run_async(_interrupted_beside_a_wait())
    gc.collect()
    assert _asyncio_errors(caplog) == ""


def test_other_loop_errors_are_still_reported(caplog: pytest.LogCaptureFixture) -> None:
    async def lost() -> None:
        async def boom() -> None:
            raise ValueError("a real bug")
        unawaited = asyncio.ensure_future(boom())
        await asyncio.sleep(0.05)
        del unawaited      # never awaited: its error is only reported when it is collected

    run_async(lost())
    gc.collect()
    assert "a real bug" in _asyncio_errors(caplog)
