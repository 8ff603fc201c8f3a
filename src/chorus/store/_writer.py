"""The one writer of both backends: a thread that owns the write connection.

Callers enqueue operations (:mod:`chorus.store._ops`) on a bounded queue and await
a future. The thread takes everything queued (up to ``max_batch``) and runs it in
one transaction (group commit: one fsync covers many appends). After the commit it
writes the JSONL mirror, settles the callers' futures (on their own event loops)
and publishes the events to the bus, in that order: a caller that sees its append
resolved can read it back from the database and from the mirror.

What a failed batch does is the connection's call (:meth:`Db.verdict`): on SQLite
it fails every operation of the batch with :class:`StoreError`
(:class:`StorageFullError` for a full disk); on PostgreSQL a deadlock retries it,
and a lost database is waited out (for ``outage_s``; the queue bounded meanwhile,
past it :class:`DatabaseDownError`), reconnecting, and asking the batch marker
whether a batch lost during its COMMIT went through.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import queue
import threading
import time
from collections import defaultdict
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from dataclasses import dataclass, field

from chorus._errors import ChorusError
from chorus.store._bus import EventBus
from chorus.store._db import Db
from chorus.store._errors import (
    DatabaseDownError,
    StoreClosedError,
    StoreError,
    StoreQueueFullError,
)
from chorus.store._migrations import migrate
from chorus.store._mirror import JsonlMirror
from chorus.store._ops import Op, Outcome, Txn, batch_query
from chorus.store._query import Query, count, one, run
from chorus.store._redact import Redactor

log = logging.getLogger("chorus.store")

WRITER_THREAD_NAME = "chorus-store-writer"
#: Attempts of a batch that hit a deadlock or a serialization failure.
BATCH_ATTEMPTS = 5
#: While the database is unreachable the writer retries the batch at hand (callers
#: keep waiting, new writes queue up to ``max_queue``) for at most this long.
DEFAULT_OUTAGE_S = 300.0
MAX_BACKOFF_S = 5.0

Connect = Callable[[], Db]
_STOP = object()


@dataclass(slots=True)
class _Attempt:
    """One try of a batch. ``at_commit`` is set once everything but COMMIT ran: a
    connection lost after that may or may not have committed."""

    number: int
    txn: Txn | None = None
    outcomes: list[Outcome] = field(default_factory=list)
    at_commit: bool = False


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
        writer_id: str = "",
        outage_s: float = DEFAULT_OUTAGE_S,
    ) -> None:
        self._connect = connect
        self._redactor = redactor
        self._mirror = mirror
        self._bus = bus
        self._max_batch = max_batch
        self._max_event_bytes = max_event_bytes
        self._max_queue = max_queue
        self._writer_id = writer_id
        self._outage_s = outage_s
        self._queue: queue.Queue[object] = queue.Queue()
        self._lock = threading.Lock()
        self._accepting = False
        self._in_flight = 0
        self._batches = 0
        self._db: Db | None = None
        self._live = False
        #: (since, reason) while the database is unreachable.
        self._down: tuple[float, str] | None = None
        self._stopping = threading.Event()
        self._thread = threading.Thread(target=self._run, name=WRITER_THREAD_NAME, daemon=True)
        self._ready: Future[None] = Future()

    def start(self) -> Future[None]:
        """Start the thread; the future resolves once migrations are applied (or
        fails with the error of the first connection or migration)."""
        self._accepting = True
        self._thread.start()
        return self._ready

    def submit(self, op: Op) -> None:
        """Queue ``op``. Raises :class:`StoreQueueFullError` (:class:`DatabaseDownError`
        while the database is away) or :class:`StoreClosedError`."""
        with self._lock:
            if not self._accepting:
                raise StoreClosedError("the store is closed")
            if self._queue.qsize() + self._in_flight >= self._max_queue:
                raise self._full()
            self._queue.put_nowait(op)

    def _full(self) -> StoreQueueFullError:
        if self._down is None:
            return StoreQueueFullError(self._max_queue)
        since, reason = self._down
        return DatabaseDownError(self._max_queue, time.monotonic() - since, reason)

    def outage(self) -> tuple[float, str, int, int] | None:
        """(seconds down, reason, writes waiting, bound) while the database is away."""
        down = self._down
        if down is None:
            return None
        waiting = self._queue.qsize() + self._in_flight
        return time.monotonic() - down[0], down[1], waiting, self._max_queue

    def stop(self) -> None:
        """Refuse new operations, finish queued ones, close the connection. Blocks."""
        with self._lock:
            was_accepting, self._accepting = self._accepting, False
        self._stopping.set()
        if was_accepting and self._thread.is_alive():
            self._queue.put(_STOP)
        if self._thread.is_alive():
            self._thread.join()

    # -- thread body -----------------------------------------------------------------

    def _run(self) -> None:
        try:
            self._db = self._connect()
            self._live = True
            migrate(self._db)
        except BaseException as exc:
            self._ready.set_exception(exc)
            self._fail_queued()
            self._close()
            return
        self._ready.set_result(None)
        try:
            self._loop()
        finally:
            self._close()

    def _close(self) -> None:
        if self._db is not None and self._live:
            with contextlib.suppress(Exception):
                self._db.close()
        self._live = False

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
                _settle([Outcome(item, False, error)], self._redactor)

    def _loop(self) -> None:
        while True:
            batch, stop = self._take_batch()
            if batch:
                self._in_flight = len(batch)
                try:
                    self._process(batch)
                except Exception as exc:  # a bug must not strand the callers' futures
                    log.exception("store writer: batch of %d operations failed", len(batch))
                    self._fail(batch, exc)
                finally:
                    self._in_flight = 0
            if stop:
                return

    def _take_batch(self) -> tuple[list[Op], bool]:
        first = self._queue.get()
        if not isinstance(first, Op):
            return [], True
        batch = [first]
        while len(batch) < self._max_batch:
            try:
                item = self._queue.get_nowait()
            except queue.Empty:
                break
            if not isinstance(item, Op):
                return batch, True
            batch.append(item)
        return batch, False

    # -- one batch, retried through deadlocks and outages -------------------------------

    def _process(self, batch: list[Op]) -> None:
        self._batches += 1
        attempt = _Attempt(self._batches)
        conflicts, since = 0, 0.0
        while True:
            try:
                if not (attempt.at_commit and self._committed(attempt.number)):
                    attempt = _Attempt(attempt.number)
                    self._transaction(batch, attempt)
                break
            except Exception as exc:
                verdict = self._verdict(exc)
                conflicts += verdict == "retry"
                if verdict == "retry" and conflicts < BATCH_ATTEMPTS:
                    continue
                since = since or time.monotonic()
                if verdict != "outage" or not self._wait_out(since, exc):
                    self._fail(batch, exc)
                    return
        self._back(since)
        assert attempt.txn is not None
        self._write_mirror(attempt.txn)
        _settle(attempt.outcomes, self._redactor)
        self._bus.publish(attempt.txn.events)

    def _transaction(self, batch: list[Op], attempt: _Attempt) -> None:
        db = self._connection()
        txn = Txn(db.dialect, self._redactor, self._max_event_bytes)
        db.begin()
        try:
            attempt.outcomes = run(db, batch_query(batch, txn, self._writer_id))
            if db.dialect.marks:
                run(db, _mark(self._writer_id, attempt.number))
            attempt.txn, attempt.at_commit = txn, True
            db.commit()
        except BaseException:
            db.rollback()
            raise

    def _connection(self) -> Db:
        if self._db is None or not self._live:
            self._db = self._connect()
            self._live = True
        return self._db

    def _verdict(self, exc: BaseException) -> str:
        verdict = "outage" if self._db is None else self._db.verdict(exc)
        if verdict == "outage":
            self._close()  # reconnect for the next try
        return verdict

    def _committed(self, number: int) -> bool:
        """After a connection lost during COMMIT: did that batch go through?"""
        row = run(self._connection(), _marked(self._writer_id, number))
        return row is not None

    def _wait_out(self, since: float, exc: BaseException) -> bool:
        """Sleep before the next try; False when it is time to give up."""
        waited = time.monotonic() - since
        if waited > self._outage_s or not self._accepting:
            self._down = None
            return False
        reason = self._redactor.redact_text(str(exc).strip() or type(exc).__name__)
        self._down = (since, reason.splitlines()[0] if reason else "unreachable")
        if waited == 0 or int(waited) % 30 == 0:
            log.warning("store: database unreachable (%s); writes wait", reason)
        self._stopping.wait(min(MAX_BACKOFF_S, 0.1 * 2 ** min(10, int(waited))))
        return True

    def _back(self, since: float) -> None:
        if since and self._down is not None:
            self._down = None
            log.warning("store: database reachable again after %.1fs", time.monotonic() - since)

    def _fail(self, batch: Sequence[Op], exc: BaseException) -> None:
        reason = self._redactor.redact_text(f"{exc}" or type(exc).__name__)
        if isinstance(exc, ChorusError) and not isinstance(exc, StoreError):
            error: ChorusError = exc
        elif self._db is not None:
            error = self._db.failure(exc, reason)
        else:
            error = StoreError(f"write failed: {reason}")
        _settle([Outcome(op, False, error) for op in batch], self._redactor)

    def _write_mirror(self, txn: Txn) -> None:
        if not any(txn.mirror_lines.values()):
            return
        try:
            self._mirror.append(txn.mirror_lines)
        except (OSError, ChorusError) as exc:
            # The database committed; the mirror is a convenience copy that
            # rebuild_mirror() restores. Only the path and the error are logged.
            log.warning("store: JSONL mirror not written: %s", self._redactor.redact_text(str(exc)))


def _mark(writer_id: str, number: int) -> Query[None]:
    """Record this batch (and forget the previous ones): after a connection lost
    during COMMIT, :func:`_marked` tells whether it went through."""
    yield from count(
        "DELETE FROM writer_batches WHERE writer = ? AND batch < ?", (writer_id, number)
    )
    yield from count(
        "INSERT INTO writer_batches (writer, batch) VALUES (?, ?)", (writer_id, number)
    )


def _marked(writer_id: str, number: int) -> Query[object]:
    row = yield from one(
        "SELECT 1 FROM writer_batches WHERE writer = ? AND batch = ?", (writer_id, number)
    )
    return row


def _settle(outcomes: Sequence[Outcome], redactor: Redactor) -> None:
    """Resolve futures on their own loops (one wake-up per loop); log the
    failures of operations nobody awaits (redacted, like everything logged)."""
    by_loop: dict[asyncio.AbstractEventLoop, list[Outcome]] = defaultdict(list)
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


def _resolve(outcomes: list[Outcome]) -> None:
    for outcome in outcomes:
        future = outcome.op.future
        if future is None or future.done():
            continue  # e.g. the caller was cancelled; the write stands
        if outcome.ok:
            future.set_result(outcome.value)
        else:
            future.set_exception(outcome.value)
