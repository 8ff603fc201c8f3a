"""Waiting on a real condition instead of a fixed sleep: ``until(check)`` polls
``check`` (every 100 ms) and fails the test when it stays false past ``timeout``."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable

__all__ = ["CLI_INTERVAL", "INTERVAL", "until", "until_async"]

#: How often a condition is asked again: soon enough that a test waits little past the
#: moment, seldom enough that asking (a request the daemon serves) costs little CPU.
INTERVAL = 0.1
#: How often a condition that runs the ``chorus`` CLI is asked again: each run is a
#: Python start (about half a second of CPU), which the tests running beside it need.
CLI_INTERVAL = 0.5


def until(check: Callable[[], bool], timeout: float = 60, interval: float = INTERVAL) -> None:
    """Return as soon as ``check()`` is true; fail after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError(f"condition not met in {timeout:g} s")
        time.sleep(interval)


async def until_async(check: Callable[[], bool], seconds: float = 10) -> None:
    """``until`` for a test's event loop (the loop runs on while it waits); a
    ``TimeoutError`` after ``seconds``."""
    async with asyncio.timeout(seconds):
        while not check():  # noqa: ASYNC110 (the condition gives no event to wait on)
            await asyncio.sleep(INTERVAL)
