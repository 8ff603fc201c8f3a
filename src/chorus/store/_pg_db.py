"""The PostgreSQL connection adapter (:class:`chorus.store._db.Db` for psycopg).

Its own module so that importing the store does not import psycopg: only a
PostgreSQL store, the audit anchor on one and ``chorus migrate`` load it.
"""

from __future__ import annotations

from typing import Any

import psycopg
from psycopg import errors as pg_errors

from chorus.store._db import Db, Verdict
from chorus.store._dialect import POSTGRES
from chorus.store._pg_migrations import MIGRATION_LOCK, PG_MIGRATIONS
from chorus.store._query import Notify, Stmt

PgConn = psycopg.Connection[tuple[Any, ...]]

_RETRYABLE = (pg_errors.DeadlockDetected, pg_errors.SerializationFailure)


class PgDb(Db):
    dialect = POSTGRES
    schema = PG_MIGRATIONS
    errors = (psycopg.Error,)
    _integrity = pg_errors.IntegrityError

    def __init__(self, conn: PgConn) -> None:
        self.conn = conn

    def _run(self, sql: str, stmt: Stmt) -> Any:
        query = sql.encode()
        if stmt.fetch == "many":
            with self.conn.cursor() as cursor:
                cursor.executemany(query, stmt.params)
            return None
        cursor = self.conn.execute(query, stmt.params or None)
        if stmt.fetch == "count":
            return cursor.rowcount
        if stmt.fetch == "one":
            return cursor.fetchone()
        return cursor.fetchall()

    def _notify(self, note: Notify) -> None:
        self.conn.execute("SELECT pg_notify(%s, %s)", (note.channel, note.payload))

    def lock_schema(self) -> None:
        self.conn.execute("SELECT pg_advisory_xact_lock(%s)", (MIGRATION_LOCK,))

    def verdict(self, exc: BaseException) -> Verdict:
        if isinstance(exc, _RETRYABLE):
            return "retry"
        return "outage" if is_outage(exc) else "fail"

    def close(self) -> None:
        self.conn.close()


def is_outage(exc: BaseException) -> bool:
    """The database could not be reached or went away (retry later), as opposed
    to refusing the statements (fail now)."""
    if isinstance(exc, OSError):
        return True
    if isinstance(exc, psycopg.OperationalError):
        state = exc.sqlstate
        return state is None or state.startswith(("08", "57P"))
    return False


def connect_pg(url: str, *, timeout_s: float, name: str = "chorus-store") -> PgDb:
    """A new autocommit connection to ``url``; psycopg's error when it cannot be made."""
    conn = psycopg.connect(
        url, autocommit=True, connect_timeout=int(timeout_s), application_name=name[:63]
    )
    return PgDb(conn)
