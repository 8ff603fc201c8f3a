"""What every front shares: how it is run, and how it fails when Chorus is out of reach.

A front speaks one client protocol on its stdio and Chorus's UCP v1 to the daemon
(through :class:`chorus.fronts.Link`). Its protocol logic is a sans-I/O codec; the
front object owns the thin loop that moves lines between stdio, the codec and
the link.
"""

from __future__ import annotations

import abc
import asyncio
import contextlib
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


class StdioFront(Front):
    """A front whose client speaks one JSON object a line on stdio (Claude Code's
    stream-json, the Codex app-server). Subclasses handle each line; this owns the
    loop, the links' exit stack and the requests put to the client."""

    def __init__(self) -> None:
        super().__init__()
        #: The links (and whatever else) to close when stdin ends.
        self.stack = contextlib.AsyncExitStack()
        self._asks: dict[str, asyncio.Future[JsonDict]] = {}

    async def serve(self) -> None:
        reader = await stdin_lines()
        async with self.stack:
            while line := await reader.readline():
                if line.strip():
                    await self.on_line(line.decode("utf-8", "replace"))
            await self.drained()
            self.cancel_tasks()

    @abc.abstractmethod
    async def on_line(self, line: str) -> None:
        """Handle one line of the client's."""

    async def drained(self) -> None:
        """At the end of stdin: wait for what must still be written (nothing here)."""

    async def ask_client(
        self, request_id: str, frame: JsonDict, patience: float
    ) -> JsonDict | None:
        """Write ``frame`` (a request to the client) and return the client's answer to
        ``request_id`` (see :meth:`answered`); None when none came in ``patience`` s."""
        future: asyncio.Future[JsonDict] = asyncio.get_running_loop().create_future()
        self._asks[request_id] = future
        write_line(frame)
        try:
            return await asyncio.wait_for(future, patience)
        except TimeoutError:
            return None
        finally:
            self._asks.pop(request_id, None)

    def answered(self, request_id: str, answer: JsonDict) -> None:
        """The client answered one of :meth:`ask_client`'s requests."""
        waiting = self._asks.get(request_id)
        if waiting is not None and not waiting.done():
            waiting.set_result(answer)


class CallsShown:
    """Which tool calls the client has been shown, so that a question about one comes
    after it (as each CLI does: the call, then the permission request about it). The
    question and the call reach a front on two paths, in either order."""

    #: How long a question waits for its call to be shown (it is asked regardless).
    PATIENCE_S = 2.0

    def __init__(self) -> None:
        self._shown: dict[str, asyncio.Event] = {}

    def shown(self, call_id: str) -> None:
        self._shown.setdefault(call_id, asyncio.Event()).set()

    async def after(self, call_id: str | None) -> None:
        """Return once ``call_id`` was shown, or after :attr:`PATIENCE_S`."""
        if call_id is None:
            return
        event = self._shown.setdefault(call_id, asyncio.Event())
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(event.wait(), self.PATIENCE_S)
        self._shown.pop(call_id, None)


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
