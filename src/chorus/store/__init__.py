"""The durable event log: sessions, events, raw lines, control requests, jobs.

:class:`Store` is the contract; :class:`SqliteStore` the embedded backend,
:class:`PostgresStore` the shared one (``[store] url``; :func:`open_store` picks).
Both are one core: a repository per record kind (sessions, events, jobs, nodes and
leases, routines, worktrees, mailboxes, flags), its SQL written once and spelled
for each database by a small dialect, one writer and one migration runner.
Everything is redacted before it is written, appended events get a gap-free
``seq`` per session, each session has a JSONL mirror, and subscribers follow
sessions live from any ``seq`` with no gap and no duplicate.

The PostgreSQL driver (psycopg) is imported only when PostgreSQL is used: the
names that need it (:class:`PostgresStore`, :func:`copy_sqlite_to_postgres`,
:class:`TargetNotEmptyError`) load on first access.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

from chorus.store._audit_anchor import (
    AnchorCell,
    AuditAnchor,
    PgAnchorCell,
    SqliteAnchorCell,
    audit_anchor_cell,
)
from chorus.store._bus import CATCH_UP_PAGE, DEFAULT_SUBSCRIBER_QUEUE, EventBus, Subscription
from chorus.store._errors import (
    AmbiguousIdError,
    ControlAnsweredError,
    DatabaseDownError,
    DuplicateRecordError,
    FiringExistsError,
    InvalidIdError,
    JobStateError,
    LeaseLostError,
    NoReplayCodecError,
    RedactionError,
    SchemaVersionError,
    SessionExistsError,
    SlowSubscriberError,
    StorageFullError,
    StoreClosedError,
    StoreError,
    StoreQueueFullError,
    UnknownControlRequestError,
    UnknownJobError,
    UnknownRecordError,
    UnknownSessionError,
    UnknownWorktreeError,
)
from chorus.store._factory import open_store
from chorus.store._flags import (
    FLAG_APPROVED,
    FLAG_PENDING,
    FLAG_REJECTED,
    FLAG_TIMED_OUT,
    FlagDecidedError,
    FlagRecord,
    UnknownFlagError,
)
from chorus.store._interface import Store
from chorus.store._mailbox import (
    MESSAGE_KINDS,
    MessageRecord,
    NewMessage,
    UnknownMemberError,
)
from chorus.store._migrations import LATEST_VERSION
from chorus.store._node import WorkerNode, default_node_id
from chorus.store._origin import event_origin
from chorus.store._pg_names import (
    StoreUnreachableError,
    is_postgres_url,
    redact_url,
)
from chorus.store._prefix import resolve_job_id, resolve_session_id
from chorus.store._records import (
    JOB_TERMINAL,
    JOB_TRANSITIONS,
    ORIGIN_CHORUS,
    ORIGIN_CODEC,
    RAW_STREAMS,
    ControlRecord,
    ControlStatus,
    Firing,
    FiringRecord,
    JobRecord,
    JobState,
    Lease,
    NodeRecord,
    RawLine,
    RawStream,
    RawTap,
    RoutineRecord,
    SessionRecord,
    StoreOutage,
    WorktreeRecord,
    check_id,
    new_id,
)
from chorus.store._redact import MIN_SECRET_CHARS, Redactor, looks_secret_name
from chorus.store._repair import RepairReport, repair_store
from chorus.store._replay import (
    CodecFactory,
    Divergence,
    DuplexReplayCodec,
    ReplayCodec,
    ReplayReport,
    register_replay_codec,
    replay,
    replay_codec_factory,
)
from chorus.store._sqlite import DEFAULT_MAX_EVENT_BYTES, SqliteStore, default_db_path
from chorus.store._writer import WRITER_THREAD_NAME

if TYPE_CHECKING:
    from chorus.store._pg_copy import TargetNotEmptyError, copy_sqlite_to_postgres
    from chorus.store._postgres import PostgresStore

#: The names whose modules import psycopg: name -> module, loaded on first access.
_WITH_DRIVER = {
    "PostgresStore": "chorus.store._postgres",
    "TargetNotEmptyError": "chorus.store._pg_copy",
    "copy_sqlite_to_postgres": "chorus.store._pg_copy",
}


def __getattr__(name: str) -> object:
    module = _WITH_DRIVER.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value  # once: later lookups do not come here
    return value


__all__ = [
    "CATCH_UP_PAGE",
    "DEFAULT_MAX_EVENT_BYTES",
    "DEFAULT_SUBSCRIBER_QUEUE",
    "FLAG_APPROVED",
    "FLAG_PENDING",
    "FLAG_REJECTED",
    "FLAG_TIMED_OUT",
    "JOB_TERMINAL",
    "JOB_TRANSITIONS",
    "LATEST_VERSION",
    "MESSAGE_KINDS",
    "MIN_SECRET_CHARS",
    "ORIGIN_CHORUS",
    "ORIGIN_CODEC",
    "RAW_STREAMS",
    "WRITER_THREAD_NAME",
    "AmbiguousIdError",
    "AnchorCell",
    "AuditAnchor",
    "CodecFactory",
    "ControlAnsweredError",
    "ControlRecord",
    "ControlStatus",
    "DatabaseDownError",
    "Divergence",
    "DuplexReplayCodec",
    "DuplicateRecordError",
    "EventBus",
    "Firing",
    "FiringExistsError",
    "FiringRecord",
    "FlagDecidedError",
    "FlagRecord",
    "InvalidIdError",
    "JobRecord",
    "JobState",
    "JobStateError",
    "Lease",
    "LeaseLostError",
    "MessageRecord",
    "NewMessage",
    "NoReplayCodecError",
    "NodeRecord",
    "PgAnchorCell",
    "PostgresStore",
    "RawLine",
    "RawStream",
    "RawTap",
    "RedactionError",
    "Redactor",
    "RepairReport",
    "ReplayCodec",
    "ReplayReport",
    "RoutineRecord",
    "SchemaVersionError",
    "SessionExistsError",
    "SessionRecord",
    "SlowSubscriberError",
    "SqliteAnchorCell",
    "SqliteStore",
    "StorageFullError",
    "Store",
    "StoreClosedError",
    "StoreError",
    "StoreOutage",
    "StoreQueueFullError",
    "StoreUnreachableError",
    "Subscription",
    "TargetNotEmptyError",
    "UnknownControlRequestError",
    "UnknownFlagError",
    "UnknownJobError",
    "UnknownMemberError",
    "UnknownRecordError",
    "UnknownSessionError",
    "UnknownWorktreeError",
    "WorkerNode",
    "WorktreeRecord",
    "audit_anchor_cell",
    "check_id",
    "copy_sqlite_to_postgres",
    "default_db_path",
    "default_node_id",
    "event_origin",
    "is_postgres_url",
    "looks_secret_name",
    "new_id",
    "open_store",
    "redact_url",
    "register_replay_codec",
    "repair_store",
    "replay",
    "replay_codec_factory",
    "resolve_job_id",
    "resolve_session_id",
]
