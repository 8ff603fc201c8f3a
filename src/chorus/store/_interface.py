"""The store contract: what any backend (SQLite now, PostgreSQL later) provides.

Every method is async and safe to call from the event loop: a backend never
blocks the loop on I/O. Writes are serialized by one writer and resolve only
after their transaction committed ("nothing acknowledged is lost"). Every
string a write carries (events, raw lines, prompts, payloads, metadata) is
redacted *before* it is written; reads return the redacted form.

Records are frozen dataclasses; JSON columns come back as plain dicts.
Timestamps are seconds since the epoch (``time.time()``), like event ``ts``.
"""

from __future__ import annotations

import asyncio
import re
import uuid
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from types import TracebackType
from typing import Any, Literal, Self

from chorus.events import Event
from chorus.store._bus import DEFAULT_SUBSCRIBER_QUEUE, Subscription
from chorus.store._errors import InvalidIdError, JobStateError
from chorus.store._redact import Redactor

JsonDict = dict[str, Any]
RawStream = Literal["stdout", "stderr", "stdin"]
RAW_STREAMS: tuple[RawStream, ...] = ("stdout", "stderr", "stdin")
#: Same shape as ``chorus.bodies.RawTap``: called with (stream, line).
RawTap = Callable[[str, str], None]

#: ``origin`` of events the codec produced from the body's output (what replay checks).
ORIGIN_CODEC = "codec"
#: ``origin`` of events Chorus itself produced (control, policy, handoff ...).
ORIGIN_CHORUS = "chorus"

_ID_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}")


def new_id() -> str:
    """A fresh random id (32 hex characters) for a session or a job."""
    return uuid.uuid4().hex


def check_id(value: str, what: str = "id") -> str:
    """Return ``value`` if it can key a record and name a file, else raise
    :class:`InvalidIdError` (letters, digits, ``._-``; at most 128; no leading dot)."""
    if not _ID_RE.fullmatch(value):
        raise InvalidIdError(f"invalid {what} {value!r}: use letters, digits, '.', '_', '-'")
    return value


# -- records ---------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class SessionRecord:
    """One session row. ``last_seq`` is the highest event seq (0: no events)."""

    id: str
    body: str
    state: str
    created_at: float
    updated_at: float
    model: str | None = None
    cwd: str | None = None
    native_session_id: str | None = None
    transport: JsonDict = field(default_factory=dict)
    last_seq: int = 0


@dataclass(frozen=True, slots=True)
class RawLine:
    """One line moved to or from a body; ``n`` is gap-free per session from 1."""

    session_id: str
    n: int
    stream: RawStream
    line: str
    ts: float


class ControlStatus(StrEnum):
    PENDING = "pending"
    OK = "ok"
    ERROR = "error"
    TIMEOUT = "timeout"
    CANCELLED = "cancelled"


@dataclass(frozen=True, slots=True)
class ControlRecord:
    """A control request and (once answered) its one response."""

    session_id: str
    request_id: str
    subtype: str
    payload: JsonDict
    status: ControlStatus
    requested_at: float
    response: JsonDict | None = None
    responded_at: float | None = None


class JobState(StrEnum):
    QUEUED = "queued"
    RUNNING = "running"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    CANCELLED = "cancelled"


#: The job lifecycle. ``running -> queued`` is a retry or a requeue after a
#: daemon restart; ``failed -> queued`` is a manual retry.
JOB_TRANSITIONS: Mapping[JobState, frozenset[JobState]] = {
    JobState.QUEUED: frozenset({JobState.RUNNING, JobState.CANCELLED}),
    JobState.RUNNING: frozenset(
        {JobState.SUCCEEDED, JobState.FAILED, JobState.CANCELLED, JobState.QUEUED}
    ),
    JobState.FAILED: frozenset({JobState.QUEUED}),
    JobState.SUCCEEDED: frozenset(),
    JobState.CANCELLED: frozenset(),
}
JOB_TERMINAL = frozenset({JobState.SUCCEEDED, JobState.FAILED, JobState.CANCELLED})


def check_job_end(job_id: str, state: JobState) -> None:
    """Raise :class:`JobStateError` unless ``state`` is terminal (what a job can end in)."""
    if state not in JOB_TERMINAL:
        raise JobStateError(job_id, "?", f"{state.value} (not a terminal state)")


def check_job_transition(job_id: str, current: JobState, wanted: JobState) -> None:
    """Raise :class:`JobStateError` unless ``current -> wanted`` is in the table."""
    if wanted not in JOB_TRANSITIONS[current]:
        raise JobStateError(job_id, current.value, wanted.value)


@dataclass(frozen=True, slots=True)
class JobRecord:
    """One job. ``body`` is None until the router picks one; ``attempts`` counts
    claims; ``started_at`` is the latest claim; ``ended_at`` is set on entering a
    terminal state and cleared on requeue."""

    id: str
    prompt: str
    state: JobState
    created_at: float
    updated_at: float
    body: str | None = None
    session_id: str | None = None
    options: JsonDict = field(default_factory=dict)
    result: JsonDict | None = None
    error: JsonDict | None = None
    attempts: int = 0
    started_at: float | None = None
    ended_at: float | None = None


# -- the contract -----------------------------------------------------------------


class Store(ABC):
    """The durable log and the daemon's tables. Use ``async with`` (or
    :meth:`start` then :meth:`close`). Calls before ``start`` or after ``close``
    raise :class:`StoreClosedError`."""

    #: Applied to everything before it is written (and by replay to its output).
    redactor: Redactor

    async def __aenter__(self) -> Self:
        await self.start()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.close()

    @abstractmethod
    async def start(self) -> None:
        """Open the database and apply pending migrations. Call once."""

    @abstractmethod
    async def close(self) -> None:
        """Finish queued writes, end subscriptions, release every connection.
        Idempotent."""

    # -- sessions ---------------------------------------------------------------

    @abstractmethod
    async def create_session(
        self,
        body: str,
        *,
        session_id: str | None = None,
        model: str | None = None,
        cwd: str | None = None,
        native_session_id: str | None = None,
        transport: JsonDict | None = None,
        state: str = "created",
    ) -> SessionRecord:
        """Insert a session (id generated when not given). Raises
        :class:`SessionExistsError` for a taken id, :class:`InvalidIdError` for a bad one."""

    @abstractmethod
    async def get_session(self, session_id: str) -> SessionRecord:
        """The session, or :class:`UnknownSessionError`."""

    @abstractmethod
    async def list_sessions(
        self, *, state: str | None = None, body: str | None = None, limit: int = 100
    ) -> list[SessionRecord]:
        """Sessions, newest first, optionally filtered by state and body."""

    @abstractmethod
    async def update_session(
        self,
        session_id: str,
        *,
        state: str | None = None,
        model: str | None = None,
        native_session_id: str | None = None,
        transport: JsonDict | None = None,
    ) -> SessionRecord:
        """Change the given fields (None means "leave as is") and ``updated_at``.
        Raises :class:`UnknownSessionError`."""

    # -- events -------------------------------------------------------------------

    @abstractmethod
    async def append(self, session_id: str, event: Event, *, origin: str = ORIGIN_CODEC) -> Event:
        """Redact, stamp (``session_id``, next gap-free ``seq``, ``body`` if empty)
        and commit one event; return the stamped, redacted event as stored.

        Resolves after the commit; the event is then in the mirror and offered to
        the bus. Raises :class:`UnknownSessionError`, :class:`StoreQueueFullError`
        (the writer is ``max_queue`` operations behind; nothing was written), or
        :class:`EventTooLargeError`. Cancelling the await does not withdraw the write.
        """

    @abstractmethod
    def append_nowait(
        self, session_id: str, event: Event, *, origin: str = ORIGIN_CODEC
    ) -> asyncio.Future[Event]:
        """Queue one append now and return a future of the stamped event.

        Call on the event loop's thread. Appends are stamped in call order, so a
        session can queue events as they arrive without waiting for each commit
        (their futures resolve after it, like :meth:`append`). Raises
        :class:`StoreQueueFullError` or :class:`StoreClosedError` at once; other
        errors arrive through the future.
        """

    @abstractmethod
    async def append_many(
        self, session_id: str, events: Sequence[Event], *, origin: str = ORIGIN_CODEC
    ) -> list[Event]:
        """Like :meth:`append` for several events in one transaction, with
        consecutive seqs; all or none are written."""

    @abstractmethod
    async def read_events(
        self,
        session_id: str,
        *,
        from_seq: int = 1,
        limit: int | None = None,
        origin: str | None = None,
    ) -> list[Event]:
        """Committed events with ``seq >= from_seq`` in seq order (optionally only
        one origin). Unknown sessions read as empty."""

    @abstractmethod
    async def last_seq(self, session_id: str) -> int:
        """The highest committed seq of the session (0 when it has none)."""

    @abstractmethod
    async def subscribe(
        self,
        session_id: str | None,
        *,
        from_seq: int | None = None,
        max_queue: int = DEFAULT_SUBSCRIBER_QUEUE,
    ) -> Subscription:
        """Follow a session's events: from ``from_seq`` (log first, then live, no gap,
        no duplicate) or, with ``from_seq=None``, those committed from now on.
        ``session_id=None`` follows every session, live only. See
        :mod:`chorus.store._bus` for the slow-subscriber policy."""

    # -- raw lines -----------------------------------------------------------------

    @abstractmethod
    def record_raw(self, session_id: str, stream: RawStream, line: str) -> None:
        """Queue one raw line without waiting (callable from sync code, e.g. a
        transport's tap). Failures after queuing are logged, not raised. Raises
        :class:`StoreQueueFullError` or :class:`StoreClosedError` at once."""

    @abstractmethod
    async def append_raw(self, session_id: str, stream: RawStream, line: str) -> int:
        """Redact and commit one raw line; return its ``n``."""

    @abstractmethod
    async def read_raw(
        self,
        session_id: str,
        *,
        streams: Sequence[RawStream] | None = None,
        from_n: int = 1,
        limit: int | None = None,
    ) -> list[RawLine]:
        """Raw lines in ``n`` order, optionally only some streams."""

    def raw_tap(self, session_id: str) -> RawTap:
        """A :data:`chorus.bodies.RawTap` that records every line the transport moves."""

        def tap(stream: str, line: str) -> None:
            if stream in RAW_STREAMS:
                self.record_raw(session_id, stream, line)

        return tap

    # -- control requests -----------------------------------------------------------

    @abstractmethod
    async def record_control_request(
        self, session_id: str, request_id: str, subtype: str, payload: JsonDict | None = None
    ) -> ControlRecord:
        """Insert a pending control request. Raises :class:`DuplicateRecordError`
        if the session already has ``request_id``, :class:`UnknownSessionError`."""

    @abstractmethod
    async def record_control_response(
        self,
        session_id: str,
        request_id: str,
        *,
        status: ControlStatus,
        response: JsonDict | None = None,
    ) -> ControlRecord:
        """Record the one response (status not ``pending``). Raises
        :class:`UnknownControlRequestError`, or :class:`ControlAnsweredError` when
        it already has one."""

    @abstractmethod
    async def get_control_request(self, session_id: str, request_id: str) -> ControlRecord:
        """The control request, or :class:`UnknownControlRequestError`."""

    @abstractmethod
    async def list_control_requests(
        self, session_id: str, *, status: ControlStatus | None = None
    ) -> list[ControlRecord]:
        """The session's control requests, oldest first."""

    # -- jobs ------------------------------------------------------------------------

    @abstractmethod
    async def create_job(
        self,
        prompt: str,
        *,
        body: str | None = None,
        session_id: str | None = None,
        options: JsonDict | None = None,
        job_id: str | None = None,
    ) -> JobRecord:
        """Insert a ``queued`` job. The stored prompt is the *redacted* prompt;
        keep the original in memory if the body must see a secret. Raises
        :class:`DuplicateRecordError`, :class:`UnknownSessionError`."""

    @abstractmethod
    async def get_job(self, job_id: str) -> JobRecord:
        """The job, or :class:`UnknownJobError`."""

    @abstractmethod
    async def list_jobs(
        self,
        *,
        state: JobState | None = None,
        session_id: str | None = None,
        limit: int | None = None,
    ) -> list[JobRecord]:
        """Jobs oldest first (queue order), optionally filtered."""

    @abstractmethod
    async def claim_next_job(self) -> JobRecord | None:
        """Atomically take the oldest ``queued`` job: it becomes ``running`` with
        ``attempts + 1`` and ``started_at`` now. None when the queue is empty.
        Two concurrent claims never get the same job."""

    @abstractmethod
    async def update_job(
        self,
        job_id: str,
        *,
        state: JobState | None = None,
        result: JsonDict | None = None,
        error: JsonDict | None = None,
        session_id: str | None = None,
        body: str | None = None,
        prompt: str | None = None,
    ) -> JobRecord:
        """Move the job to ``state`` (checked against :data:`JOB_TRANSITIONS`,
        else :class:`JobStateError`) and/or set the given fields (None: leave as
        is; ``prompt`` replaces the prompt, e.g. to add a steer to a queued job). Entering
        a terminal state sets ``ended_at``; re-entering ``queued``
        clears ``result``, ``error`` and ``ended_at``. Raises :class:`UnknownJobError`."""

    @abstractmethod
    async def end_job(
        self,
        job_id: str,
        state: JobState,
        ended: Event,
        *,
        result: JsonDict | None = None,
        error: JsonDict | None = None,
        origin: str = ORIGIN_CHORUS,
    ) -> tuple[JobRecord, Event]:
        """End a job for good, in ONE transaction: move it to the terminal ``state``
        (checked like :meth:`update_job`), set ``result``/``error``, and append
        ``ended`` (its :class:`JobEnded`, tagged with ``job_id``) to the job's
        session. A crash leaves either both or neither, so a follower of the job's
        events always sees its end. Returns the job and the stamped event. Raises
        :class:`JobStateError` (illegal transition, no session),
        :class:`UnknownJobError`, :class:`EventTooLargeError`; nothing is written then."""

    @abstractmethod
    async def jobs_missing_end(self) -> list[JobRecord]:
        """Terminal jobs with a session whose log holds no ``job_ended`` event for them
        (left by a Chorus that ended jobs in two transactions). Start-up repair
        appends the missing ends (see :func:`chorus.store.repair_store`)."""

    async def stale_mirrors(self) -> list[str]:
        """Sessions whose JSONL mirror is not exactly the log (a crash after a commit
        and before the mirror write); :meth:`rebuild_mirror` fixes each. A backend
        without mirrors has none."""
        return []

    @abstractmethod
    async def requeue_running_jobs(self) -> list[JobRecord]:
        """Put every ``running`` job back to ``queued`` (for a daemon restarting
        after a crash, before it claims anything); returns them."""

    # -- maintenance -------------------------------------------------------------------

    @abstractmethod
    async def integrity_check(self) -> list[str]:
        """The backend's own consistency check; ``["ok"]`` when clean."""

    @abstractmethod
    async def rebuild_mirror(self, session_id: str) -> None:
        """Rewrite the session's JSONL mirror from the log (after a crash may have
        left it short). Raises :class:`UnknownSessionError`."""
