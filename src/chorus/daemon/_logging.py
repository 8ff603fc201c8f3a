"""The daemon's own log: stderr (the ``daemon.log`` file, or the journal under systemd),
kept whole when stderr cannot be written.

When the disk that holds ``daemon.log`` is full, a write fails; the handler then
keeps the newest records in memory (bounded), sends each to the system log
(``/dev/log``, i.e. the journal or syslog) where there is one, and writes the kept
ones, marked as delayed, as soon as stderr takes writes again. Nothing is retried
in a loop and nothing raises into the code that logged.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import logging.handlers
import os
import resource
import sys
import time
from collections import deque
from collections.abc import Callable
from pathlib import Path
from typing import Any, TextIO

FORMAT = "%(asctime)s %(name)s %(message)s"
#: Records kept while stderr refuses writes (the oldest are dropped beyond it).
HELD_RECORDS = 500
_SYSLOG = Path("/dev/log")


class ResilientStderrHandler(logging.Handler):
    """Writes each record to ``stream``'s file descriptor in one ``write``; see module."""

    def __init__(self, stream: TextIO | None = None, *, held: int = HELD_RECORDS) -> None:
        super().__init__()
        self._fd = (stream or sys.stderr).fileno()
        self._held: deque[bytes] = deque(maxlen=held)
        self._dropped = 0
        self._rest = b""
        self._syslog = _syslog_handler()

    def emit(self, record: logging.LogRecord) -> None:
        try:
            data = (self.format(record) + "\n").encode("utf-8", "replace")
        except Exception:
            self.handleError(record)
            return
        try:
            self._drain()
        except OSError:
            self._hold(data, record)
            return
        try:
            self._write(data)
        except OSError:
            if not self._rest:  # nothing of it was written: keep it whole
                self._hold(data, record)

    def _write(self, data: bytes) -> None:
        """Write all of ``data``; when a write fails part-way, the unwritten tail of
        the line is kept in ``_rest`` and written first next time (no torn lines)."""
        view = memoryview(data)
        try:
            while view:
                view = view[os.write(self._fd, view) :]
        except OSError:
            if len(view) < len(data):
                self._rest = bytes(view)
            raise

    def _drain(self) -> None:
        """The tail of a torn line, then the held records (with a note), if any."""
        if self._rest:
            rest, self._rest = self._rest, b""
            try:
                self._write(rest)
            except OSError:
                self._rest = self._rest or rest
                raise
        if self._held:
            self._write_held()

    def _write_held(self) -> None:
        note = f"--- {len(self._held)} log record(s) delayed: stderr could not be written"
        if self._dropped:
            note += f"; {self._dropped} older one(s) dropped"
        block = (note + "\n").encode() + b"".join(b"(delayed) " + line for line in self._held)
        try:
            self._write(block)
        except OSError:
            if not self._rest:
                raise
        self._held.clear()
        self._dropped = 0

    def _hold(self, data: bytes, record: logging.LogRecord) -> None:
        if len(self._held) == self._held.maxlen:
            self._dropped += 1
        self._held.append(data)
        if self._syslog is not None:
            self._syslog.handle(record)

    @property
    def held(self) -> int:
        """Records waiting for stderr to take writes again."""
        return len(self._held)


def _syslog_handler() -> logging.Handler | None:
    if not _SYSLOG.exists():
        return None
    try:
        handler = logging.handlers.SysLogHandler(address=str(_SYSLOG))
    except OSError:
        return None
    handler.setFormatter(logging.Formatter("chorus-daemon: %(name)s %(message)s"))
    return handler


def install_logging(level: int = logging.INFO) -> ResilientStderrHandler:
    """Make the root logger write through one :class:`ResilientStderrHandler`."""
    from chorus.daemon._journal import JsonLineFormatter

    handler = ResilientStderrHandler()
    handler.setFormatter(JsonLineFormatter(FORMAT))
    root = logging.getLogger()
    for old in list(root.handlers):
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(level)
    return handler


class QuietLoopErrors:
    """An event-loop exception handler that logs each kind of error (its message) at
    most once per ``interval_s``, with the count of those it held back.

    asyncio reports a failed ``accept()`` (e.g. ``EMFILE``) with a full traceback each
    time it retries; under a connection flood that is megabytes a second of the same
    lines, on the same disk as everything else."""

    def __init__(self, interval_s: float = 10.0, clock: Callable[[], float] = time.monotonic):
        self.interval_s = interval_s
        self._clock = clock
        self._last: dict[str, float] = {}
        self._held: dict[str, int] = {}

    def __call__(self, loop: asyncio.AbstractEventLoop, context: dict[str, Any]) -> None:
        key = str(context.get("message", ""))
        now = self._clock()
        if now - self._last.get(key, -self.interval_s) < self.interval_s:
            self._held[key] = self._held.get(key, 0) + 1
            return
        self._last[key] = now
        held = self._held.pop(key, 0)
        if held:
            context = {**context, "message": f"{key} (and {held} more like it, not logged)"}
        loop.default_exception_handler(context)


def raise_fd_limit() -> int:
    """Raise the soft limit of open files to the hard one; return the new soft limit."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard == resource.RLIM_INFINITY or soft < hard:
        with contextlib.suppress(ValueError, OSError):
            resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    return resource.getrlimit(resource.RLIMIT_NOFILE)[0]
