"""The store's tables, written once and spelled for each database.

Each table's DDL is a template; :func:`spell` fills in what the two databases spell
differently: ``{real}`` and ``{bigint}`` types, the PostgreSQL-only ``ord`` identity
column (SQLite's ``rowid``) and its place in indexes, ``{counters}`` (the session
row's ``last_seq`` / ``last_n``, kept by the PostgreSQL writer), ``{seq_key}``,
``{serial}`` and ``{flag}``. The migrations (:mod:`chorus.store._migrations`,
:mod:`chorus.store._pg_migrations`) group the spelled tables into versions.
"""

from __future__ import annotations

SQLITE_SPELLING = {
    "real": "REAL",
    "bigint": "INTEGER",
    "ord": "",
    "ord_idx": "",
    "counters": "",
    "seq_key": "UNIQUE",
    "serial": "INTEGER PRIMARY KEY AUTOINCREMENT",
    "flag": "INTEGER NOT NULL DEFAULT 1",
}
POSTGRES_SPELLING = {
    "real": "DOUBLE PRECISION",
    "bigint": "BIGINT",
    "ord": "ord BIGINT GENERATED ALWAYS AS IDENTITY,",
    "ord_idx": ", ord",
    "counters": ", last_seq BIGINT NOT NULL DEFAULT 0, last_n BIGINT NOT NULL DEFAULT 0",
    "seq_key": "PRIMARY KEY",
    "serial": "BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY",
    "flag": "BOOLEAN NOT NULL DEFAULT TRUE",
}


def spell(statements: tuple[str, ...], spelling: dict[str, str]) -> tuple[str, ...]:
    """The templates in one database's spelling."""
    return tuple(statement.format_map(spelling) for statement in statements)


CORE = (
    """CREATE TABLE sessions (
        id TEXT PRIMARY KEY,
        {ord}
        body TEXT NOT NULL,
        model TEXT,
        cwd TEXT,
        native_session_id TEXT,
        transport TEXT NOT NULL DEFAULT '{{}}',
        state TEXT NOT NULL,
        created_at {real} NOT NULL,
        updated_at {real} NOT NULL{counters}
    )""",
    "CREATE INDEX sessions_by_created ON sessions(created_at{ord_idx})",
    """CREATE TABLE events (
        session_id TEXT NOT NULL REFERENCES sessions(id),
        seq {bigint} NOT NULL CHECK (seq >= 1),
        ts {real} NOT NULL,
        type TEXT NOT NULL,
        origin TEXT NOT NULL,
        payload TEXT NOT NULL,
        {seq_key} (session_id, seq)
    )""",
    """CREATE TABLE raw_lines (
        session_id TEXT NOT NULL REFERENCES sessions(id),
        n {bigint} NOT NULL CHECK (n >= 1),
        stream TEXT NOT NULL CHECK (stream IN ('stdout', 'stderr', 'stdin')),
        line TEXT NOT NULL,
        ts {real} NOT NULL,
        {seq_key} (session_id, n)
    )""",
    """CREATE TABLE control_requests (
        session_id TEXT NOT NULL REFERENCES sessions(id),
        request_id TEXT NOT NULL,
        {ord}
        subtype TEXT NOT NULL,
        payload TEXT NOT NULL,
        status TEXT NOT NULL,
        response TEXT,
        requested_at {real} NOT NULL,
        responded_at {real},
        PRIMARY KEY (session_id, request_id)
    )""",
    """CREATE TABLE jobs (
        id TEXT PRIMARY KEY,
        {ord}
        session_id TEXT REFERENCES sessions(id),
        body TEXT,
        prompt TEXT NOT NULL,
        state TEXT NOT NULL,
        options TEXT NOT NULL DEFAULT '{{}}',
        result TEXT,
        error TEXT,
        attempts INTEGER NOT NULL DEFAULT 0,
        created_at {real} NOT NULL,
        updated_at {real} NOT NULL,
        started_at {real},
        ended_at {real}
    )""",
    # ord (SQLite: rowid) breaks ties between jobs created in the same clock tick.
    "CREATE INDEX jobs_by_state ON jobs(state, created_at{ord_idx})",
    "CREATE INDEX jobs_by_session ON jobs(session_id)",
)

ROUTINES = (
    """CREATE TABLE routines (
        name TEXT PRIMARY KEY,
        enabled {flag},
        anchor_at {real} NOT NULL,
        updated_at {real} NOT NULL
    )""",
    # The primary key is what makes a firing happen at most once, across every node:
    # the row is inserted in the same transaction as the job it queues.
    """CREATE TABLE routine_firings (
        routine TEXT NOT NULL,
        scheduled_for {real} NOT NULL,
        kind TEXT NOT NULL,
        outcome TEXT NOT NULL,
        job_id TEXT REFERENCES jobs(id),
        detail TEXT NOT NULL DEFAULT '{{}}',
        fired_at {real} NOT NULL,
        PRIMARY KEY (routine, scheduled_for)
    )""",
    "CREATE INDEX routine_firings_by_job ON routine_firings(job_id)",
)

WORKTREES = (
    """CREATE TABLE worktrees (
        job_id TEXT PRIMARY KEY,
        {ord}
        repo TEXT NOT NULL,
        path TEXT NOT NULL UNIQUE,
        branch TEXT NOT NULL,
        base TEXT NOT NULL,
        base_commit TEXT NOT NULL,
        into_branch TEXT NOT NULL,
        state TEXT NOT NULL,
        info TEXT NOT NULL DEFAULT '{{}}',
        created_at {real} NOT NULL,
        updated_at {real} NOT NULL
    )""",
    "CREATE INDEX worktrees_by_repo ON worktrees(repo, created_at{ord_idx})",
)

MAILBOX = (
    """CREATE TABLE team_members (
        team TEXT NOT NULL,
        member TEXT NOT NULL,
        created_at {real} NOT NULL,
        PRIMARY KEY (team, member)
    )""",
    """CREATE TABLE mailbox (
        seq {serial},
        id TEXT NOT NULL UNIQUE,
        team TEXT NOT NULL,
        sender TEXT NOT NULL,
        recipient TEXT NOT NULL,
        kind TEXT NOT NULL,
        body TEXT NOT NULL,
        correlation_id TEXT,
        created_at {real} NOT NULL,
        delivered_at {real},
        delivered_to TEXT,
        acked_at {real},
        attempts INTEGER NOT NULL DEFAULT 0
    )""",
    "CREATE INDEX mailbox_inbox ON mailbox(team, recipient, acked_at, seq)",
    "CREATE INDEX mailbox_by_turn ON mailbox(delivered_to)",
)
