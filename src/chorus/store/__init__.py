"""The durable event log: sessions, events, raw lines, control requests, jobs.

:class:`Store` is the contract (SQLite now, PostgreSQL later); :class:`SqliteStore`
the embedded backend. Everything is redacted before it is written, appended
events get a gap-free ``seq`` per session, each session has a JSONL mirror, and
subscribers follow sessions live from any ``seq`` with no gap and no duplicate.
"""

from chorus.store._bus import CATCH_UP_PAGE, DEFAULT_SUBSCRIBER_QUEUE, EventBus, Subscription
from chorus.store._errors import (
    ControlAnsweredError,
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
    RawLine,
    RawStream,
    RawTap,
    SessionRecord,
    Store,
    check_id,
    new_id,
)
from chorus.store._migrations import LATEST_VERSION
from chorus.store._origin import event_origin
from chorus.store._redact import MIN_SECRET_CHARS, Redactor, looks_secret_name
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
    "JOB_TERMINAL",
    "JOB_TRANSITIONS",
    "LATEST_VERSION",
    "MIN_SECRET_CHARS",
    "ORIGIN_CHORUS",
    "ORIGIN_CODEC",
    "RAW_STREAMS",
    "WRITER_THREAD_NAME",
    "CodecFactory",
    "ControlAnsweredError",
    "ControlRecord",
    "ControlStatus",
    "Divergence",
    "DuplexReplayCodec",
    "DuplicateRecordError",
    "EventBus",
    "InvalidIdError",
    "JobRecord",
    "JobState",
    "JobStateError",
    "NoReplayCodecError",
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
    "Subscription",
    "UnknownControlRequestError",
    "UnknownJobError",
    "UnknownRecordError",
    "UnknownSessionError",
    "check_id",
    "default_db_path",
    "event_origin",
    "looks_secret_name",
    "new_id",
    "register_replay_codec",
    "replay",
    "replay_codec_factory",
]
