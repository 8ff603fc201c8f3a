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

#: ``typing`` is not imported at run time (the names load on first use).
TYPE_CHECKING = False

if TYPE_CHECKING:
    from typing import Any

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
    from chorus.store._pg_copy import TargetNotEmptyError, copy_sqlite_to_postgres
    from chorus.store._pg_names import (
        StoreUnreachableError,
        is_postgres_url,
        redact_url,
    )
    from chorus.store._postgres import PostgresStore
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

#: Each public name's private module (and its name there): loaded on first use.
_LAZY: dict[str, tuple[str, str]] = {
    "AnchorCell": ("chorus.store._audit_anchor", "AnchorCell"),
    "AuditAnchor": ("chorus.store._audit_anchor", "AuditAnchor"),
    "PgAnchorCell": ("chorus.store._audit_anchor", "PgAnchorCell"),
    "SqliteAnchorCell": ("chorus.store._audit_anchor", "SqliteAnchorCell"),
    "audit_anchor_cell": ("chorus.store._audit_anchor", "audit_anchor_cell"),
    "CATCH_UP_PAGE": ("chorus.store._bus", "CATCH_UP_PAGE"),
    "DEFAULT_SUBSCRIBER_QUEUE": ("chorus.store._bus", "DEFAULT_SUBSCRIBER_QUEUE"),
    "EventBus": ("chorus.store._bus", "EventBus"),
    "Subscription": ("chorus.store._bus", "Subscription"),
    "AmbiguousIdError": ("chorus.store._errors", "AmbiguousIdError"),
    "ControlAnsweredError": ("chorus.store._errors", "ControlAnsweredError"),
    "DatabaseDownError": ("chorus.store._errors", "DatabaseDownError"),
    "DuplicateRecordError": ("chorus.store._errors", "DuplicateRecordError"),
    "FiringExistsError": ("chorus.store._errors", "FiringExistsError"),
    "InvalidIdError": ("chorus.store._errors", "InvalidIdError"),
    "JobStateError": ("chorus.store._errors", "JobStateError"),
    "LeaseLostError": ("chorus.store._errors", "LeaseLostError"),
    "NoReplayCodecError": ("chorus.store._errors", "NoReplayCodecError"),
    "RedactionError": ("chorus.store._errors", "RedactionError"),
    "SchemaVersionError": ("chorus.store._errors", "SchemaVersionError"),
    "SessionExistsError": ("chorus.store._errors", "SessionExistsError"),
    "SlowSubscriberError": ("chorus.store._errors", "SlowSubscriberError"),
    "StorageFullError": ("chorus.store._errors", "StorageFullError"),
    "StoreClosedError": ("chorus.store._errors", "StoreClosedError"),
    "StoreError": ("chorus.store._errors", "StoreError"),
    "StoreQueueFullError": ("chorus.store._errors", "StoreQueueFullError"),
    "UnknownControlRequestError": ("chorus.store._errors", "UnknownControlRequestError"),
    "UnknownJobError": ("chorus.store._errors", "UnknownJobError"),
    "UnknownRecordError": ("chorus.store._errors", "UnknownRecordError"),
    "UnknownSessionError": ("chorus.store._errors", "UnknownSessionError"),
    "UnknownWorktreeError": ("chorus.store._errors", "UnknownWorktreeError"),
    "open_store": ("chorus.store._factory", "open_store"),
    "FLAG_APPROVED": ("chorus.store._flags", "FLAG_APPROVED"),
    "FLAG_PENDING": ("chorus.store._flags", "FLAG_PENDING"),
    "FLAG_REJECTED": ("chorus.store._flags", "FLAG_REJECTED"),
    "FLAG_TIMED_OUT": ("chorus.store._flags", "FLAG_TIMED_OUT"),
    "FlagDecidedError": ("chorus.store._flags", "FlagDecidedError"),
    "FlagRecord": ("chorus.store._flags", "FlagRecord"),
    "UnknownFlagError": ("chorus.store._flags", "UnknownFlagError"),
    "Store": ("chorus.store._interface", "Store"),
    "MESSAGE_KINDS": ("chorus.store._mailbox", "MESSAGE_KINDS"),
    "MessageRecord": ("chorus.store._mailbox", "MessageRecord"),
    "NewMessage": ("chorus.store._mailbox", "NewMessage"),
    "UnknownMemberError": ("chorus.store._mailbox", "UnknownMemberError"),
    "LATEST_VERSION": ("chorus.store._migrations", "LATEST_VERSION"),
    "WorkerNode": ("chorus.store._node", "WorkerNode"),
    "default_node_id": ("chorus.store._node", "default_node_id"),
    "event_origin": ("chorus.store._origin", "event_origin"),
    "StoreUnreachableError": ("chorus.store._pg_names", "StoreUnreachableError"),
    "is_postgres_url": ("chorus.store._pg_names", "is_postgres_url"),
    "redact_url": ("chorus.store._pg_names", "redact_url"),
    "resolve_job_id": ("chorus.store._prefix", "resolve_job_id"),
    "resolve_session_id": ("chorus.store._prefix", "resolve_session_id"),
    "JOB_TERMINAL": ("chorus.store._records", "JOB_TERMINAL"),
    "JOB_TRANSITIONS": ("chorus.store._records", "JOB_TRANSITIONS"),
    "ORIGIN_CHORUS": ("chorus.store._records", "ORIGIN_CHORUS"),
    "ORIGIN_CODEC": ("chorus.store._records", "ORIGIN_CODEC"),
    "RAW_STREAMS": ("chorus.store._records", "RAW_STREAMS"),
    "ControlRecord": ("chorus.store._records", "ControlRecord"),
    "ControlStatus": ("chorus.store._records", "ControlStatus"),
    "Firing": ("chorus.store._records", "Firing"),
    "FiringRecord": ("chorus.store._records", "FiringRecord"),
    "JobRecord": ("chorus.store._records", "JobRecord"),
    "JobState": ("chorus.store._records", "JobState"),
    "Lease": ("chorus.store._records", "Lease"),
    "NodeRecord": ("chorus.store._records", "NodeRecord"),
    "RawLine": ("chorus.store._records", "RawLine"),
    "RawStream": ("chorus.store._records", "RawStream"),
    "RawTap": ("chorus.store._records", "RawTap"),
    "RoutineRecord": ("chorus.store._records", "RoutineRecord"),
    "SessionRecord": ("chorus.store._records", "SessionRecord"),
    "StoreOutage": ("chorus.store._records", "StoreOutage"),
    "WorktreeRecord": ("chorus.store._records", "WorktreeRecord"),
    "check_id": ("chorus.store._records", "check_id"),
    "new_id": ("chorus.store._records", "new_id"),
    "MIN_SECRET_CHARS": ("chorus.store._redact", "MIN_SECRET_CHARS"),
    "Redactor": ("chorus.store._redact", "Redactor"),
    "looks_secret_name": ("chorus.store._redact", "looks_secret_name"),
    "RepairReport": ("chorus.store._repair", "RepairReport"),
    "repair_store": ("chorus.store._repair", "repair_store"),
    "CodecFactory": ("chorus.store._replay", "CodecFactory"),
    "Divergence": ("chorus.store._replay", "Divergence"),
    "DuplexReplayCodec": ("chorus.store._replay", "DuplexReplayCodec"),
    "ReplayCodec": ("chorus.store._replay", "ReplayCodec"),
    "ReplayReport": ("chorus.store._replay", "ReplayReport"),
    "register_replay_codec": ("chorus.store._replay", "register_replay_codec"),
    "replay": ("chorus.store._replay", "replay"),
    "replay_codec_factory": ("chorus.store._replay", "replay_codec_factory"),
    "DEFAULT_MAX_EVENT_BYTES": ("chorus.store._sqlite", "DEFAULT_MAX_EVENT_BYTES"),
    "SqliteStore": ("chorus.store._sqlite", "SqliteStore"),
    "default_db_path": ("chorus.store._sqlite", "default_db_path"),
    "WRITER_THREAD_NAME": ("chorus.store._writer", "WRITER_THREAD_NAME"),
    "TargetNotEmptyError": ("chorus.store._pg_copy", "TargetNotEmptyError"),
    "copy_sqlite_to_postgres": ("chorus.store._pg_copy", "copy_sqlite_to_postgres"),
    "PostgresStore": ("chorus.store._postgres", "PostgresStore"),
}


def __getattr__(name: str) -> Any:
    """``chorus.store.<name>``: import its private module on first use, then keep it here."""
    try:
        module, attr = _LAZY[name]
    except KeyError:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}") from None
    value = getattr(importlib.import_module(module), attr)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
