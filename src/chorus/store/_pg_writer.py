"""The PostgreSQL store's writer: one asyncio task, group commit, row-locked seqs.

Like the SQLite writer (:mod:`chorus.store._writer`), callers queue operations
and await futures; the task takes everything queued (up to ``max_batch``) and
runs it in one transaction. After the commit it writes the JSONL mirror, settles
the futures and publishes the events to the in-process bus, in that order.

Per-session ``seq`` (and raw-line ``n``) across processes: a batch first locks
the row of every session it appends to (``SELECT ... FOR UPDATE``, sorted by id
so two writers always lock in the same order), reads the ``last_seq`` /
``last_n`` counters kept on that row, stamps its events, and writes the new
counters back before it commits. A second writer appending to the same session
waits on the row lock until the first commits, so per session the seq order *is*
the commit order: a tailer that has read up to seq N and next sees N+2 knows
N+1 does not exist yet rather than "committed later". Gap-free seqs and no
late-committed events, at the price of serializing appends *per session* (not
per database: other sessions' appends run in parallel). Transaction ids with
``pg_snapshot_xmin`` were the alternative; they are needed for a tailer of one
global sequence across sessions, which Chorus does not offer (its cross-session
stream is live only), so the simpler row lock wins.

Failure isolation: an operation that raises a :class:`ChorusError` fails alone
(generic operations run inside a SAVEPOINT; appends check everything before
they buffer rows). A deadlock or serialization failure retries the whole batch
(nothing of it was committed); any other database error fails every operation
of the batch with :class:`StoreError`.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
import time
from collections import defaultdict, deque
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import psycopg
from psycopg import errors as pg_errors
from psycopg_pool import AsyncConnectionPool, PoolTimeout

from chorus._errors import ChorusError, EventTooLargeError
from chorus.events import Event
from chorus.store._bus import EventBus
from chorus.store._errors import (
    DatabaseDownError,
    StoreClosedError,
    StoreError,
    StoreQueueFullError,
    UnknownSessionError,
)
from chorus.store._mirror import JsonlMirror
from chorus.store._redact import Redactor

log = logging.getLogger("chorus.store")

Conn = psycopg.AsyncConnection[tuple[Any, ...]]
#: NOTIFY channel of committed appends: payload ``"<writer> <session> <first> <last>"``.
EVENTS_CHANNEL = "chorus_events"
#: Attempts of a batch that hit a deadlock or a serialization failure.
BATCH_ATTEMPTS = 5
#: While the database is unreachable the writer retries the batch at hand (callers
#: keep waiting, new writes queue up to ``max_queue``) for at most this long.
DEFAULT_OUTAGE_S = 300.0
MAX_BACKOFF_S = 5.0


@dataclass(slots=True)
class _Cursor:
    """A locked session's counters while the transaction is open."""

    body: str
    first_seq: int
    next_seq: int
    next_n: int
    saved: tuple[int, int] = (0, 0)


@dataclass(slots=True)
class Txn:
    """What the operations of one batch share while the transaction is open."""

    conn: Conn
    redactor: Redactor
    max_event_bytes: int
    cursors: dict[str, _Cursor] = field(default_factory=dict)
    mirror_lines: dict[str, list[str]] = field(default_factory=lambda: defaultdict(list))
    events: list[Event] = field(default_factory=list)
    event_rows: list[tuple[Any, ...]] = field(default_factory=list)
    raw_rows: list[tuple[Any, ...]] = field(default_factory=list)

    async def lock(self, session_ids: Sequence[str]) -> None:
        """Lock the sessions' rows in id order and load their counters."""
        if not session_ids:
            return
        cur = await self.conn.execute(
            "SELECT id, body, last_seq, last_n FROM sessions WHERE id = ANY(%s)"
            " ORDER BY id FOR UPDATE",
            (sorted(set(session_ids)),),
        )
        for sid, body, last_seq, last_n in await cur.fetchall():
            self.cursors[sid] = _Cursor(body, last_seq + 1, last_seq + 1, last_n + 1)
            self.cursors[sid].saved = (last_seq, last_n)

    async def cursor(self, session_id: str) -> _Cursor:
        if session_id not in self.cursors:
            await self.lock([session_id])  # e.g. created earlier in this very batch
        cursor = self.cursors.get(session_id)
        if cursor is None:
            raise UnknownSessionError(session_id)
        return cursor

    async def flush(self) -> None:
        """Insert the buffered rows and store the counters (one statement per
        table: arrays unnested server-side). A failure here is a batch failure."""
        if self.event_rows:
            await self.conn.execute(
                "INSERT INTO events (session_id, seq, ts, type, origin, payload)"
                " SELECT * FROM unnest(%s::text[], %s::bigint[], %s::float8[], %s::text[],"
                " %s::text[], %s::text[])",
                _columns(self.event_rows, 6),
            )
            self.event_rows.clear()
        if self.raw_rows:
            await self.conn.execute(
                "INSERT INTO raw_lines (session_id, n, stream, line, ts)"
                " SELECT * FROM unnest(%s::text[], %s::bigint[], %s::text[], %s::text[],"
                " %s::float8[])",
                _columns(self.raw_rows, 5),
            )
            self.raw_rows.clear()
        await self._save_counters()

    async def _save_counters(self) -> None:
        changed = []
        for sid, cursor in self.cursors.items():
            now = (cursor.next_seq - 1, cursor.next_n - 1)
            if now != cursor.saved:
                changed.append((sid, now[0], now[1]))
                cursor.saved = now
        if changed:
            await self.conn.execute(
                "UPDATE sessions s SET last_seq = c.seq, last_n = c.n FROM unnest("
                "%s::text[], %s::bigint[], %s::bigint[]) AS c(id, seq, n) WHERE s.id = c.id",
                _columns(changed, 3),
            )

    async def notify(self, writer_id: str) -> None:
        """Tell other processes which seqs this batch adds (delivered at commit)."""
        for sid, cursor in self.cursors.items():
            if cursor.next_seq > cursor.first_seq:
                payload = f"{writer_id} {sid} {cursor.first_seq} {cursor.next_seq - 1}"
                await self.conn.execute("SELECT pg_notify(%s, %s)", (EVENTS_CHANNEL, payload))


# -- operations ----------------------------------------------------------------------


class Op:
    """One queued write. ``future`` is None when nobody waits (fire and forget)."""

    __slots__ = ("future",)

    def __init__(self, loop: asyncio.AbstractEventLoop | None) -> None:
        self.future: asyncio.Future[Any] | None = loop.create_future() if loop else None

    def session(self) -> str | None:
        """The session whose row this operation appends to, if any."""
        return None

    async def apply(self, txn: Txn) -> Any:
        raise NotImplementedError

    def describe(self) -> str:
        return type(self).__name__


class AppendOp(Op):
    """Redact, stamp and buffer events of one session with consecutive seqs."""

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

    def session(self) -> str | None:
        return self.session_id

    async def apply(self, txn: Txn) -> list[Event] | Event:
        cursor = await txn.cursor(self.session_id)
        stamped: list[Event] = []
        rows = []
        for offset, event in enumerate(self.events):
            update = {"session_id": self.session_id, "seq": cursor.next_seq + offset}
            clean = txn.redactor.redact_event(event)
            if not clean.body:
                update["body"] = cursor.body
            final = clean.model_copy(update=update)
            payload = final.model_dump_json()
            _check_size(payload, txn.max_event_bytes)
            stamped.append(final)
            rows.append((self.session_id, final.seq, final.ts, final.type, self.origin, payload))
        txn.event_rows.extend(rows)  # only once every event passed: all or nothing
        cursor.next_seq += len(rows)
        txn.mirror_lines[self.session_id].extend(row[5] for row in rows)
        txn.events.extend(stamped)
        return stamped[0] if self.single else stamped


class RawOp(Op):
    """Redact and buffer one raw line; the result is its ``n``."""

    __slots__ = ("line", "session_id", "stream", "ts")

    def __init__(
        self, loop: asyncio.AbstractEventLoop | None, session_id: str, stream: str, line: str
    ) -> None:
        super().__init__(loop)
        self.session_id = session_id
        self.stream = stream
        self.line = line
        self.ts = time.time()

    def session(self) -> str | None:
        return self.session_id

    async def apply(self, txn: Txn) -> int:
        cursor = await txn.cursor(self.session_id)
        n = cursor.next_n
        # PostgreSQL text cannot hold NUL; one such byte would fail the whole batch.
        line = txn.redactor.redact_line(self.line).replace("\x00", "\ufffd")
        txn.raw_rows.append((self.session_id, n, self.stream, line, self.ts))
        cursor.next_n += 1
        return n

    def describe(self) -> str:
        return f"raw {self.stream} line of session {self.session_id}"


class CallOp(Op):
    """Any other write: ``fn(conn)`` runs inside a SAVEPOINT."""

    __slots__ = ("fn",)

    def __init__(
        self, loop: asyncio.AbstractEventLoop | None, fn: Callable[[Conn], Awaitable[Any]]
    ) -> None:
        super().__init__(loop)
        self.fn = fn

    async def apply(self, txn: Txn) -> Any:
        await txn.flush()  # earlier appends first, and visible to fn
        try:
            async with txn.conn.transaction():
                return await self.fn(txn.conn)
        except pg_errors.IntegrityError as exc:
            raise StoreError(f"constraint failed: {exc}") from exc


class EndOp(Op):
    """End a job (``fn`` moves it to its terminal state and returns its session) and
    append its end event, inside one SAVEPOINT: both, or neither."""

    __slots__ = ("event", "fn", "origin")

    def __init__(
        self,
        loop: asyncio.AbstractEventLoop | None,
        fn: Callable[[Conn], Awaitable[tuple[str, Any]]],
        event: Event,
        origin: str,
    ) -> None:
        super().__init__(loop)
        self.fn = fn
        self.event = event
        self.origin = origin

    async def apply(self, txn: Txn) -> tuple[Any, Event]:
        await txn.flush()
        try:
            async with txn.conn.transaction():
                session_id, job = await self.fn(txn.conn)
                append = AppendOp(None, session_id, (self.event,), self.origin, single=True)
                stamped = await append.apply(txn)
        except pg_errors.IntegrityError as exc:
            raise StoreError(f"constraint failed: {exc}") from exc
        assert not isinstance(stamped, list)  # Event is a union: no isinstance on it
        return job, stamped


def _columns(rows: Sequence[tuple[Any, ...]], width: int) -> list[list[Any]]:
    """Rows to columns, for ``unnest``."""
    return [list(column) for column in zip(*rows, strict=True)] if rows else [[]] * width


def _check_size(payload: str, limit: int) -> None:
    if len(payload) * 4 > limit:
        size = len(payload.encode("utf-8"))
        if size > limit:
            raise EventTooLargeError(size, limit)


# -- the task ---------------------------------------------------------------------------


def is_outage(exc: BaseException) -> bool:
    """The database could not be reached or went away (retry later), as opposed
    to refusing the statements (fail now)."""
    if isinstance(exc, PoolTimeout | OSError):
        return True
    if isinstance(exc, psycopg.OperationalError):
        state = exc.sqlstate
        return state is None or state.startswith(("08", "57P"))
    return False


@dataclass(slots=True)
class _Attempt:
    """One try of a batch. ``at_commit`` is set once everything but COMMIT ran: a
    connection lost after that may or may not have committed."""

    number: int
    txn: Txn | None = None
    outcomes: list[_Outcome] = field(default_factory=list)
    at_commit: bool = False


@dataclass(slots=True)
class _Outcome:
    op: Op
    ok: bool
    value: Any


_RETRYABLE = (pg_errors.DeadlockDetected, pg_errors.SerializationFailure)


class PgWriter:
    """Owns the order of writes. :meth:`start` once on the loop, :meth:`submit`
    on the loop's thread (:meth:`submit_threadsafe` from others), :meth:`stop` once."""

    def __init__(
        self,
        pool: AsyncConnectionPool[Conn],
        *,
        writer_id: str,
        redactor: Redactor,
        mirror: JsonlMirror,
        bus: EventBus,
        max_queue: int,
        max_batch: int,
        max_event_bytes: int,
        outage_s: float = DEFAULT_OUTAGE_S,
    ) -> None:
        self._pool = pool
        self._outage_s = outage_s
        self._batches = 0
        self._in_flight = 0  # operations of the batch being written
        #: (since, reason) while the database is unreachable.
        self._down: tuple[float, str] | None = None
        self._writer_id = writer_id
        self._redactor = redactor
        self._mirror = mirror
        self._bus = bus
        self._max_queue = max_queue
        self._max_batch = max_batch
        self._max_event_bytes = max_event_bytes
        self._queue: deque[Op] = deque()
        self._wake = asyncio.Event()
        self._accepting = False
        self._task: asyncio.Task[None] | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread = 0

    def start(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._thread = threading.get_ident()
        self._accepting = True
        self._task = asyncio.create_task(self._run(), name="chorus-pg-writer")

    def outage(self) -> tuple[float, str, int, int] | None:
        """(seconds down, reason, writes waiting, bound) while the database is away."""
        if self._down is None:
            return None
        since, reason = self._down
        waiting = len(self._queue) + self._in_flight
        return time.monotonic() - since, reason, waiting, self._max_queue

    def submit(self, op: Op) -> None:
        """Queue ``op``. Raises :class:`StoreQueueFullError` or :class:`StoreClosedError`."""
        if threading.get_ident() != self._thread:
            self.submit_threadsafe(op)
            return
        if not self._accepting:
            raise StoreClosedError("the store is closed")
        if len(self._queue) + self._in_flight >= self._max_queue:
            if self._down is not None:
                since, reason = self._down
                raise DatabaseDownError(self._max_queue, time.monotonic() - since, reason)
            raise StoreQueueFullError(self._max_queue)
        self._queue.append(op)
        self._wake.set()

    def submit_threadsafe(self, op: Op) -> None:
        """From a thread other than the loop's: queued without waiting; a refusal
        (full, closed) is logged, since the caller cannot be told."""
        if self._loop is None or not self._accepting:
            raise StoreClosedError("the store is closed")
        with contextlib.suppress(RuntimeError):
            self._loop.call_soon_threadsafe(self._submit_logged, op)

    def _submit_logged(self, op: Op) -> None:
        try:
            self.submit(op)
        except ChorusError as exc:
            log.warning("store: %s not recorded: %s", op.describe(), exc)

    async def stop(self) -> None:
        """Refuse new operations, finish queued ones."""
        self._accepting = False
        self._wake.set()
        if self._task is not None:
            await self._task

    async def _run(self) -> None:
        while True:
            if not self._queue:
                if not self._accepting:
                    return
                self._wake.clear()
                await self._wake.wait()
                continue
            batch = [self._queue.popleft() for _ in range(min(len(self._queue), self._max_batch))]
            self._in_flight = len(batch)
            try:
                await self._process(batch)
            except Exception as exc:  # a bug must not strand the callers' futures
                log.exception("store writer: batch of %d operations failed", len(batch))
                self._settle([_Outcome(op, False, StoreError(str(exc))) for op in batch])
            finally:
                self._in_flight = 0

    async def _process(self, batch: list[Op]) -> None:
        self._batches += 1
        attempt = _Attempt(self._batches)
        conflicts, outage_since = 0, 0.0
        while True:
            try:
                if attempt.at_commit and await self._committed(attempt.number):
                    break  # lost while committing, but it did commit
                attempt = _Attempt(attempt.number)
                await self._transaction(batch, attempt)
                break
            except _RETRYABLE as exc:
                conflicts += 1
                if conflicts >= BATCH_ATTEMPTS:
                    self._fail(batch, exc)
                    return
            except (psycopg.Error, PoolTimeout, OSError) as exc:
                outage_since = outage_since or time.monotonic()
                if not is_outage(exc) or not await self._wait_out(outage_since, exc):
                    self._fail(batch, exc)
                    return
        if outage_since:
            self._down = None
            log.warning(
                "store: database reachable again after %.1fs", time.monotonic() - outage_since
            )
        assert attempt.txn is not None
        await self._write_mirror(attempt.txn)
        self._settle(attempt.outcomes)
        self._bus.publish(attempt.txn.events)

    async def _wait_out(self, since: float, exc: BaseException) -> bool:
        """Sleep before the next try; False when it is time to give up."""
        waited = time.monotonic() - since
        if waited > self._outage_s or not self._accepting:
            self._down = None
            return False
        reason = self._redactor.redact_text(str(exc).strip() or type(exc).__name__)
        self._down = (since, reason.splitlines()[0] if reason else "unreachable")
        if waited == 0 or int(waited) % 30 == 0:
            log.warning(
                "store: database unreachable (%s); %d writes wait", reason, len(self._queue)
            )
        await asyncio.sleep(min(MAX_BACKOFF_S, 0.1 * 2 ** min(10, int(waited))))
        return True

    async def _transaction(self, batch: list[Op], attempt: _Attempt) -> None:
        async with self._pool.connection() as conn, conn.transaction():
            txn = Txn(conn, self._redactor, self._max_event_bytes)
            await txn.lock([sid for op in batch if (sid := op.session()) is not None])
            attempt.outcomes = [await self._apply(op, txn) for op in batch]
            async with conn.pipeline():  # the last writes in one round trip
                await txn.flush()
                await txn.notify(self._writer_id)
                await self._mark(conn, attempt.number)
            attempt.txn, attempt.at_commit = txn, True

    async def _mark(self, conn: Conn, number: int) -> None:
        """Record this batch (and forget the previous ones): after a connection lost
        during COMMIT, :meth:`_committed` tells whether it went through."""
        await conn.execute(
            "DELETE FROM writer_batches WHERE writer = %s AND batch < %s", (self._writer_id, number)
        )
        await conn.execute(
            "INSERT INTO writer_batches (writer, batch) VALUES (%s, %s)", (self._writer_id, number)
        )

    async def _committed(self, number: int) -> bool:
        async with self._pool.connection() as conn:
            cur = await conn.execute(
                "SELECT 1 FROM writer_batches WHERE writer = %s AND batch = %s",
                (self._writer_id, number),
            )
            return await cur.fetchone() is not None

    @staticmethod
    async def _apply(op: Op, txn: Txn) -> _Outcome:
        try:
            return _Outcome(op, True, await op.apply(txn))
        except ChorusError as exc:
            return _Outcome(op, False, exc)

    def _fail(self, batch: list[Op], exc: BaseException) -> None:
        reason = self._redactor.redact_text(f"{type(exc).__name__}: {exc}")
        error = StoreError(f"write failed, batch rolled back: {reason}")
        self._settle([_Outcome(op, False, error) for op in batch])

    async def _write_mirror(self, txn: Txn) -> None:
        if not any(txn.mirror_lines.values()):
            return
        try:
            await asyncio.to_thread(self._mirror.append, txn.mirror_lines)
        except (OSError, ChorusError) as exc:
            log.warning("store: JSONL mirror not written: %s", self._redactor.redact_text(str(exc)))

    def _settle(self, outcomes: Sequence[_Outcome]) -> None:
        for outcome in outcomes:
            future = outcome.op.future
            if future is None:
                if not outcome.ok:
                    reason = self._redactor.redact_text(str(outcome.value))
                    log.warning("store: %s not recorded: %s", outcome.op.describe(), reason)
            elif not future.done():
                if outcome.ok:
                    future.set_result(outcome.value)
                else:
                    future.set_exception(outcome.value)
