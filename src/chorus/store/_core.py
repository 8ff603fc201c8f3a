"""The store of both backends: the repositories, composed, over one writer and readers.

:class:`~chorus.store.Store` is the composition of one repository per record kind
(sessions, events, control requests, jobs, nodes and leases, routines, worktrees,
team mailboxes, flags); their SQL is written once (:mod:`chorus.store._query`).
This class adds the plumbing they share: the lifecycle, the one writer thread
(:mod:`chorus.store._writer`) and a pool of reader threads. No database call runs
on the event loop's thread. A backend (:class:`~chorus.store.SqliteStore`,
:class:`~chorus.store.PostgresStore`) says how to connect, and adds what only it has.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Literal, TypeVar

from chorus._errors import ChorusError
from chorus.config import sessions_dir
from chorus.store._bus import EventBus
from chorus.store._db import Db
from chorus.store._errors import StoreClosedError, StoreError
from chorus.store._interface import Store
from chorus.store._mirror import JsonlMirror
from chorus.store._ops import CallOp, Op
from chorus.store._query import QueryFn, run
from chorus.store._redact import Redactor
from chorus.store._writer import Writer

T = TypeVar("T")

#: Cap on one stored event (a body line may be 8 MiB; its Unknown event is larger).
DEFAULT_MAX_EVENT_BYTES = 32 << 20
READER_THREAD_PREFIX = "chorus-store-reader"


class SqlStore(Store):
    """The repositories over one writer and a pool of readers (see the module)."""

    #: Distinguishes this process's writes from other processes' (shared stores).
    writer_id = ""
    #: The database driver's errors: a read that raises one fails with StoreError.
    _driver_errors: tuple[type[Exception], ...] = ()

    def __init__(
        self,
        redactor: Redactor | None,
        mirror_dir: Path | None,
        limits: tuple[int, int, int],
        readers: int,
    ) -> None:
        """``limits``: the writer's ``max_queue``, ``max_batch`` and ``max_event_bytes``."""
        max_queue, max_batch, max_event_bytes = limits
        self.redactor = redactor or Redactor.from_config()
        self.max_event_bytes = max_event_bytes
        self.mirror: JsonlMirror | None = None
        self._mirror_dir = mirror_dir
        self._writer_options = {
            "max_queue": max_queue,
            "max_batch": max_batch,
            "max_event_bytes": max_event_bytes,
        }
        self._reader_count = readers
        self._bus = EventBus()
        self._writer: Writer | None = None
        self._readers: ThreadPoolExecutor | None = None
        self._state: Literal["new", "open", "closed"] = "new"
        self._queued_hooks: list[Callable[[], None]] = []

    # -- what a backend provides ------------------------------------------------------

    def _connect_writer(self) -> Db:
        """A new write connection (the writer thread calls it, again after an outage)."""
        raise NotImplementedError

    def _reader(self) -> AbstractContextManager[Db]:
        """A read connection for the calling reader thread."""
        raise NotImplementedError

    def _close_readers(self) -> None:
        """Release the read connections (their threads have stopped)."""

    async def _closing(self) -> None:
        """Stop what the backend runs beside the writer (after the writer stopped)."""

    def _open_error(self, exc: Exception) -> ChorusError:
        """What :meth:`start` raises when the writer could not connect or migrate."""
        return exc if isinstance(exc, ChorusError) else StoreError(f"{type(exc).__name__}: {exc}")

    # -- lifecycle ----------------------------------------------------------------------

    async def start(self) -> None:
        """Open the database and apply pending migrations. Call once."""
        if self._state != "new":
            raise StoreClosedError("a store can be started once")
        self._state = "open"
        try:
            await self._open()
        except BaseException:
            await self.close()
            raise

    async def _open(self) -> None:
        self.mirror = JsonlMirror(self._mirror_dir or sessions_dir())
        self._writer = Writer(
            self._connect_writer,
            redactor=self.redactor,
            mirror=self.mirror,
            bus=self._bus,
            writer_id=self.writer_id,
            **self._writer_options,
        )
        self._readers = ThreadPoolExecutor(self._reader_count, READER_THREAD_PREFIX)
        try:
            await asyncio.wrap_future(self._writer.start())
        except Exception as exc:
            error = self._open_error(exc)
            if error is exc:
                raise
            raise error from exc

    async def close(self) -> None:
        """Finish queued writes, end subscriptions, release every connection.
        Idempotent."""
        if self._state == "closed":
            return
        self._state = "closed"
        # Writes first (they publish), then the backend's extras, the bus, the readers.
        if self._writer is not None:
            await asyncio.to_thread(self._writer.stop)
        await self._closing()
        self._bus.close()
        if self._readers is not None:
            await asyncio.to_thread(self._shutdown_readers, self._readers)

    def _shutdown_readers(self, pool: ThreadPoolExecutor) -> None:
        pool.shutdown(wait=True)
        self._close_readers()

    # -- plumbing --------------------------------------------------------------------------

    def _check_open(self) -> None:
        if self._state != "open" or self._writer is None:
            raise StoreClosedError(f"the store is {self._state}")

    def _submit(self, op: Op) -> None:
        self._check_open()
        assert self._writer is not None
        self._writer.submit(op)

    async def _call(self, fn: QueryFn[T]) -> T:
        result: T = await self._write(CallOp(asyncio.get_running_loop(), fn))
        return result

    async def _read(self, fn: QueryFn[T]) -> T:
        self._check_open()
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._readers, self._run_read, fn)

    def _run_read(self, fn: QueryFn[T]) -> T:
        try:
            with self._reader() as db:
                return run(db, fn())
        except self._driver_errors as exc:
            reason = self.redactor.redact_text(str(exc))
            raise StoreError(f"read failed: {reason}") from exc
