"""What every front shares: how it is run, and how it fails when Chorus is out of reach.

A front speaks one client protocol on its stdio and Chorus's UCP v1 to the daemon
(through :class:`chorus.fronts.Link`). Its protocol logic is a sans-I/O codec; the
front object owns the thin loop that moves lines between stdio, the codec and
the link.
"""

from __future__ import annotations

import abc
import asyncio
import json
import logging
import sys
from collections.abc import Coroutine
from typing import Any

from chorus.events import JsonDict
from chorus.fronts._link import LinkError

log = logging.getLogger("chorus.fronts")

#: Exit codes: the client went away normally; Chorus could not be reached.
EXIT_OK = 0
EXIT_UNREACHABLE = 1


class Front(abc.ABC):
    """One client protocol served on stdio over Chorus sessions."""

    name: str = "front"

    def __init__(self) -> None:
        self._tasks: set[asyncio.Task[None]] = set()

    def spawn(self, work: Coroutine[Any, Any, None]) -> None:
        """Run ``work`` beside the stdin loop; a failure is reported on stderr."""
        task = asyncio.create_task(work)
        self._tasks.add(task)
        task.add_done_callback(self._done)

    def _done(self, task: asyncio.Task[None]) -> None:
        self._tasks.discard(task)
        if not task.cancelled() and task.exception() is not None:
            log.error("chorus %s: %r", self.name, task.exception())

    def cancel_tasks(self) -> None:
        for task in list(self._tasks):
            task.cancel()

    @abc.abstractmethod
    async def serve(self) -> None:
        """Serve the client until it closes stdin (raises :class:`LinkError` when the
        daemon is out of reach)."""

    @abc.abstractmethod
    def fatal_frame(self, message: str) -> JsonDict | None:
        """The protocol's way to tell the client that Chorus is unreachable."""


def run_front(front: Front) -> int:
    """Run ``front`` to its end; the process's exit code."""
    try:
        asyncio.run(front.serve())
    except LinkError as exc:
        frame = front.fatal_frame(str(exc))
        if frame is not None:
            write_line(frame)
        print(f"chorus {front.name}: {exc}", file=sys.stderr)
        return EXIT_UNREACHABLE
    except KeyboardInterrupt:
        return EXIT_OK
    return EXIT_OK


def write_line(frame: JsonDict) -> None:
    """One JSON object per line on stdout, flushed."""
    sys.stdout.write(json.dumps(frame, separators=(",", ":")) + "\n")
    sys.stdout.flush()


async def stdin_lines() -> asyncio.StreamReader:
    """A reader over stdin that does not block the loop (pipes and terminals)."""
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader(limit=64 << 20)
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin)
    return reader
