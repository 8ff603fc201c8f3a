"""Wake a reader when a file is written: Linux inotify, through ctypes.

A detached body's stdout is a file that the daemon reads by polling, backing off
while it stays quiet (see ``_detached``): alone, that adds up to the last poll's
interval to every answer the CLI writes (initialize, thread/start, the first text).
A :class:`FileWake` ends that wait as soon as the file is modified. One inotify
instance per event loop serves every watched file, open only while something is
watched (an instance is a per-user resource, 128 by default). Where inotify is
missing (not Linux, no instance left) :meth:`FileWake.wait` is a plain sleep: the
reader polls as before.
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import os
import struct
from pathlib import Path

from chorus._libc import libc_with

_IN_MODIFY = 0x2
_EVENT = struct.Struct("iIII")  # wd, mask, cookie, len (then len bytes of name)


class _Inotify:
    """The loop's inotify instance: watch descriptor → the events to set."""

    def __init__(self, loop: asyncio.AbstractEventLoop, libc: ctypes.CDLL, fd: int) -> None:
        self.loop, self.libc, self.fd = loop, libc, fd
        self.waiters: dict[int, set[asyncio.Event]] = {}
        loop.add_reader(fd, self._ready)

    def watch(self, path: Path, event: asyncio.Event) -> int | None:
        wd = int(self.libc.inotify_add_watch(self.fd, os.fsencode(path), _IN_MODIFY))
        if wd < 0:
            return None
        self.waiters.setdefault(wd, set()).add(event)
        return wd

    def unwatch(self, wd: int, event: asyncio.Event) -> None:
        events = self.waiters.get(wd, set())
        events.discard(event)
        if not events:
            self.waiters.pop(wd, None)
            self.libc.inotify_rm_watch(self.fd, wd)

    def _ready(self) -> None:
        try:
            data = os.read(self.fd, 1 << 16)
        except OSError:
            return
        for wd in _descriptors(data):
            for event in self.waiters.get(wd, ()):
                event.set()

    def close(self) -> None:
        self.loop.remove_reader(self.fd)
        os.close(self.fd)


def _descriptors(data: bytes) -> set[int]:
    found, at = set(), 0
    while at + _EVENT.size <= len(data):
        wd, _mask, _cookie, size = _EVENT.unpack_from(data, at)
        found.add(wd)
        at += _EVENT.size + size
    return found


_INSTANCES: dict[asyncio.AbstractEventLoop, _Inotify] = {}


def _instance(loop: asyncio.AbstractEventLoop) -> _Inotify | None:
    found = _INSTANCES.get(loop)
    libc = libc_with("inotify_init1")
    if found is not None or libc is None:
        return found
    fd = int(libc.inotify_init1(os.O_NONBLOCK | os.O_CLOEXEC))
    if fd < 0:
        return None
    _INSTANCES[loop] = found = _Inotify(loop, libc, fd)
    return found


def _release(loop: asyncio.AbstractEventLoop) -> None:
    found = _INSTANCES.get(loop)
    if found is not None and not found.waiters:
        del _INSTANCES[loop]
        found.close()


class FileWake:
    """Wait for ``path`` to be written (use in the event loop that waits; close it)."""

    def __init__(self, path: Path) -> None:
        self._loop = asyncio.get_running_loop()
        self._event = asyncio.Event()
        self._inotify = _instance(self._loop)
        self._wd = self._inotify.watch(path, self._event) if self._inotify else None
        if self._wd is None:
            _release(self._loop)

    @property
    def active(self) -> bool:
        """Whether writes wake :meth:`wait` (else it only sleeps)."""
        return self._wd is not None

    async def wait(self, timeout: float) -> None:  # noqa: ASYNC109 - the poll's fallback
        """Return when the file was written since the last wait, or after ``timeout``."""
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._event.wait(), timeout)
        self._event.clear()

    def close(self) -> None:
        if self._inotify is not None and self._wd is not None:
            self._inotify.unwatch(self._wd, self._event)
            self._wd = None
            _release(self._loop)
