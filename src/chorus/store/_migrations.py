"""Numbered schema migrations: the SQLite schema, and the one runner of both backends.

``MIGRATIONS[i]`` takes the schema from version ``i`` to ``i + 1`` (the PostgreSQL
list is :mod:`chorus.store._pg_migrations`). Each runs in its own transaction
together with the ``schema_version`` row that records it, so a crash leaves the
database at one version or the next, never in between. Never edit a released
migration: append a new one.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import TYPE_CHECKING

from chorus.store._errors import SchemaVersionError
from chorus.store._query import Query, Stmt, one, run
from chorus.store._schema import CORE, MAILBOX, ROUTINES, SQLITE_SPELLING, WORKTREES, spell

if TYPE_CHECKING:
    from chorus.store._db import Db


_SPELLING = SQLITE_SPELLING


@dataclass(frozen=True, slots=True)
class Migration:
    description: str
    statements: tuple[str, ...]


#: Worker nodes and job leases; shared with the PostgreSQL schema.
NODES_MIGRATION = Migration(
    "worker nodes, job leases and affinity",
    (
        "ALTER TABLE jobs ADD COLUMN node TEXT",
        "ALTER TABLE jobs ADD COLUMN lease_expires_at DOUBLE PRECISION",
        "ALTER TABLE jobs ADD COLUMN affinity TEXT",
        "CREATE INDEX jobs_by_lease ON jobs(state, lease_expires_at)",
        """CREATE TABLE nodes (
            id TEXT PRIMARY KEY,
            host TEXT NOT NULL,
            bodies TEXT NOT NULL DEFAULT '[]',
            started_at DOUBLE PRECISION NOT NULL,
            last_seen DOUBLE PRECISION NOT NULL
        )""",
    ),
)

#: Flags; shared with the PostgreSQL schema.
FLAGS_MIGRATION = Migration(
    "flags: decisions taken with a default, for a person to overrule",
    (
        """CREATE TABLE flags (
            id TEXT PRIMARY KEY,
            job_id TEXT,
            session_id TEXT,
            question TEXT NOT NULL,
            options TEXT NOT NULL DEFAULT '[]',
            default_option TEXT NOT NULL,
            status TEXT NOT NULL,
            choice TEXT,
            reason TEXT,
            decided_by TEXT,
            created_at DOUBLE PRECISION NOT NULL,
            deadline_at DOUBLE PRECISION NOT NULL,
            decided_at DOUBLE PRECISION,
            delivered_at DOUBLE PRECISION,
            delivery TEXT
        )""",
        "CREATE INDEX flags_by_status ON flags(status, deadline_at)",
        "CREATE INDEX flags_by_job ON flags(job_id)",
    ),
)

#: The audit log's anchor (where it stood, outside its own files); shared with PostgreSQL.
AUDIT_ANCHOR_MIGRATION = Migration(
    "audit anchor: each audit log's entry count and last hash, outside its own files",
    (
        """CREATE TABLE audit_anchor (
            log TEXT PRIMARY KEY,
            entries BIGINT NOT NULL,
            head_hash TEXT NOT NULL,
            end_offset BIGINT NOT NULL,
            mac TEXT NOT NULL,
            updated_at DOUBLE PRECISION NOT NULL
        )""",
    ),
)

MIGRATIONS: tuple[Migration, ...] = (
    Migration("sessions, events, raw lines, control requests, jobs", spell(CORE, _SPELLING)),
    NODES_MIGRATION,
    Migration(
        "routines and their firings (one row per routine and scheduled time)",
        spell(ROUTINES, _SPELLING),
    ),
    Migration(
        "worktrees: one git worktree per job that asked for one", spell(WORKTREES, _SPELLING)
    ),
    Migration(
        "team mailboxes: members and messages, at least once with an ack",
        spell(MAILBOX, _SPELLING),
    ),
    FLAGS_MIGRATION,
    AUDIT_ANCHOR_MIGRATION,
)


SQLITE_MIGRATIONS = MIGRATIONS
LATEST_VERSION = len(MIGRATIONS)


# -- the runner (both backends) --------------------------------------------------------------


def migrate(db: Db) -> int:
    """Apply ``db``'s pending migrations (``db`` in autocommit mode); return the version.

    Safe when several processes open the same database: the version is re-read
    under the write lock (SQLite) or the migration lock (PostgreSQL) before each
    step. Raises :class:`SchemaVersionError` when the database is newer than this code.
    """
    while True:
        db.begin()
        try:
            db.lock_schema()
            version = run(db, current_version())
            if version >= len(db.schema):
                db.commit()
                if version > len(db.schema):
                    raise SchemaVersionError(version, len(db.schema))
                return version
            run(db, _apply(version + 1, db.schema[version]))
            db.commit()
        except BaseException:
            db.rollback()
            raise


def current_version() -> Query[int]:
    """The schema version recorded in the database (0 for an empty one)."""
    yield Stmt(
        "CREATE TABLE IF NOT EXISTS schema_version (version INTEGER PRIMARY KEY,"
        " description TEXT NOT NULL, applied_at DOUBLE PRECISION NOT NULL)",
        literal=True,
    )
    row = yield from one("SELECT COALESCE(MAX(version), 0) FROM schema_version")
    return int(row[0])


def _apply(version: int, migration: Migration) -> Query[None]:
    for statement in migration.statements:
        yield Stmt(statement, literal=True)
    yield Stmt(
        "INSERT INTO schema_version (version, description, applied_at) VALUES (?, ?, ?)",
        (version, migration.description, time.time()),
    )
