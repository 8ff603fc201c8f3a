"""Copy an SQLite home's log into a PostgreSQL database (``chorus migrate``).

Rows are copied as stored: the same ids, seqs, timestamps and (already
redacted) JSON text, so the JSONL mirrors stay true and replay still matches.
The target must hold no sessions and no jobs; it is migrated to the current
schema first. Everything is copied in one transaction: an error leaves the
target as it was. Jobs that were ``running`` in the old home (its daemon must
be stopped) are copied as ``queued``, to be claimed again by a worker node.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator, Sequence
from contextlib import closing
from pathlib import Path
from typing import Any

import psycopg

from chorus._errors import UserError
from chorus.store._db import SqliteDb
from chorus.store._errors import StoreError
from chorus.store._jobs import JOB_COLUMNS
from chorus.store._migrations import LATEST_VERSION as SQLITE_VERSION
from chorus.store._migrations import current_version
from chorus.store._query import run
from chorus.store._worktrees import WORKTREE_COLUMNS

#: table -> columns copied (the same names on both sides).
_TABLES: dict[str, tuple[str, ...]] = {
    "sessions": (
        "id",
        "body",
        "model",
        "cwd",
        "native_session_id",
        "transport",
        "state",
        "created_at",
        "updated_at",
    ),
    "events": ("session_id", "seq", "ts", "type", "origin", "payload"),
    "raw_lines": ("session_id", "n", "stream", "line", "ts"),
    "control_requests": (
        "session_id",
        "request_id",
        "subtype",
        "payload",
        "status",
        "response",
        "requested_at",
        "responded_at",
    ),
    # Not a job's node and lease: a running job is copied as queued.
    "jobs": tuple(c for c in JOB_COLUMNS if c not in ("node", "lease_expires_at")),
    "routines": ("name", "enabled", "anchor_at", "updated_at"),
    "routine_firings": (
        "routine",
        "scheduled_for",
        "kind",
        "outcome",
        "job_id",
        "detail",
        "fired_at",
    ),
    "worktrees": WORKTREE_COLUMNS,
}
#: SQLite order of rows within a table (insertion order, like ``ord`` on PostgreSQL).
_ORDER = {"events": "session_id, seq", "raw_lines": "session_id, n"}


class TargetNotEmptyError(StoreError, UserError):
    """The target database already holds sessions or jobs."""


def copy_sqlite_to_postgres(source: Path, conn: psycopg.Connection[Any]) -> dict[str, int]:
    """Copy every table of the SQLite database at ``source`` into ``conn``'s
    database (already migrated); return the rows copied per table."""
    counts: dict[str, int] = {}
    with closing(sqlite3.connect(f"file:{source}?mode=ro", uri=True)) as lite, conn.transaction():
        _check_versions(lite)
        _check_empty(conn)
        for table, columns in _TABLES.items():
            counts[table] = _copy_table(lite, conn, table, columns)
        conn.execute(
            "UPDATE sessions s SET last_seq = COALESCE((SELECT MAX(seq) FROM events e"
            " WHERE e.session_id = s.id), 0), last_n = COALESCE((SELECT MAX(n) FROM raw_lines r"
            " WHERE r.session_id = s.id), 0)"
        )
        conn.execute("UPDATE jobs SET state = 'queued', started_at = NULL WHERE state = 'running'")
    return counts


def _check_versions(lite: sqlite3.Connection) -> None:
    found = run(SqliteDb(lite), current_version()) if _has_table(lite, "schema_version") else 0
    if found != SQLITE_VERSION:
        raise StoreError(
            f"the SQLite database is at schema version {found}, this Chorus copies version"
            f" {SQLITE_VERSION}: open it once with this Chorus (any command), then migrate"
        )


def _has_table(lite: sqlite3.Connection, name: str) -> bool:
    query = "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?"
    return lite.execute(query, (name,)).fetchone() is not None


def _check_empty(conn: psycopg.Connection[Any]) -> None:
    cur = conn.execute("SELECT (SELECT COUNT(*) FROM sessions), (SELECT COUNT(*) FROM jobs)")
    sessions, jobs = cur.fetchone() or (0, 0)
    if sessions or jobs:
        raise TargetNotEmptyError(
            f"the target database already holds {sessions} sessions and {jobs} jobs:"
            " migrate into an empty database"
        )


def _copy_table(
    lite: sqlite3.Connection, conn: psycopg.Connection[Any], table: str, columns: Sequence[str]
) -> int:
    names = ", ".join(columns)
    order = _ORDER.get(table, "rowid")
    rows = lite.execute(f"SELECT {names} FROM {table} ORDER BY {order}")  # fixed names only
    copied = 0
    with conn.cursor().copy(f"COPY {table} ({names}) FROM STDIN".encode()) as copy:
        for row in _batched(rows):
            copy.write_row(row)
            copied += 1
    return copied


def _batched(cursor: sqlite3.Cursor) -> Iterator[tuple[Any, ...]]:
    while rows := cursor.fetchmany(1000):
        yield from rows
