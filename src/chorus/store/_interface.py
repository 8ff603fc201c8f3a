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
from chorus.store._errors import InvalidIdError, JobStateError, StoreError, UnknownWorktreeError
from chorus.store._flags import FlagStore
from chorus.store._mailbox import MessageRecord, NewMessage
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


def lease_expired_error(job: JobRecord) -> JsonDict:
    """The ``error`` of a job failed because its node stopped renewing the lease."""
    return {
        "code": "lease_expired",
        "message": f"worker node {job.node} stopped renewing its lease"
        f" ({job.attempts} attempts); not retried",
    }


@dataclass(frozen=True, slots=True)
class Lease:
    """A node's hold on a running job: ``token`` is the job's ``attempts`` at the claim,
    so a later claim (by any node, this one too) makes an older lease stale."""

    node: str
    token: int


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
    #: The worker node that claimed it last (None: claimed the single-host way).
    node: str | None = None
    #: While running on a node: when its lease ends unless renewed (database clock).
    lease_expires_at: float | None = None
    #: A node id or host name the job must run on (its cwd lives there), or None.
    affinity: str | None = None

    @property
    def lease(self) -> Lease | None:
        """The lease of the node that holds the job (its claim), None when no node does;
        pass it to :meth:`Store.end_job` so that only this claim can end the job."""
        if self.state is not JobState.RUNNING or self.node is None:
            return None
        return Lease(self.node, self.attempts)


@dataclass(frozen=True, slots=True)
class NodeRecord:
    """A worker node: a daemon pointed at the store. ``last_seen`` is renewed with
    its leases; ``running`` counts the jobs it holds now."""

    id: str
    host: str
    bodies: list[str]
    started_at: float
    last_seen: float
    running: int = 0


@dataclass(frozen=True, slots=True)
class RoutineRecord:
    """A routine's scheduling state. ``anchor_at`` is when the store first saw it: no
    firing is due before it (and interval routines count from it)."""

    name: str
    enabled: bool
    anchor_at: float
    updated_at: float


@dataclass(frozen=True, slots=True)
class Firing:
    """One firing of a routine: the key is (``routine``, ``scheduled_for``), which the
    store rounds to the millisecond. ``kind`` says what fired it (``schedule``,
    ``manual``, ``file_change``, ``heartbeat``); ``detail`` carries e.g. the paths."""

    routine: str
    scheduled_for: float
    kind: str = "schedule"
    detail: JsonDict = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class FiringRecord:
    """A stored firing. ``outcome`` is ``queued`` (it has ``job_id``) or why no job was
    queued (``skipped``, ``coalesced``, ``missed``, ``nothing_to_do``); ``job_state``
    is the job's current state."""

    routine: str
    scheduled_for: float
    kind: str
    outcome: str
    fired_at: float
    job_id: str | None = None
    job_state: JobState | None = None
    detail: JsonDict = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class WorktreeRecord:
    """The git worktree a job runs in, keyed by the job that made it.

    ``repo`` is the main checkout's top level; ``base`` the ref it was created
    from (``base_commit`` that ref's commit then); ``into`` the branch a merge
    goes into. ``state`` is owned by :mod:`chorus.worktrees` (its transition
    table); ``info`` carries that package's extra facts (e.g. the merged tip)."""

    job_id: str
    repo: str
    path: str
    branch: str
    base: str
    base_commit: str
    into: str
    state: str
    created_at: float
    updated_at: float
    info: JsonDict = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class StoreOutage:
    """The shared database is unreachable: for how long, why, and how many writes wait
    for it (``bound``: past it the store refuses new writes, the daemon new jobs)."""

    down_s: float
    reason: str
    buffered: int
    bound: int

    @property
    def full(self) -> bool:
        return self.buffered >= self.bound

    def describe(self) -> str:
        return (
            f"the database has been unreachable for {self.down_s:.0f}s ({self.reason});"
            f" {self.buffered} of at most {self.bound} writes wait for it"
        )


# -- the contract -----------------------------------------------------------------


class Store(FlagStore, ABC):
    """The durable log and the daemon's tables. Use ``async with`` (or
    :meth:`start` then :meth:`close`). Calls before ``start`` or after ``close``
    raise :class:`StoreClosedError`."""

    #: Applied to everything before it is written (and by replay to its output).
    redactor: Redactor
    #: True when several daemons (worker nodes) may share this store.
    shared: bool = False

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
        affinity: str | None = None,
    ) -> JobRecord:
        """Insert a ``queued`` job (``affinity``: see :class:`JobRecord`). The stored
        prompt is the *redacted* prompt; keep the original in memory if the body
        must see a secret. Raises
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
        lease: Lease | None = None,
    ) -> tuple[JobRecord, Event]:
        """End a job for good, in ONE transaction: move it to the terminal ``state``
        (checked like :meth:`update_job`), set ``result``/``error``, and append
        ``ended`` (its :class:`JobEnded`, tagged with ``job_id``) to the job's
        session. A crash leaves either both or neither, so a follower of the job's
        events always sees its end. Returns the job and the stamped event.

        With ``lease`` (the claim's :attr:`JobRecord.lease`) the end is fenced: one
        statement changes the job only while it is running under that very lease
        (same node, same claim), else :class:`LeaseLostError`. A node whose lease
        lapsed can thus never end a job another claim now runs. Raises
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
    async def requeue_running_jobs(self, *, node: str | None = None) -> list[JobRecord]:
        """Put every ``running`` job back to ``queued`` (for a daemon restarting
        after a crash, before it claims anything); returns them. With ``node``,
        only the jobs that node holds (the others belong to live nodes)."""

    # -- worker nodes and leases ----------------------------------------------------------

    @abstractmethod
    async def register_node(self, node_id: str, *, host: str, bodies: Sequence[str]) -> NodeRecord:
        """Insert or refresh a worker node (``last_seen`` now)."""

    @abstractmethod
    async def list_nodes(self) -> list[NodeRecord]:
        """Every registered node, most recently seen first."""

    @abstractmethod
    async def claim_job(
        self,
        node_id: str,
        *,
        lease_s: float,
        host: str | None = None,
        exclude_sessions: Sequence[str] = (),
        system_only: bool = False,
    ) -> JobRecord | None:
        """Atomically take the oldest ``queued`` job this node may run: not of a
        session in ``exclude_sessions`` (``""`` stands for "no session") nor of one
        with a job running anywhere, with no affinity or one naming ``node_id`` or
        ``host``, and (``system_only``) with ``options["system"]`` true. It becomes
        ``running`` on ``node_id`` with a lease of ``lease_s`` seconds. None when
        nothing fits. Concurrent claims, from any
        number of processes, never get the same job."""

    @abstractmethod
    async def extend_leases(
        self, node_id: str, job_ids: Sequence[str], *, lease_s: float
    ) -> list[str]:
        """Renew the leases of the node's running jobs among ``job_ids`` and the
        node's ``last_seen``; return the ids still held (a job missing from the
        answer was taken over after its lease expired: stop working on it)."""

    @abstractmethod
    async def requeue_expired_jobs(self, *, max_attempts: int | None = None) -> list[JobRecord]:
        """Put ``running`` jobs whose lease expired back to ``queued`` (their node
        died), or to ``failed`` once they were claimed ``max_attempts`` times;
        return them in their new state."""

    @abstractmethod
    def on_jobs_queued(self, callback: Callable[[], None]) -> None:
        """Call ``callback`` (on the event loop) whenever a job may have become
        claimable: queued or requeued by this process or, for a shared store, by
        any process. A hint only: claimers must poll as well."""

    # -- routines ----------------------------------------------------------------------
    # Implemented by both stores; a backend without them refuses routines.

    async def register_routine(self, name: str, *, now: float | None = None) -> RoutineRecord:
        """The routine's state row, created (enabled, anchored at ``now``, default the
        current time) if it is new."""
        raise _no_routines(self)

    async def list_routine_records(self) -> list[RoutineRecord]:
        """Every routine's state row, by name."""
        raise _no_routines(self)

    async def set_routine_enabled(self, name: str, enabled: bool) -> RoutineRecord:
        """Enable or disable (registering it first if new)."""
        raise _no_routines(self)

    async def delete_routine(self, name: str) -> None:
        """Forget the routine's state and firings (its jobs stay). Idempotent."""
        raise _no_routines(self)

    async def create_fired_job(
        self,
        firing: Firing,
        prompt: str,
        *,
        body: str | None = None,
        session_id: str | None = None,
        options: JsonDict | None = None,
        affinity: str | None = None,
    ) -> JobRecord:
        """In one transaction: record ``firing`` (outcome ``queued``) and queue its job,
        like :meth:`create_job` with ``routine`` and ``scheduled_for`` added to the
        options. Raises :class:`FiringExistsError` (nothing written) when the routine
        already fired for that time: a restart can never fire twice."""
        raise _no_routines(self)

    async def record_firing(self, firing: Firing, outcome: str) -> FiringRecord:
        """Record a firing that queued no job (skipped, coalesced, missed ...).
        Raises :class:`FiringExistsError`."""
        raise _no_routines(self)

    async def list_firings(
        self, routine: str, *, kind: str | None = None, limit: int | None = None
    ) -> list[FiringRecord]:
        """The routine's firings (optionally of one ``kind``), latest scheduled time
        first, with their jobs' states."""
        raise _no_routines(self)

    # -- worktrees -----------------------------------------------------------------------
    # Implemented by both stores; on a backend without them no job has a worktree.

    async def create_worktree(self, record: WorktreeRecord) -> WorktreeRecord:
        """Insert the record (its timestamps are set now). Raises
        :class:`DuplicateRecordError` when the job or the path already has one."""
        raise StoreError(f"worktrees are not available on {type(self).__name__} yet")

    async def get_worktree(self, job_id: str) -> WorktreeRecord:
        """The job's worktree, or :class:`UnknownWorktreeError`."""
        raise UnknownWorktreeError(job_id)

    async def list_worktrees(self, *, repo: str | None = None) -> list[WorktreeRecord]:
        """Worktree records oldest first, optionally of one repository."""
        return []

    async def update_worktree(
        self, job_id: str, *, state: str | None = None, info: JsonDict | None = None
    ) -> WorktreeRecord:
        """Set the state and/or replace ``info`` (None: leave as is) and ``updated_at``.
        Raises :class:`UnknownWorktreeError`."""
        raise UnknownWorktreeError(job_id)

    # -- one of everything across the cluster -----------------------------------

    def outage(self) -> StoreOutage | None:
        """Set while the (shared) database cannot be reached and writes wait for it;
        None when all is well (always, for an embedded store)."""
        return None

    async def try_lead(self, role: str) -> bool:
        """Become, or stay, the one process of the cluster that does ``role`` (e.g. fire
        the routines); True while this process holds it. Call it again and again: the
        answer turns False once the hold is lost (its connection died). A store that
        only one daemon uses always answers True."""
        return True

    async def list_provider_health(self) -> list[JsonDict]:
        """Provider health rows (:meth:`chorus.router.ProviderHealth.to_json`) shared by
        the cluster; a store that only one daemon uses shares none."""
        return []

    async def put_provider_health(self, key: str, data: JsonDict, *, node: str) -> None:
        """Store one provider's health for the whole cluster (the last writer wins)."""
        raise StoreError(f"{type(self).__name__} does not share provider health")

    # -- team mailboxes (chorus.store._mailbox) -------------------------------------

    async def set_team_members(self, team: str, members: Sequence[str]) -> None:
        """Make ``members`` the team's whole membership (empty: the team is gone)."""
        raise StoreError(f"team mailboxes are not available on {type(self).__name__}")

    async def team_members(self, team: str) -> list[str]:
        """The team's members by name (empty for an unknown team)."""
        return []

    async def post_message(self, message: NewMessage) -> MessageRecord:
        """Store ``message`` (pending); a second post of its id returns the first.
        Raises :class:`UnknownMemberError` (nothing written) for a recipient that is
        not a member."""
        raise StoreError(f"team mailboxes are not available on {type(self).__name__}")

    async def take_messages(
        self,
        team: str,
        recipient: str,
        *,
        job_id: str | None = None,
        kind: str | None = None,
        limit: int = 100,
    ) -> list[MessageRecord]:
        """Deliver the recipient's oldest pending messages (to ``job_id``'s turn):
        each is marked delivered and not taken again until released."""
        return []

    async def ack_messages(self, ids: Sequence[str]) -> list[str]:
        """Ack delivered messages; returns the ids acked now (not acked before)."""
        return []

    async def release_messages(self, *, job_id: str | None = None, team: str | None = None) -> int:
        """Make delivered, unacked messages pending again (of one turn, one team, or
        all: after a crash); returns how many."""
        return 0

    async def list_messages(
        self,
        team: str,
        *,
        recipient: str | None = None,
        unacked: bool = False,
        limit: int | None = None,
    ) -> list[MessageRecord]:
        """The team's messages oldest first (one recipient's; only unacked ones)."""
        return []

    # -- maintenance -------------------------------------------------------------------

    @abstractmethod
    async def integrity_check(self) -> list[str]:
        """The backend's own consistency check; ``["ok"]`` when clean."""

    @abstractmethod
    async def rebuild_mirror(self, session_id: str) -> None:
        """Rewrite the session's JSONL mirror from the log (after a crash may have
        left it short). Raises :class:`UnknownSessionError`."""


def _no_routines(store: object) -> StoreError:
    return StoreError(
        f"routines are not available on {type(store).__name__} yet; "
        "run them from a daemon on the SQLite store"
    )
