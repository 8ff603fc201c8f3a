"""The job queue: jobs, their checked state transitions, and their atomic end."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable, Sequence
from typing import Any

from chorus.events import Event
from chorus.store._errors import (
    DuplicateRecordError,
    JobStateError,
    LeaseLostError,
    UnknownJobError,
)
from chorus.store._ops import EndOp
from chorus.store._query import NO_LIMIT, Query, count, notify, one, rows, update_sql
from chorus.store._records import (
    JOB_TERMINAL,
    ORIGIN_CHORUS,
    JobRecord,
    JobState,
    JsonDict,
    Lease,
    check_id,
    check_job_end,
    check_job_transition,
    new_id,
)
from chorus.store._repo import Repo
from chorus.store._sessions import require_session

#: NOTIFY channel: a job may have become claimable (payload unused).
JOBS_CHANNEL = "chorus_jobs"

JOB_COLUMNS = (
    "id",
    "session_id",
    "body",
    "prompt",
    "state",
    "options",
    "result",
    "error",
    "attempts",
    "created_at",
    "updated_at",
    "started_at",
    "ended_at",
    "node",
    "lease_expires_at",
    "affinity",
)
JOB_SELECT = f"SELECT {', '.join(JOB_COLUMNS)} FROM jobs"
_INSERT = (
    "INSERT INTO jobs (id, session_id, body, prompt, state, options, created_at, updated_at,"
    " affinity) VALUES (?, ?, ?, ?, 'queued', ?, ?, ?, ?) ON CONFLICT (id) DO NOTHING"
)
_LIST = (
    JOB_SELECT + " WHERE (CAST(:state AS TEXT) IS NULL OR state = :state)"
    " AND (CAST(:sid AS TEXT) IS NULL OR session_id = :sid)"
    " ORDER BY created_at, {ord} LIMIT :limit"
)
_NEXT = "SELECT id FROM jobs WHERE state = 'queued' ORDER BY created_at, {ord} LIMIT 1{skip_locked}"
_MISSING_END = (
    JOB_SELECT + " j WHERE j.state IN ('succeeded', 'failed', 'cancelled')"
    " AND j.session_id IS NOT NULL AND NOT EXISTS (SELECT 1 FROM events e"
    " WHERE e.session_id = j.session_id AND e.type = 'job_ended'"
    " AND JSON_TEXT(e.payload, job_id) = j.id) ORDER BY j.created_at, j.{ord}"
)
_RUNNING = (
    JOB_SELECT + " WHERE state = 'running' AND (CAST(:node AS TEXT) IS NULL OR node = :node)"
    " ORDER BY created_at, {ord}{lock}"
)
#: The lease a job's end must still hold: (node, the claim's ``attempts``).
_FENCE = " AND state = 'running' AND node = :fence_node AND attempts = :fence_token"


class Jobs(Repo):
    """The job-queue part of :class:`~chorus.store.Store`."""

    _queued_hooks: list[Callable[[], None]]

    def on_jobs_queued(self, callback: Callable[[], None]) -> None:
        """Call ``callback`` (on the event loop) whenever a job may have become
        claimable: queued or requeued by this process or, for a shared store, by
        any process. A hint only: claimers must poll as well."""
        self._queued_hooks.append(callback)

    def _jobs_queued(self) -> None:
        for hook in list(self._queued_hooks):
            hook()

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
        jid = check_id(job_id or new_id(), "job id")
        row = job_row_of(self, jid, prompt, body, session_id, options or {}, affinity)
        job = await self._call(lambda: _create(row))
        self._jobs_queued()  # this process's claimers at once; others by NOTIFY
        return job

    async def get_job(self, job_id: str) -> JobRecord:
        """The job, or :class:`UnknownJobError`."""
        return await self._read(lambda: get_job(job_id))

    async def list_jobs(
        self,
        *,
        state: JobState | None = None,
        session_id: str | None = None,
        limit: int | None = None,
    ) -> list[JobRecord]:
        """Jobs oldest first (queue order), optionally filtered."""
        state_value = state.value if state else None
        params = {"state": state_value, "sid": session_id, "limit": limit or NO_LIMIT}
        return await self._read(lambda: _jobs(_LIST, params))

    async def claim_next_job(self) -> JobRecord | None:
        """Atomically take the oldest ``queued`` job: it becomes ``running`` with
        ``attempts + 1`` and ``started_at`` now. None when the queue is empty.
        Two concurrent claims never get the same job."""
        return await self._call(_claim_next)

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
        fields = self._outcome(result, error)
        more = {"session_id": session_id, "body": self._clean(body), "prompt": self._clean(prompt)}
        fields.update((key, value) for key, value in more.items() if value is not None)
        job = await self._call(lambda: _update(job_id, state, session_id, fields))
        if state is JobState.QUEUED:
            self._jobs_queued()
        return job

    def _outcome(self, result: JsonDict | None, error: JsonDict | None) -> dict[str, Any]:
        """The ``result`` and ``error`` columns to set (None: leave as is)."""
        fields = {"result": result, "error": error}
        return {key: self._json(value) for key, value in fields.items() if value is not None}

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
        check_job_end(job_id, state)
        fields = self._outcome(result, error)
        tagged = ended.model_copy(update={"job_id": job_id})
        end = EndOp(
            asyncio.get_running_loop(), lambda: _end(job_id, state, fields, lease), [tagged], origin
        )
        job, stamped = await self._write(end)
        return job, stamped[0]

    async def jobs_missing_end(self) -> list[JobRecord]:
        """Terminal jobs with a session whose log holds no ``job_ended`` event for them
        (left by a Chorus that ended jobs in two transactions). Start-up repair
        appends the missing ends (see :func:`chorus.store.repair_store`)."""
        return await self._read(lambda: _jobs(_MISSING_END, ()))

    async def requeue_running_jobs(self, *, node: str | None = None) -> list[JobRecord]:
        """Put every ``running`` job back to ``queued`` (for a daemon restarting
        after a crash, before it claims anything); returns them. With ``node``,
        only the jobs that node holds (the others belong to live nodes)."""
        jobs = await self._call(lambda: _requeue_running(node))
        if jobs:
            self._jobs_queued()
        return jobs


# -- rows and transitions (inside a writer transaction or on a reader) ------------------------


def job_row_of(
    repo: Repo,
    jid: str,
    prompt: str,
    body: str | None,
    session_id: str | None,
    options: JsonDict,
    affinity: str | None,
) -> tuple[Any, ...]:
    """The row of a new job (redacted by ``repo``), in :data:`_INSERT`'s order."""
    now = time.time()
    text = repo.redactor.redact_text(prompt)
    return (jid, session_id, repo._clean(body), text, repo._json(options), now, now, affinity)


def job_record(row: Sequence[Any]) -> JobRecord:
    data = dict(zip(JOB_COLUMNS, row, strict=True))
    for key in ("options", "result", "error"):
        data[key] = None if data[key] is None else json.loads(data[key])
    data["state"] = JobState(data["state"])
    return JobRecord(**data)


def get_job(job_id: str, *, lock: bool = False) -> Query[JobRecord]:
    row = yield from one(JOB_SELECT + " WHERE id = ?" + ("{lock}" if lock else ""), (job_id,))
    if row is None:
        raise UnknownJobError(job_id)
    return job_record(row)


def _jobs(sql: str, params: Any) -> Query[list[JobRecord]]:
    return [job_record(row) for row in (yield from rows(sql, params))]


def insert_job(row: tuple[Any, ...]) -> Query[None]:
    """Insert a queued job (its session must exist) and wake the claimers."""
    if row[1] is not None:
        yield from require_session(row[1])
    if (yield from count(_INSERT, row)) == 0:
        raise DuplicateRecordError(f"job {row[0]!r} already exists")
    yield from notify(JOBS_CHANNEL)


def _create(row: tuple[Any, ...]) -> Query[JobRecord]:
    yield from insert_job(row)
    return (yield from get_job(row[0]))


def update_job_row(
    job_id: str,
    fields: dict[str, Any],
    *,
    now: float | None = None,
    fence: Lease | None = None,
) -> Query[int]:
    """Set ``fields`` (fixed column names) and ``updated_at``; with ``fence``, only while
    that lease holds it. Returns the rows changed (0 or 1)."""
    assert set(fields) <= set(JOB_COLUMNS)
    values = {**fields, "updated_at": now or time.time()}
    where = "id = :job_id" + (_FENCE if fence else "")
    params = {**values, "job_id": job_id}
    if fence:
        params.update(fence_node=fence.node, fence_token=fence.token)
    changed = yield from count(update_sql("jobs", list(values), where), params)
    return changed


def _transition(job: JobRecord, state: JobState, now: float) -> dict[str, Any]:
    """The columns a checked transition sets (its timestamp rules)."""
    check_job_transition(job.id, job.state, state)
    fields: dict[str, Any] = {"state": state.value}
    if state is JobState.RUNNING:
        fields.update(attempts=job.attempts + 1, started_at=now, ended_at=None)
    elif state is JobState.QUEUED:
        fields.update(result=None, error=None, ended_at=None, node=None, lease_expires_at=None)
    elif state in JOB_TERMINAL:
        fields.update(ended_at=now, lease_expires_at=None)
    return fields


def set_job_state(job: JobRecord, state: JobState) -> Query[JobRecord]:
    """Apply one checked transition and its timestamp rules; return the new row."""
    now = time.time()
    yield from update_job_row(job.id, _transition(job, state, now), now=now)
    return (yield from get_job(job.id))


def _claim_next() -> Query[JobRecord | None]:
    row = yield from one(_NEXT)
    if row is None:
        return None
    job = yield from get_job(row[0])
    return (yield from set_job_state(job, JobState.RUNNING))


def _update(
    job_id: str, state: JobState | None, session_id: str | None, fields: dict[str, Any]
) -> Query[JobRecord]:
    job = yield from get_job(job_id, lock=True)
    if state is not None:
        job = yield from set_job_state(job, state)
    # A failure from here on is undone with the state change (SAVEPOINT).
    if session_id is not None:
        yield from require_session(session_id)
    if fields:
        yield from update_job_row(job_id, fields)
    if state is JobState.QUEUED:
        yield from notify(JOBS_CHANNEL)
    return (yield from get_job(job_id))


def _end(
    job_id: str, state: JobState, fields: dict[str, Any], lease: Lease | None
) -> Query[tuple[str, JobRecord]]:
    if lease is None:
        yield from set_job_state((yield from get_job(job_id, lock=True)), state)
        if fields:
            yield from update_job_row(job_id, fields)
    else:
        yield from _end_fenced(job_id, state, fields, lease)
    job = yield from get_job(job_id)
    if job.session_id is None:
        raise JobStateError(job_id, job.state.value, "ended without a session")
    return job.session_id, job


def _end_fenced(job_id: str, state: JobState, fields: dict[str, Any], lease: Lease) -> Query[None]:
    """End the job in ONE statement that holds only while ``lease`` does (running,
    on that node, under that claim): no window between a check and the change."""
    now = time.time()
    changes = {"state": state.value, "ended_at": now, "lease_expires_at": None, **fields}
    if (yield from update_job_row(job_id, changes, now=now, fence=lease)) == 0:
        yield from get_job(job_id)  # UnknownJobError, when there is no such job
        raise LeaseLostError(job_id, lease.node, lease.token)


def _requeue_running(node: str | None) -> Query[list[JobRecord]]:
    jobs = yield from _jobs(_RUNNING, {"node": node})
    if jobs:
        yield from notify(JOBS_CHANNEL)
    requeued = []
    for job in jobs:
        requeued.append((yield from set_job_state(job, JobState.QUEUED)))
    return requeued
