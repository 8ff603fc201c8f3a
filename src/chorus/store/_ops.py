"""The writer's operations and the transaction they share, as sans-I/O queries.

One batch is one transaction: it first locks the rows of the sessions it appends
to (``{lock}``: sorted by id, so two writers always lock in the same order; on
SQLite the one writer already serializes) and reads their last ``seq`` and ``n``
(:data:`~chorus.store._dialect.Dialect` ``{counters}``). Appends are stamped and
buffered, then inserted together at :meth:`Txn.flush`; on PostgreSQL the counters
are written back to the session rows, so per session the seq order *is* the
commit order across processes (a tailer that has read up to N and sees N+2 knows
N+1 does not exist yet, rather than "committed later").

Failure isolation: an operation that raises a :class:`ChorusError` fails alone
(generic operations run inside a SAVEPOINT; appends check everything before they
buffer rows); any other error fails (or retries) the whole batch.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from chorus._errors import ChorusError, EventTooLargeError
from chorus.events import Event
from chorus.store._dialect import Dialect
from chorus.store._errors import UnknownSessionError
from chorus.store._query import ConstraintError, Query, QueryFn, Stmt, many, notify, rows
from chorus.store._redact import Redactor

#: NOTIFY channel of committed appends: payload ``"<writer> <session> <first> <last>"``.
EVENTS_CHANNEL = "chorus_events"


class BatchError(Exception):
    """A buffered insert failed: the whole batch fails (not one operation)."""


@dataclass(slots=True)
class _Cursor:
    """A locked session's counters while the transaction is open."""

    body: str
    first_seq: int
    next_seq: int
    next_n: int
    saved: tuple[int, int]


@dataclass(slots=True)
class Txn:
    """What the operations of one batch share while the transaction is open."""

    dialect: Dialect
    redactor: Redactor
    max_event_bytes: int
    cursors: dict[str, _Cursor] = field(default_factory=dict)
    mirror_lines: dict[str, list[str]] = field(default_factory=lambda: defaultdict(list))
    events: list[Event] = field(default_factory=list)
    event_rows: list[tuple[Any, ...]] = field(default_factory=list)
    raw_rows: list[tuple[Any, ...]] = field(default_factory=list)

    def lock(self, session_ids: Sequence[str]) -> Query[None]:
        """Lock the sessions' rows in id order and load their counters."""
        if not session_ids:
            return
        found = yield from rows(
            "SELECT s.id, s.body, {counters} FROM sessions s"
            " WHERE s.id IN (JSON_ITEMS(:ids)) ORDER BY s.id{lock}",
            {"ids": json.dumps(sorted(set(session_ids)))},
        )
        for sid, body, seq, n in found:
            self.cursors[sid] = _Cursor(body, seq + 1, seq + 1, n + 1, (seq, n))

    def cursor(self, session_id: str) -> Query[_Cursor]:
        if session_id not in self.cursors:
            yield from self.lock([session_id])  # e.g. created earlier in this very batch
        cursor = self.cursors.get(session_id)
        if cursor is None:
            raise UnknownSessionError(session_id)
        return cursor

    def flush(self) -> Query[None]:
        """Insert the buffered rows (and store the counters). A failure here is the
        batch's, never one operation's."""
        event_rows, raw_rows = self.event_rows, self.raw_rows
        self.event_rows, self.raw_rows = [], []
        try:
            yield from many(_INSERT_EVENT, event_rows)
            yield from many(_INSERT_RAW, raw_rows)
            if self.dialect.counters:
                yield from many(_SAVE_COUNTERS, self._changed_counters())
        except ConstraintError as exc:
            raise BatchError(str(exc)) from exc

    def _changed_counters(self) -> list[tuple[int, int, str]]:
        changed = []
        for sid, cursor in self.cursors.items():
            now = (cursor.next_seq - 1, cursor.next_n - 1)
            if now != cursor.saved:
                changed.append((now[0], now[1], sid))
                cursor.saved = now
        return changed

    def notify(self, writer_id: str) -> Query[None]:
        """Tell other processes which seqs this batch adds (delivered at commit)."""
        for sid, cursor in self.cursors.items():
            if cursor.next_seq > cursor.first_seq:
                payload = f"{writer_id} {sid} {cursor.first_seq} {cursor.next_seq - 1}"
                yield from notify(EVENTS_CHANNEL, payload)


_INSERT_EVENT = (
    "INSERT INTO events (session_id, seq, ts, type, origin, payload) VALUES (?, ?, ?, ?, ?, ?)"
)
_INSERT_RAW = "INSERT INTO raw_lines (session_id, n, stream, line, ts) VALUES (?, ?, ?, ?, ?)"
_SAVE_COUNTERS = "UPDATE sessions SET last_seq = ?, last_n = ? WHERE id = ?"


# -- operations ----------------------------------------------------------------------


class Op:
    """One queued write. ``future`` lives on the caller's loop (None: nobody waits)."""

    __slots__ = ("future", "loop")

    def __init__(self, loop: asyncio.AbstractEventLoop | None) -> None:
        self.loop = loop
        self.future: asyncio.Future[Any] | None = loop.create_future() if loop else None

    def session(self) -> str | None:
        """The session whose row this operation appends to, if any."""
        return None

    def apply(self, txn: Txn) -> Query[Any]:
        raise NotImplementedError

    def describe(self) -> str:
        return type(self).__name__


class AppendOp(Op):
    """Redact, stamp and buffer events of one session with consecutive seqs.
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

    def session(self) -> str | None:
        return self.session_id

    def _stamp(self, event: Event, cursor: _Cursor, offset: int) -> Event:
        update = {"session_id": self.session_id, "seq": cursor.next_seq + offset}
        if not event.body:
            update["body"] = cursor.body
        return event.model_copy(update=update)

    def apply(self, txn: Txn) -> Query[list[Event] | Event]:
        cursor = yield from txn.cursor(self.session_id)
        stamped: list[Event] = []
        payloads: list[str] = []
        for offset, event in enumerate(self.events):
            # Redacted before stamping, so the stamped ids are never touched.
            final = self._stamp(txn.redactor.redact_event(event), cursor, offset)
            payloads.append(final.model_dump_json())
            _check_size(payloads[-1], txn.max_event_bytes)
            stamped.append(final)
        # Nothing is buffered until every event passed, so a failure writes nothing.
        for event, payload in zip(stamped, payloads, strict=True):
            row = (self.session_id, event.seq, event.ts, event.type, self.origin, payload)
            txn.event_rows.append(row)
        cursor.next_seq += len(stamped)
        txn.mirror_lines[self.session_id].extend(payloads)
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

    def apply(self, txn: Txn) -> Query[int]:
        cursor = yield from txn.cursor(self.session_id)
        n = cursor.next_n
        line = txn.redactor.redact_line(self.line)
        if txn.dialect.nul_free:  # one NUL would fail the whole batch
            line = line.replace("\x00", "\ufffd")
        txn.raw_rows.append((self.session_id, n, self.stream, line, self.ts))
        cursor.next_n += 1
        return n

    def describe(self) -> str:
        return f"raw {self.stream} line of session {self.session_id}"


class CallOp(Op):
    """Any other write: the query ``fn()`` runs inside a SAVEPOINT, so a
    :class:`ChorusError` it raises undoes only its own changes."""

    __slots__ = ("fn",)

    def __init__(self, loop: asyncio.AbstractEventLoop | None, fn: QueryFn[Any]) -> None:
        super().__init__(loop)
        self.fn = fn

    def apply(self, txn: Txn) -> Query[Any]:
        yield from txn.flush()  # earlier appends first: the savepoint must not cover them
        result = yield from savepoint(self.fn())
        return result


class EndOp(Op):
    """Change a row and append events to the log in one transaction: both or neither.

    The query ``fn()`` runs first and returns ``(session_id, value)``; then ``events``
    are appended to that session, all inside one SAVEPOINT. The result is ``(value,
    stamped)``. A :class:`ChorusError` from either half undoes both (e.g. an illegal
    job state, an event over the size cap)."""

    __slots__ = ("events", "fn", "origin")

    def __init__(
        self,
        loop: asyncio.AbstractEventLoop | None,
        fn: QueryFn[tuple[str, Any]],
        events: Sequence[Event],
        origin: str,
    ) -> None:
        super().__init__(loop)
        self.fn = fn
        self.events = events
        self.origin = origin

    def apply(self, txn: Txn) -> Query[tuple[Any, list[Event]]]:
        yield from txn.flush()
        result: tuple[Any, list[Event]] = yield from savepoint(self._both(txn))
        return result

    def _both(self, txn: Txn) -> Query[tuple[Any, list[Event]]]:
        session_id, value = yield from self.fn()
        appended = yield from AppendOp(None, session_id, self.events, self.origin).apply(txn)
        yield from txn.flush()
        assert isinstance(appended, list)
        return value, appended


def savepoint(query: Query[Any]) -> Query[Any]:
    """Run ``query`` so that a :class:`ChorusError` it raises undoes only its changes."""
    yield Stmt("SAVEPOINT op", literal=True)
    try:
        result = yield from query
    except ChorusError:
        yield Stmt("ROLLBACK TO SAVEPOINT op", literal=True)
        yield Stmt("RELEASE SAVEPOINT op", literal=True)
        raise
    yield Stmt("RELEASE SAVEPOINT op", literal=True)
    return result


def _check_size(payload: str, limit: int) -> None:
    # len() counts characters, a lower bound of the UTF-8 size: encode only when close.
    if len(payload) * 4 > limit:
        size = len(payload.encode("utf-8"))
        if size > limit:
            raise EventTooLargeError(size, limit)


# -- one batch ---------------------------------------------------------------------------


@dataclass(slots=True)
class Outcome:
    op: Op
    ok: bool
    value: Any


def batch_query(batch: Sequence[Op], txn: Txn, writer_id: str) -> Query[list[Outcome]]:
    """Everything one batch does inside its transaction, up to (not including) COMMIT."""
    yield from txn.lock([sid for op in batch if (sid := op.session()) is not None])
    outcomes = []
    for op in batch:
        outcomes.append((yield from _apply(op, txn)))
    yield from txn.flush()
    yield from txn.notify(writer_id)
    return outcomes


def _apply(op: Op, txn: Txn) -> Query[Outcome]:
    # Only ChorusError is the operation's own failure (nothing of it was written);
    # any other error escapes and fails the whole batch.
    try:
        value = yield from op.apply(txn)
    except ChorusError as exc:
        return Outcome(op, False, exc)
    return Outcome(op, True, value)
