"""Numbered schema migrations for the PostgreSQL store.

Same rules and the same runner as the SQLite ones (:mod:`chorus.store._migrations`):
``MIGRATIONS[i]`` takes the schema from version ``i`` to ``i + 1``, each in its own
transaction with the ``schema_version`` row that records it; never edit a released
one. Several daemons may start at once against one database: a transaction-scoped
advisory lock (:data:`MIGRATION_LOCK`) makes them migrate one after the other.

Differences from SQLite, on purpose:

* ``sessions`` carries ``last_seq`` / ``last_n`` counters. Appends lock the
  session row and bump them (see :mod:`chorus.store._pg_writer`).
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

#: Key of the advisory lock held while migrating (any fixed 64-bit number).
MIGRATION_LOCK = 0x63686F7275730001

MIGRATIONS: tuple[Migration, ...] = (
    Migration(
        "sessions, events, raw lines, control requests, jobs",
        (
            """CREATE TABLE sessions (
                id TEXT PRIMARY KEY,
                ord BIGINT GENERATED ALWAYS AS IDENTITY,
                body TEXT NOT NULL,
                model TEXT,
                cwd TEXT,
                native_session_id TEXT,
                transport TEXT NOT NULL DEFAULT '{}',
                state TEXT NOT NULL,
                created_at DOUBLE PRECISION NOT NULL,
                updated_at DOUBLE PRECISION NOT NULL,
                last_seq BIGINT NOT NULL DEFAULT 0,
                last_n BIGINT NOT NULL DEFAULT 0
            )""",
            "CREATE INDEX sessions_by_created ON sessions(created_at, ord)",
            """CREATE TABLE events (
                session_id TEXT NOT NULL REFERENCES sessions(id),
                seq BIGINT NOT NULL CHECK (seq >= 1),
                ts DOUBLE PRECISION NOT NULL,
                type TEXT NOT NULL,
                origin TEXT NOT NULL,
                payload TEXT NOT NULL,
                PRIMARY KEY (session_id, seq)
            )""",
            """CREATE TABLE raw_lines (
                session_id TEXT NOT NULL REFERENCES sessions(id),
                n BIGINT NOT NULL CHECK (n >= 1),
                stream TEXT NOT NULL CHECK (stream IN ('stdout', 'stderr', 'stdin')),
                line TEXT NOT NULL,
                ts DOUBLE PRECISION NOT NULL,
                PRIMARY KEY (session_id, n)
            )""",
            """CREATE TABLE control_requests (
                session_id TEXT NOT NULL REFERENCES sessions(id),
                request_id TEXT NOT NULL,
                ord BIGINT GENERATED ALWAYS AS IDENTITY,
                subtype TEXT NOT NULL,
                payload TEXT NOT NULL,
                status TEXT NOT NULL,
                response TEXT,
                requested_at DOUBLE PRECISION NOT NULL,
                responded_at DOUBLE PRECISION,
                PRIMARY KEY (session_id, request_id)
            )""",
            """CREATE TABLE jobs (
                id TEXT PRIMARY KEY,
                ord BIGINT GENERATED ALWAYS AS IDENTITY,
                session_id TEXT REFERENCES sessions(id),
                body TEXT,
                prompt TEXT NOT NULL,
                state TEXT NOT NULL,
                options TEXT NOT NULL DEFAULT '{}',
                result TEXT,
                error TEXT,
                attempts INTEGER NOT NULL DEFAULT 0,
                created_at DOUBLE PRECISION NOT NULL,
                updated_at DOUBLE PRECISION NOT NULL,
                started_at DOUBLE PRECISION,
                ended_at DOUBLE PRECISION
            )""",
            "CREATE INDEX jobs_by_state ON jobs(state, created_at, ord)",
            "CREATE INDEX jobs_by_session ON jobs(session_id)",
        ),
    ),
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
        (
            """CREATE TABLE routines (
                name TEXT PRIMARY KEY,
                enabled BOOLEAN NOT NULL DEFAULT TRUE,
                anchor_at DOUBLE PRECISION NOT NULL,
                updated_at DOUBLE PRECISION NOT NULL
            )""",
            # As on SQLite, the primary key makes a firing happen at most once, across
            # every node: the row is inserted in the transaction that queues the job.
            """CREATE TABLE routine_firings (
                routine TEXT NOT NULL,
                scheduled_for DOUBLE PRECISION NOT NULL,
                kind TEXT NOT NULL,
                outcome TEXT NOT NULL,
                job_id TEXT REFERENCES jobs(id),
                detail TEXT NOT NULL DEFAULT '{}',
                fired_at DOUBLE PRECISION NOT NULL,
                PRIMARY KEY (routine, scheduled_for)
            )""",
            "CREATE INDEX routine_firings_by_job ON routine_firings(job_id)",
            """CREATE TABLE worktrees (
                job_id TEXT PRIMARY KEY,
                ord BIGINT GENERATED ALWAYS AS IDENTITY,
                repo TEXT NOT NULL,
                path TEXT NOT NULL UNIQUE,
                branch TEXT NOT NULL,
                base TEXT NOT NULL,
                base_commit TEXT NOT NULL,
                into_branch TEXT NOT NULL,
                state TEXT NOT NULL,
                info TEXT NOT NULL DEFAULT '{}',
                created_at DOUBLE PRECISION NOT NULL,
                updated_at DOUBLE PRECISION NOT NULL
            )""",
            "CREATE INDEX worktrees_by_repo ON worktrees(repo, created_at, ord)",
            """CREATE TABLE provider_health (
                key TEXT PRIMARY KEY,
                data TEXT NOT NULL,
                node TEXT NOT NULL,
                updated_at DOUBLE PRECISION NOT NULL
            )""",
        ),
    ),
    Migration(
        "team mailboxes: members and messages, at least once with an ack",
        (
            """CREATE TABLE team_members (
                team TEXT NOT NULL,
                member TEXT NOT NULL,
                created_at DOUBLE PRECISION NOT NULL,
                PRIMARY KEY (team, member)
            )""",
            """CREATE TABLE mailbox (
                seq BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
                id TEXT NOT NULL UNIQUE,
                team TEXT NOT NULL,
                sender TEXT NOT NULL,
                recipient TEXT NOT NULL,
                kind TEXT NOT NULL,
                body TEXT NOT NULL,
                correlation_id TEXT,
                created_at DOUBLE PRECISION NOT NULL,
                delivered_at DOUBLE PRECISION,
                delivered_to TEXT,
                acked_at DOUBLE PRECISION,
                attempts INTEGER NOT NULL DEFAULT 0
            )""",
            "CREATE INDEX mailbox_inbox ON mailbox(team, recipient, acked_at, seq)",
            "CREATE INDEX mailbox_by_turn ON mailbox(delivered_to)",
        ),
    ),
    FLAGS_MIGRATION,
    AUDIT_ANCHOR_MIGRATION,
)

PG_MIGRATIONS = MIGRATIONS
LATEST_VERSION = len(MIGRATIONS)
