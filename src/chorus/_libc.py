"""The C library, for the few Linux calls the standard library lacks (``fallocate``
to punch a hole in a body's output file, ``inotify`` to wake on its writes,
glibc's ``malloc_trim`` once the daemon is idle)."""

from __future__ import annotations

import ctypes
import functools
import sys


@functools.cache
def _process_libc() -> ctypes.CDLL | None:
    """The C library this process runs on (its own symbols: nothing to look up or
    start, unlike ``ctypes.util.find_library``), once; None off Linux."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        return ctypes.CDLL(None, use_errno=True)
    except OSError:
        return None


def libc_with(symbol: str) -> ctypes.CDLL | None:
    """The C library if it has ``symbol``, else None."""
    libc = _process_libc()
    return libc if libc is not None and hasattr(libc, symbol) else None
