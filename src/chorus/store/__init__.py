"""The durable event log: sessions, events, raw lines, control requests, jobs.

:class:`Store` is the contract; :class:`SqliteStore` the embedded backend,
:class:`PostgresStore` the shared one (``[store] url``; :func:`open_store` picks).
Everything is redacted before it is written, appended events get a gap-free
``seq`` per session, each session has a JSONL mirror, and subscribers follow
sessions live from any ``seq`` with no gap and no duplicate.
"""

from chorus.store._bus import CATCH_UP_PAGE, DEFAULT_SUBSCRIBER_QUEUE, EventBus, Subscription
from chorus.store._errors import (
    AmbiguousIdError,
    ControlAnsweredError,
    DatabaseDownError,
    DuplicateRecordError,
    InvalidIdError,
    JobStateError,
    NoReplayCodecError,
    RedactionError,
    SchemaVersionError,
    SessionExistsError,
    SlowSubscriberError,
    StoreClosedError,
    StoreError,
    StoreQueueFullError,
    UnknownControlRequestError,
    UnknownJobError,
    UnknownRecordError,
    UnknownSessionError,
)
from chorus.store._factory import open_store
from chorus.store._interface import (
    JOB_TERMINAL,
    JOB_TRANSITIONS,
    ORIGIN_CHORUS,
    ORIGIN_CODEC,
    RAW_STREAMS,
    ControlRecord,
    ControlStatus,
    JobRecord,
    JobState,
    NodeRecord,
    RawLine,
    RawStream,
    RawTap,
    SessionRecord,
    Store,
    check_id,
    new_id,
)
from chorus.store._migrations import LATEST_VERSION
from chorus.store._node import WorkerNode, default_node_id
from chorus.store._origin import event_origin
from chorus.store._pg_copy import TargetNotEmptyError, copy_sqlite_to_postgres
from chorus.store._postgres import (
    PostgresStore,
    StoreUnreachableError,
    is_postgres_url,
    redact_url,
)
from chorus.store._prefix import resolve_job_id, resolve_session_id
from chorus.store._redact import MIN_SECRET_CHARS, Redactor, looks_secret_name
from chorus.store._replay import (
    CodecFactory,
    Divergence,
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
    "JOB_TERMINAL",
    "JOB_TRANSITIONS",
    "LATEST_VERSION",
    "MIN_SECRET_CHARS",
    "ORIGIN_CHORUS",
    "ORIGIN_CODEC",
    "RAW_STREAMS",
    "WRITER_THREAD_NAME",
    "AmbiguousIdError",
    "CodecFactory",
    "ControlAnsweredError",
    "ControlRecord",
    "ControlStatus",
    "DatabaseDownError",
    "Divergence",
    "DuplicateRecordError",
    "EventBus",
    "InvalidIdError",
    "JobRecord",
    "JobState",
    "JobStateError",
    "NoReplayCodecError",
    "NodeRecord",
    "PostgresStore",
    "RawLine",
    "RawStream",
    "RawTap",
    "RedactionError",
    "Redactor",
    "ReplayCodec",
    "ReplayReport",
    "SchemaVersionError",
    "SessionExistsError",
    "SessionRecord",
    "SlowSubscriberError",
    "SqliteStore",
    "Store",
    "StoreClosedError",
    "StoreError",
    "StoreQueueFullError",
    "StoreUnreachableError",
    "Subscription",
    "TargetNotEmptyError",
    "UnknownControlRequestError",
    "UnknownJobError",
    "UnknownRecordError",
    "UnknownSessionError",
    "WorkerNode",
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
    "replay",
    "replay_codec_factory",
    "resolve_job_id",
    "resolve_session_id",
]
