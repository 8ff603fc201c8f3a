"""Unix socket paths longer than the kernel takes (``sun_path`` holds 108 bytes).

A ``CHORUS_HOME`` deep in the file system puts the meter's link socket past that
limit, and its bind and connect fail. On Linux the socket is then reached through
its folder's descriptor (``/proc/self/fd/N/name``), a path of a few bytes that
names the same file.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

#: The longest path given to bind or connect as it is (the kernel's limit is 107).
MAX_SOCKET_PATH = 100


@contextmanager
def socket_path(path: Path) -> Iterator[str]:
    """A path by which to bind or connect the socket at ``path``: ``path`` itself
    when short enough, else one through its folder's descriptor, open meanwhile."""
    text = str(path)
    o_path = getattr(os, "O_PATH", None)
    if len(os.fsencode(text)) <= MAX_SOCKET_PATH or o_path is None:
        yield text
        return
    fd = os.open(path.parent, o_path | os.O_DIRECTORY)
    try:
        yield f"/proc/self/fd/{fd}/{path.name}"
    finally:
        os.close(fd)
