"""What the supervisor does when the log itself cannot be written (a full disk).

A job whose events cannot be stored fails with the stable code ``storage_full``,
and its end (state + JobEnded, one transaction) is retried until space is back,
so the job never stays ``running`` with nobody to finish it.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import TypeVar

from chorus._errors import BodyCrashedError, BodyError, BodyProtocolError, BodyTimeoutError
from chorus.events import ErrorCode, ErrorInfo
from chorus.store import StorageFullError

log = logging.getLogger("chorus.daemon")
T = TypeVar("T")

#: Waits between tries of a write refused for lack of space (the last one repeats).
RETRY_DELAYS_S = (0.2, 0.5, 1.0, 2.0, 5.0)


def error_info(exc: Exception) -> ErrorInfo:
    """The error a job fails with when running it raised ``exc`` (instead of ending
    with a failed turn): a stable code for every cause Chorus can tell apart."""
    if isinstance(exc, StorageFullError) or _caused_by_full_disk(exc):
        return ErrorInfo(
            code=ErrorCode.STORAGE_FULL,
            message=f"the event log could not be written (disk full): {exc}",
            retryable=True,
        )
    if isinstance(exc, BodyCrashedError):
        return _crashed(exc)
    for kind, code in _BODY_CODES:
        if isinstance(exc, kind):
            return ErrorInfo(code=code, message=f"the agent CLI failed: {exc}")
    return ErrorInfo(code=ErrorCode.UNKNOWN, message=f"chorus error: {exc}")


_BODY_CODES: tuple[tuple[type[BodyError], ErrorCode], ...] = (
    (BodyTimeoutError, ErrorCode.TIMEOUT),
    (BodyProtocolError, ErrorCode.BODY_PROTOCOL),
)


def _crashed(exc: BodyCrashedError) -> ErrorInfo:
    """A CLI that died (often at once: a bad flag, a missing login, a broken install)."""
    code = f"exit code {exc.exit_code}" if exc.exit_code is not None else "no exit code yet"
    tail = exc.stderr_tail.strip()[-2000:]
    message = f"the agent CLI exited ({code}): {exc}" + (f"\n{tail}" if tail else "")
    native = {"exit_code": exc.exit_code, "stderr_tail": tail}
    return ErrorInfo(code=ErrorCode.BODY_CRASHED, message=message, native=native)


def _caused_by_full_disk(exc: BaseException) -> bool:
    seen: BaseException | None = exc
    while seen is not None:
        if isinstance(seen, StorageFullError):
            return True
        seen = seen.__cause__ or seen.__context__
    return False


async def until_stored(write: Callable[[], Awaitable[T]], what: str) -> T:
    """Run ``write`` until it is not refused for lack of space; other errors raise."""
    tries = 0
    while True:
        try:
            result = await write()
        except StorageFullError as exc:
            delay = RETRY_DELAYS_S[min(tries, len(RETRY_DELAYS_S) - 1)]
            if tries == 0:
                log.error("%s: the disk is full; retrying until space is back (%s)", what, exc)
            tries += 1
            await asyncio.sleep(delay)
            continue
        if tries:
            log.warning("%s: stored once space was back (after %d refused tries)", what, tries)
        return result
