"""Errors raised by the store, placed in Chorus's error tree::

    ChorusError
    ├── StoreError                     the durable log failed or refused an operation
    │   ├── StoreClosedError           used before start() or after close()
    │   ├── StorageFullError           the disk (or a quota) is full: retry once space is back
    │   ├── SchemaVersionError         the database was written by a newer Chorus
    │   ├── DuplicateRecordError       a job / control request id already taken
    │   │   ├── SessionExistsError     create_session with an id already taken
    │   │   └── FiringExistsError      a routine already fired for that scheduled time
    │   ├── JobStateError              an illegal job state transition
    │   ├── ControlAnsweredError       a control request already has its response
    │   ├── UnknownRecordError         (also a UserError: exit code 2)
    │   │   ├── UnknownSessionError
    │   │   ├── UnknownJobError
    │   │   ├── UnknownWorktreeError
    │   │   └── UnknownControlRequestError
    │   └── AmbiguousIdError           an id prefix matching several (also a UserError)
    ├── UserError
    │   ├── InvalidIdError             an id unusable as a record key / file name
    │   ├── NoReplayCodecError         replay asked for a body no codec registered for
    │   └── RedactionError             a secret value or pattern is unusable
    └── LimitError
        ├── StoreQueueFullError        the writer queue is full (back-pressure)
        │   └── DatabaseDownError      ... because the shared database is unreachable
        └── SlowSubscriberError        a bus subscriber fell behind and was dropped

``sqlite3`` errors never cross the store's public API: they are translated to
:class:`StoreError` where they arise.
"""

from __future__ import annotations

from chorus._errors import ChorusError, LimitError, UserError


class StoreError(ChorusError):
    """The store failed or refused an operation."""


class StoreClosedError(StoreError):
    """The store is not running (never started, or already closed)."""


class StorageFullError(StoreError):
    """A write failed because the disk is full; nothing of it was written. The same
    write succeeds once space is back."""


class SchemaVersionError(StoreError):
    """The database schema is newer than this Chorus understands."""

    def __init__(self, found: int, known: int) -> None:
        super().__init__(
            f"database schema version {found} is newer than this Chorus knows ({known}); "
            "upgrade Chorus"
        )
        self.found = found
        self.known = known


class DuplicateRecordError(StoreError):
    """A record with this id already exists."""


class SessionExistsError(DuplicateRecordError):
    """A session with this id already exists."""


class FiringExistsError(DuplicateRecordError):
    """The routine already has a firing for this scheduled time (it fired once)."""

    def __init__(self, routine: str, scheduled_for: float) -> None:
        super().__init__(f"routine {routine!r} already fired for {scheduled_for}")
        self.routine = routine
        self.scheduled_for = scheduled_for


class JobStateError(StoreError):
    """The requested job state change is not in the transition table."""

    def __init__(self, job_id: str, current: str, wanted: str) -> None:
        super().__init__(f"job {job_id}: cannot go from {current!r} to {wanted!r}")
        self.job_id = job_id
        self.current = current
        self.wanted = wanted


class LeaseLostError(StoreError):
    """A job's end carried a lease the job no longer holds (it lapsed: the job went
    back to the queue or to another node, or was claimed again): nothing changed."""

    def __init__(self, job_id: str, node: str, token: int) -> None:
        super().__init__(f"job {job_id}: node {node} no longer holds it (claim {token}); not ended")
        self.job_id = job_id
        self.node = node
        self.token = token


class ControlAnsweredError(StoreError):
    """A control request got a second response; UCP allows exactly one."""


class UnknownRecordError(StoreError, UserError):
    """A lookup named a record that does not exist."""


class AmbiguousIdError(StoreError, UserError):
    """An id prefix matches more than one record."""


class UnknownSessionError(UnknownRecordError):
    """No session with this id."""

    def __init__(self, session_id: str) -> None:
        super().__init__(f"unknown session {session_id!r}")
        self.session_id = session_id


class UnknownJobError(UnknownRecordError):
    """No job with this id."""

    def __init__(self, job_id: str) -> None:
        super().__init__(f"unknown job {job_id!r}")
        self.job_id = job_id


class UnknownWorktreeError(UnknownRecordError):
    """No worktree is recorded for this job."""

    def __init__(self, job_id: str) -> None:
        super().__init__(f"job {job_id!r} has no worktree")
        self.job_id = job_id


class UnknownControlRequestError(UnknownRecordError):
    """No control request with this id in this session."""

    def __init__(self, session_id: str, request_id: str) -> None:
        super().__init__(f"unknown control request {request_id!r} in session {session_id!r}")
        self.session_id = session_id
        self.request_id = request_id


class InvalidIdError(UserError):
    """An id has characters that cannot name a record or a mirror file."""


class NoReplayCodecError(UserError):
    """No replay codec is registered for this body."""

    def __init__(self, body: str) -> None:
        super().__init__(f"no replay codec registered for body {body!r}")
        self.body = body


class RedactionError(UserError):
    """A user-configured pattern does not compile, or a secret is too short to redact."""


class StoreQueueFullError(LimitError):
    """The writer queue holds ``limit`` pending operations; the caller must back off."""

    def __init__(self, limit: int) -> None:
        super().__init__(f"store writer queue is full ({limit} pending operations)")
        self.limit = limit


class DatabaseDownError(StoreQueueFullError):
    """The writer queue filled up while the (shared) database was unreachable."""

    def __init__(self, limit: int, down_s: float, reason: str) -> None:
        LimitError.__init__(
            self,
            f"the database has been unreachable for {down_s:.0f}s ({reason}); {limit} writes"
            " wait for it and no more are accepted until it is back",
        )
        self.limit = limit
        self.down_s = down_s


class SlowSubscriberError(LimitError):
    """A subscriber let more than ``limit`` live events pile up and was dropped.

    Nothing is lost: every event is in the log. Resubscribe with
    ``from_seq=last_seq + 1`` to continue with no gap and no duplicate.
    """

    def __init__(self, session_id: str | None, last_seq: int, limit: int) -> None:
        where = f"session {session_id!r}" if session_id else "all sessions"
        super().__init__(
            f"subscriber to {where} fell more than {limit} events behind and was dropped "
            f"(last delivered seq {last_seq}); resubscribe from seq {last_seq + 1}"
        )
        self.session_id = session_id
        self.last_seq = last_seq
        self.limit = limit
