"""Numbered schema migrations for the PostgreSQL store.

Same rules and the same runner as the SQLite ones (:mod:`chorus.store._migrations`):
``MIGRATIONS[i]`` takes the schema from version ``i`` to ``i + 1``, each in its own
transaction with the ``schema_version`` row that records it; never edit a released
one. Several daemons may start at once against one database: a transaction-scoped
advisory lock (:data:`MIGRATION_LOCK`) makes them migrate one after the other.

Differences from SQLite, on purpose:

* ``sessions`` carries ``last_seq`` / ``last_n`` counters. Appends lock the
  session row and bump them (see :mod:`chorus.store._ops`).
* ``ord`` identity columns give a stable insertion order (SQLite's ``rowid``).
* JSON fields stay ``TEXT``: the stored text is exactly what the JSONL mirror
  holds, and a JSON ``\\u0000`` (legal in redacted output) is refused by JSONB.
"""

from __future__ import annotations

from chorus.store._migrations import (
    AUDIT_ANCHOR_MIGRATION,
    FLAGS_MIGRATION,
    NODES_MIGRATION,
    Migration,
)
from chorus.store._schema import CORE, MAILBOX, POSTGRES_SPELLING, ROUTINES, WORKTREES, spell

#: Key of the advisory lock held while migrating (any fixed 64-bit number).
MIGRATION_LOCK = 0x63686F7275730001
_SPELLING = POSTGRES_SPELLING
_PROVIDER_HEALTH = """CREATE TABLE provider_health (
    key TEXT PRIMARY KEY,
    data TEXT NOT NULL,
    node TEXT NOT NULL,
    updated_at DOUBLE PRECISION NOT NULL
)"""

MIGRATIONS: tuple[Migration, ...] = (
    Migration("sessions, events, raw lines, control requests, jobs", spell(CORE, _SPELLING)),
    NODES_MIGRATION,
    Migration(
        "writer batch markers (was a batch committed when its connection was lost?)",
        (
            """CREATE TABLE writer_batches (
                writer TEXT NOT NULL,
                batch BIGINT NOT NULL,
                PRIMARY KEY (writer, batch)
            )""",
        ),
    ),
    Migration(
        "routines, firings, worktrees, provider health (one of everything in the cluster)",
        (*spell(ROUTINES, _SPELLING), *spell(WORKTREES, _SPELLING), _PROVIDER_HEALTH),
    ),
    Migration(
        "team mailboxes: members and messages, at least once with an ack",
        spell(MAILBOX, _SPELLING),
    ),
    FLAGS_MIGRATION,
    AUDIT_ANCHOR_MIGRATION,
)

PG_MIGRATIONS = MIGRATIONS
LATEST_VERSION = len(MIGRATIONS)
