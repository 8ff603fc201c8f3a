"""The two connection adapters: the only code that calls sqlite3 or psycopg to run
the store's statements (sans-I/O queries, :mod:`chorus.store._query`). The
PostgreSQL one is :mod:`chorus.store._pg_db`, apart so that psycopg loads only
when a PostgreSQL store is used.

Both are synchronous (the store runs them on its writer and reader threads, never
on the event loop) and in autocommit mode: a write transaction is ``BEGIN`` ...
``COMMIT`` issued by the writer, savepoints inside it are plain SQL, so the
writer, the migration runner and every repository are one code for both. What
stays backend-specific is here: how to connect, how a statement runs, and what a
failure means (:meth:`Db.verdict`: retry the batch, wait out an outage, or fail).
"""

from __future__ import annotations

import contextlib
import itertools
import sqlite3
import time
from collections.abc import Callable
from typing import Any, Literal

from chorus.store._dialect import SQLITE, Dialect
from chorus.store._errors import StorageFullError, StoreError
from chorus.store._migrations import SQLITE_MIGRATIONS, Migration
from chorus.store._query import ConstraintError, Notify, Stmt

Verdict = Literal["retry", "outage", "fail"]


class _NeverError(Exception):
    """Raised by nothing: the base adapter knows no constraint errors."""


class Db:
    """A connection of either database (subclasses: :class:`SqliteDb`, :class:`PgDb`)."""

    dialect: Dialect
    schema: tuple[Migration, ...]
    #: ``BEGIN`` of a write transaction (SQLite takes the write lock at once).
    begin_sql = "BEGIN"
    #: The driver's errors.
    errors: tuple[type[Exception], ...] = ()

    def execute(self, stmt: Stmt | Notify) -> Any:
        if isinstance(stmt, Notify):
            return self._notify(stmt)
        sql = stmt.sql if stmt.literal else self.dialect.render(stmt.sql)
        try:
            return self._run(sql, stmt)
        except self._integrity as exc:
            raise ConstraintError(f"constraint failed: {exc}") from exc

    def begin(self) -> None:
        self.execute(Stmt(self.begin_sql, literal=True))

    def commit(self) -> None:
        self.execute(Stmt("COMMIT", literal=True))

    def rollback(self) -> None:
        """Roll back the open transaction, if any (a dead connection: nothing to do)."""
        with contextlib.suppress(Exception):
            self.execute(Stmt("ROLLBACK", literal=True))

    def lock_schema(self) -> None:
        """Make concurrent migrations wait for this one (inside its transaction)."""

    def verdict(self, exc: BaseException) -> Verdict:
        """What a failed batch should do: every error fails it, by default."""
        return "fail"

    def failure(self, exc: BaseException, reason: str) -> StoreError:
        """The error every operation of a failed batch gets (``reason``: redacted)."""
        return StoreError(f"write failed, batch rolled back: {reason}")

    def close(self) -> None:
        raise NotImplementedError

    _integrity: type[Exception] = _NeverError

    def _run(self, sql: str, stmt: Stmt) -> Any:
        raise NotImplementedError

    def _notify(self, note: Notify) -> None:
        return None


class SqliteDb(Db):
    dialect = SQLITE
    schema = SQLITE_MIGRATIONS
    begin_sql = "BEGIN IMMEDIATE"
    errors = (sqlite3.Error,)
    _integrity = sqlite3.IntegrityError

    def __init__(self, conn: sqlite3.Connection) -> None:
        self.conn = conn

    def _run(self, sql: str, stmt: Stmt) -> Any:
        if stmt.fetch == "many":
            self.conn.executemany(sql, stmt.params)
            return None
        cursor = self.conn.execute(sql, stmt.params)
        if stmt.fetch == "count":
            return cursor.rowcount
        found = cursor.fetchall()  # to the end: no statement left half-run
        if stmt.fetch == "one":
            return found[0] if found else None
        return found

    def failure(self, exc: BaseException, reason: str) -> StoreError:
        """A full disk is told apart: the caller may wait for space and retry."""
        error = super().failure(exc, reason)
        code = getattr(exc, "sqlite_errorcode", None)
        if code is not None and code & 0xFF == sqlite3.SQLITE_FULL:
            return StorageFullError(str(error))
        return error

    def close(self) -> None:
        self.conn.close()


#: A reader connection's page cache, KiB (SQLite's default is 2,000 per connection). A
#: reader reads a few sessions' rows; with the default, each of the pool's readers
#: filled 2 MB as the log grew, which a soak saw as the daemon's RSS still growing
#: after thousands of jobs.
READER_CACHE_KIB = 512


#: How long opening a store waits for another opener's switch to WAL, seconds.
WAL_SWITCH_WAIT_S = 30.0


def _enter_wal(conn: sqlite3.Connection) -> None:
    """Switch to WAL, waiting for a concurrent opener: SQLite answers ``locked``
    at once, without its busy timeout, when two processes switch a new file."""
    deadline = time.monotonic() + WAL_SWITCH_WAIT_S
    for attempt in itertools.count():
        try:
            conn.execute("PRAGMA journal_mode=WAL")
            return
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc) or time.monotonic() > deadline:
                raise
            time.sleep(min(0.005 * 2**attempt, 0.2))


def open_sqlite(
    path: Any,
    *,
    writer: bool,
    synchronous: str = "FULL",
    trace: Callable[[str], None] | None = None,
) -> SqliteDb:
    """A connection to the SQLite store at ``path``: WAL, foreign keys, read-only
    unless ``writer``. Readers may be closed from another thread than theirs."""
    conn = sqlite3.connect(path, isolation_level=None, check_same_thread=writer, timeout=30.0)
    try:
        if trace is not None:
            conn.set_trace_callback(trace)
        if writer:
            _enter_wal(conn)
        conn.execute(f"PRAGMA synchronous={synchronous}")
        conn.execute("PRAGMA foreign_keys=ON")
        if not writer:
            conn.execute("PRAGMA query_only=ON")
            conn.execute(f"PRAGMA cache_size=-{READER_CACHE_KIB}")
    except BaseException:
        conn.close()
        raise
    return SqliteDb(conn)
