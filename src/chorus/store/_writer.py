"""The one writer: a thread that owns the SQLite write connection.

Callers enqueue operations on a bounded queue and await a future. The thread
takes everything queued (up to ``max_batch``) and runs it in one transaction
(group commit), so one fsync covers many appends. After the commit it writes
the JSONL mirror, settles the callers' futures (on their own event loops) and
publishes the events to the bus, in that order: a caller that sees its append
resolved can read it back from the database and from the mirror.

Failure isolation: an operation that raises a :class:`ChorusError` fails alone
(generic operations run inside a SAVEPOINT; appends check everything before
they insert). A SQLite error outside that (disk full, I/O) rolls the whole batch
back and fails every operation in it with :class:`StoreError`.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import queue
import sqlite3
import threading
import time
from collections import defaultdict
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Any, cast

from chorus._errors import ChorusError, EventTooLargeError
from chorus.events import Event
from chorus.store._bus import EventBus
from chorus.store._errors import (
    StorageFullError,
    StoreClosedError,
    StoreError,
    StoreQueueFullError,
    UnknownSessionError,
)
from chorus.store._migrations import migrate
from chorus.store._mirror import JsonlMirror
from chorus.store._redact import Redactor

log = logging.getLogger("chorus.store")

WRITER_THREAD_NAME = "chorus-store-writer"

Connect = Callable[[], sqlite3.Connection]


# -- operations ----------------------------------------------------------------------


@dataclass(slots=True)
class _Cursor:
    """Per-session counters, read once per transaction under the write lock."""

    body: str
    next_seq: int
    next_n: int


@dataclass(slots=True)
class _Txn:
    """What the operations of one batch share while the transaction is open."""

    conn: sqlite3.Connection
    redactor: Redactor
    max_event_bytes: int
    cursors: dict[str, _Cursor] = field(default_factory=dict)
    mirror_lines: dict[str, list[str]] = field(default_factory=lambda: defaultdict(list))
    events: list[Event] = field(default_factory=list)
    # Rows are inserted together (one executemany per table) at flush().
    event_rows: list[tuple[Any, ...]] = field(default_factory=list)
    raw_rows: list[tuple[Any, ...]] = field(default_factory=list)

    def flush(self) -> None:
        """Insert the buffered rows. A failure here is a batch failure."""
        if self.event_rows:
            self.conn.executemany(
                "INSERT INTO events (session_id, seq, ts, type, origin, payload)"
                " VALUES (?, ?, ?, ?, ?, ?)",
                self.event_rows,
            )
            self.event_rows.clear()
        if self.raw_rows:
            self.conn.executemany(
                "INSERT INTO raw_lines (session_id, n, stream, line, ts) VALUES (?, ?, ?, ?, ?)",
                self.raw_rows,
            )
            self.raw_rows.clear()

    def cursor(self, session_id: str) -> _Cursor:
        cursor = self.cursors.get(session_id)
        if cursor is None:
            row = self.conn.execute(
                "SELECT body,"
                " (SELECT COALESCE(MAX(seq), 0) FROM events WHERE session_id = :id),"
                " (SELECT COALESCE(MAX(n), 0) FROM raw_lines WHERE session_id = :id)"
                " FROM sessions WHERE id = :id",
                {"id": session_id},
            ).fetchone()
            if row is None:
                raise UnknownSessionError(session_id)
            cursor = _Cursor(body=row[0], next_seq=row[1] + 1, next_n=row[2] + 1)
            self.cursors[session_id] = cursor
        return cursor


class Op:
    """One queued write. ``future`` lives on the caller's loop (None: nobody waits)."""

    __slots__ = ("future", "loop")

    def __init__(self, loop: asyncio.AbstractEventLoop | None) -> None:
        self.loop = loop
        self.future: asyncio.Future[Any] | None = loop.create_future() if loop else None

    def apply(self, txn: _Txn) -> Any:
        raise NotImplementedError

    def describe(self) -> str:
        return type(self).__name__


class AppendOp(Op):
    """Redact, stamp and insert events of one session with consecutive seqs.
    The result is the list of stamped events, or the one event if ``single``."""

    __slots__ = ("events", "origin", "session_id", "single")

    def __init__(
        self,
        loop: asyncio.AbstractEventLoop | None,
        session_id: str,
        events: Sequence[Event],
        origin: str,
        *,
        single: bool = False,
    ) -> None:
        super().__init__(loop)
        self.session_id = session_id
        self.events = events
        self.origin = origin
        self.single = single

    def _stamp(self, event: Event, cursor: _Cursor, offset: int) -> Event:
        update = {"session_id": self.session_id, "seq": cursor.next_seq + offset}
        if not event.body:
            update["body"] = cursor.body
        return event.model_copy(update=update)

    def apply(self, txn: _Txn) -> list[Event] | Event:
        cursor = txn.cursor(self.session_id)
        stamped: list[Event] = []
        rows = []
        for offset, event in enumerate(self.events):
            # Redacted before stamping, so the stamped ids are never touched.
            final = self._stamp(txn.redactor.redact_event(event), cursor, offset)
            payload = final.model_dump_json()
            _check_size(payload, txn.max_event_bytes)
            stamped.append(final)
            rows.append((self.session_id, final.seq, final.ts, final.type, self.origin, payload))
        # Nothing is buffered until every event passed, so a failure writes nothing.
        txn.event_rows.extend(rows)
        cursor.next_seq += len(rows)
        txn.mirror_lines[self.session_id].extend(row[5] for row in rows)
        txn.events.extend(stamped)
        return stamped[0] if self.single else stamped


class RawOp(Op):
    """Redact and insert one raw line; the result is its ``n``."""

    __slots__ = ("line", "session_id", "stream", "ts")

    def __init__(
        self,
        loop: asyncio.AbstractEventLoop | None,
        session_id: str,
        stream: str,
        line: str,
    ) -> None:
        super().__init__(loop)
        self.session_id = session_id
        self.stream = stream
        self.line = line
        self.ts = time.time()

    def apply(self, txn: _Txn) -> int:
        cursor = txn.cursor(self.session_id)
        n = cursor.next_n
        line = txn.redactor.redact_line(self.line)
        txn.raw_rows.append((self.session_id, n, self.stream, line, self.ts))
        cursor.next_n += 1
        return n

    def describe(self) -> str:
        return f"raw {self.stream} line of session {self.session_id}"


class CallOp(Op):
    """Any other write: ``fn(conn)`` runs inside a SAVEPOINT, so a
    :class:`ChorusError` it raises undoes only its own changes."""

    __slots__ = ("fn",)

    def __init__(
        self, loop: asyncio.AbstractEventLoop | None, fn: Callable[[sqlite3.Connection], Any]
    ) -> None:
        super().__init__(loop)
        self.fn = fn

    def apply(self, txn: _Txn) -> Any:
        txn.flush()  # earlier appends first: the savepoint must not cover them
        txn.conn.execute("SAVEPOINT op")
        try:
            result = self.fn(txn.conn)
        except (ChorusError, sqlite3.IntegrityError) as exc:
            txn.conn.execute("ROLLBACK TO op")
            txn.conn.execute("RELEASE op")
            if isinstance(exc, sqlite3.IntegrityError):
                raise StoreError(f"constraint failed: {exc}") from exc
            raise
        txn.conn.execute("RELEASE op")
        return result


class EndOp(Op):
    """Change a row and append events to the log in one transaction: both or neither.

    ``fn(conn)`` runs first, inside a SAVEPOINT, and returns ``(session_id, value)``;
    then ``events`` are appended to that session. The result is ``(value, stamped)``.
    A :class:`ChorusError` from either half undoes both (e.g. an illegal job state,
    an event over the size cap)."""

    __slots__ = ("events", "fn", "origin")

    def __init__(
        self,
        loop: asyncio.AbstractEventLoop | None,
        fn: Callable[[sqlite3.Connection], tuple[str, Any]],
        events: Sequence[Event],
        origin: str,
    ) -> None:
        super().__init__(loop)
        self.fn = fn
        self.events = events
        self.origin = origin

    def apply(self, txn: _Txn) -> tuple[Any, list[Event]]:
        txn.flush()
        txn.conn.execute("SAVEPOINT op")
        try:
            session_id, value = self.fn(txn.conn)
            appended = AppendOp(None, session_id, self.events, self.origin).apply(txn)
            txn.flush()
        except ChorusError:
            txn.conn.execute("ROLLBACK TO op")
            txn.conn.execute("RELEASE op")
            raise
        txn.conn.execute("RELEASE op")
        assert isinstance(appended, list)
        return value, appended


def _check_size(payload: str, limit: int) -> None:
    # len() counts characters, a lower bound of the UTF-8 size: encode only when close.
    if len(payload) * 4 > limit:
        size = len(payload.encode("utf-8"))
        if size > limit:
            raise EventTooLargeError(size, limit)


# -- the thread ---------------------------------------------------------------------------

_STOP = object()


@dataclass(slots=True)
class _Outcome:
    op: Op
    ok: bool
    value: Any


class Writer:
    """Owns the write connection. :meth:`start` once, :meth:`submit` from any
    thread, :meth:`stop` once (finishes everything queued before it)."""

    def __init__(
        self,
        connect: Connect,
        *,
        redactor: Redactor,
        mirror: JsonlMirror,
        bus: EventBus,
        max_queue: int,
        max_batch: int,
        max_event_bytes: int,
    ) -> None:
        self._connect = connect
        self._redactor = redactor
        self._mirror = mirror
        self._bus = bus
        self._max_batch = max_batch
        self._max_event_bytes = max_event_bytes
        self._queue: queue.Queue[object] = queue.Queue(maxsize=max_queue)
        self._max_queue = max_queue
        self._lock = threading.Lock()
        self._accepting = False
        self._thread = threading.Thread(target=self._run, name=WRITER_THREAD_NAME, daemon=True)
        self._ready: Future[None] = Future()

    def start(self) -> Future[None]:
        """Start the thread; the future resolves once migrations are applied."""
        self._accepting = True
        self._thread.start()
        return self._ready

    def submit(self, op: Op) -> None:
        """Queue ``op``. Raises :class:`StoreQueueFullError` or :class:`StoreClosedError`."""
        with self._lock:
            if not self._accepting:
                raise StoreClosedError("the store is closed")
            try:
                self._queue.put_nowait(op)
            except queue.Full:
                raise StoreQueueFullError(self._max_queue) from None

    def stop(self) -> None:
        """Refuse new operations, finish queued ones, close the connection. Blocks."""
        with self._lock:
            was_accepting, self._accepting = self._accepting, False
        if was_accepting and self._thread.is_alive():
            self._queue.put(_STOP)  # may wait for room: the thread keeps draining
        if self._thread.is_alive():
            self._thread.join()

    # -- thread body -----------------------------------------------------------------

    def _run(self) -> None:
        try:
            conn = self._connect()
        except BaseException as exc:
            self._ready.set_exception(_as_store_error(exc))
            self._fail_queued()
            return
        try:
            try:
                migrate(conn)
            except BaseException as exc:
                self._ready.set_exception(_as_store_error(exc))
                self._fail_queued()
                return
            self._ready.set_result(None)
            self._loop(conn)
        finally:
            conn.close()

    def _fail_queued(self) -> None:
        with self._lock:
            self._accepting = False
        while True:
            try:
                item = self._queue.get_nowait()
            except queue.Empty:
                return
            if isinstance(item, Op):
                error = StoreClosedError("the store failed to open")
                _settle([_Outcome(item, False, error)], self._redactor)

    def _loop(self, conn: sqlite3.Connection) -> None:
        while True:
            batch, stop = self._take_batch()
            if batch:
                try:
                    self._process(conn, batch)
                except Exception as exc:  # a bug must not strand the callers' futures
                    log.exception("store writer: batch of %d operations failed", len(batch))
                    _settle(
                        [_Outcome(op, False, _as_store_error(exc)) for op in batch], self._redactor
                    )
            if stop:
                return

    def _take_batch(self) -> tuple[list[Op], bool]:
        first = self._queue.get()
        if first is _STOP:
            return [], True
        batch = [cast(Op, first)]
        while len(batch) < self._max_batch:
            try:
                item = self._queue.get_nowait()
            except queue.Empty:
                break
            if item is _STOP:
                return batch, True
            batch.append(cast(Op, item))
        return batch, False

    def _process(self, conn: sqlite3.Connection, batch: list[Op]) -> None:
        txn = _Txn(conn, self._redactor, self._max_event_bytes)
        try:
            conn.execute("BEGIN IMMEDIATE")
            outcomes = [self._apply(op, txn) for op in batch]
            txn.flush()
            conn.execute("COMMIT")
        except BaseException as exc:
            if conn.in_transaction:
                with contextlib.suppress(sqlite3.Error):
                    conn.execute("ROLLBACK")
            if not isinstance(exc, sqlite3.Error):
                raise
            error = _write_error(exc)
            _settle([_Outcome(op, False, error) for op in batch], self._redactor)
            return
        self._write_mirror(txn)
        _settle(outcomes, self._redactor)
        self._bus.publish(txn.events)

    @staticmethod
    def _apply(op: Op, txn: _Txn) -> _Outcome:
        # Only ChorusError is the operation's own failure (nothing of it was
        # written); a sqlite3 error escapes and rolls the whole batch back.
        try:
            return _Outcome(op, True, op.apply(txn))
        except ChorusError as exc:
            return _Outcome(op, False, exc)

    def _write_mirror(self, txn: _Txn) -> None:
        try:
            self._mirror.append(txn.mirror_lines)
        except (OSError, ChorusError) as exc:
            # The database committed; the mirror is a convenience copy that
            # rebuild_mirror() restores. Only the path and the error are logged.
            log.warning("store: JSONL mirror not written: %s", self._redactor.redact_text(str(exc)))


def _settle(outcomes: Sequence[_Outcome], redactor: Redactor) -> None:
    """Resolve futures on their own loops (one wake-up per loop); log the
    failures of operations nobody awaits (redacted, like everything logged)."""
    by_loop: dict[asyncio.AbstractEventLoop, list[_Outcome]] = defaultdict(list)
    for outcome in outcomes:
        if outcome.op.loop is None:
            if not outcome.ok:
                reason = redactor.redact_text(str(outcome.value))
                log.warning("store: %s not recorded: %s", outcome.op.describe(), reason)
            continue
        by_loop[outcome.op.loop].append(outcome)
    for loop, items in by_loop.items():
        with contextlib.suppress(RuntimeError):  # the loop is closed: nobody waits
            loop.call_soon_threadsafe(_resolve, items)


def _resolve(outcomes: list[_Outcome]) -> None:
    for outcome in outcomes:
        future = outcome.op.future
        if future is None or future.done():
            continue  # e.g. the caller was cancelled; the write stands
        if outcome.ok:
            future.set_result(outcome.value)
        else:
            future.set_exception(outcome.value)


def _write_error(exc: sqlite3.Error) -> StoreError:
    """The error every operation of a rolled-back batch gets: a full disk is told apart
    (the caller may wait for space and retry the very same write)."""
    message = f"write failed, batch rolled back: {exc}"
    code = getattr(exc, "sqlite_errorcode", None)
    if code is not None and code & 0xFF == sqlite3.SQLITE_FULL:
        return StorageFullError(message)
    return StoreError(message)


def _as_store_error(exc: BaseException) -> ChorusError:
    if isinstance(exc, ChorusError):
        return exc
    return StoreError(f"{type(exc).__name__}: {exc}")
