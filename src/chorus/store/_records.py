"""The store's records and the rules on them (ids, the job lifecycle).

Records are frozen dataclasses; JSON columns come back as plain dicts.
Timestamps are seconds since the epoch (``time.time()``), like event ``ts``.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, Literal

from chorus.store._errors import InvalidIdError, JobStateError

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
