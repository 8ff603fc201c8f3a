"""Routines, their firings and job worktrees on PostgreSQL (the SQLite semantics).

A mixin of :class:`chorus.store.PostgresStore`: its methods run through the
store's writer (``_call``) and pool (``_read``). The firing's primary key, written
in the transaction that queues the job, is what makes a firing queue at most one
job across every node of the cluster (the routine leader only makes it rare that
two nodes even try).
"""

from __future__ import annotations

import json
import time
from collections.abc import Awaitable, Callable, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

from psycopg import errors as pg_errors

from chorus.store._errors import (
    DuplicateRecordError,
    FiringExistsError,
    UnknownSessionError,
    UnknownWorktreeError,
)
from chorus.store._fields import clean_firing, clean_opt, clean_worktree
from chorus.store._interface import (
    Firing,
    FiringRecord,
    JobRecord,
    JobState,
    JsonDict,
    RoutineRecord,
    WorktreeRecord,
    check_id,
    new_id,
)
from chorus.store._pg_writer import Conn
from chorus.store._sqlite import _JOB_COLUMNS, _job

if TYPE_CHECKING:
    from chorus.store._redact import Redactor

T = TypeVar("T")


class PgRoutines:
    """Routine state, firings and worktree records of the PostgreSQL store."""

    if TYPE_CHECKING:
        redactor: Redactor

        async def _call(self, fn: Callable[[Conn], Awaitable[T]]) -> T: ...

        async def _read(self, fn: Callable[[Conn], Awaitable[T]]) -> T: ...

        def _json(self, value: JsonDict) -> str: ...

    # -- routines ---------------------------------------------------------------------

    async def register_routine(self, name: str, *, now: float | None = None) -> RoutineRecord:
        at = time.time() if now is None else now
        name = self.redactor.redact_text(name)
        return await self._call(lambda conn: _register_routine(conn, name, at))

    async def list_routine_records(self) -> list[RoutineRecord]:
        async def select(conn: Conn) -> list[RoutineRecord]:
            cur = await conn.execute(_ROUTINE_SELECT + " ORDER BY name")
            return [_routine(row) for row in await cur.fetchall()]

        return await self._read(select)

    async def set_routine_enabled(self, name: str, enabled: bool) -> RoutineRecord:
        name = self.redactor.redact_text(name)

        async def update(conn: Conn) -> RoutineRecord:
            await _register_routine(conn, name, time.time())
            await conn.execute(
                "UPDATE routines SET enabled = %s, updated_at = %s WHERE name = %s",
                (enabled, time.time(), name),
            )
            return await _get_routine(conn, name)

        return await self._call(update)

    async def delete_routine(self, name: str) -> None:
        name = self.redactor.redact_text(name)

        async def delete(conn: Conn) -> None:
            await conn.execute("DELETE FROM routine_firings WHERE routine = %s", (name,))
            await conn.execute("DELETE FROM routines WHERE name = %s", (name,))

        await self._call(delete)

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
        firing = clean_firing(self.redactor, firing)
        at = _firing_key(firing)
        jid = new_id()
        merged = {**(options or {}), "routine": firing.routine, "scheduled_for": at}
        text = clean_opt(self.redactor, body)
        row = (jid, session_id, text, self.redactor.redact_text(prompt), self._json(merged))
        detail = self._json(firing.detail)

        async def insert(conn: Conn) -> JobRecord:
            if session_id is not None:
                await _require_session(conn, session_id)
            now = time.time()
            await conn.execute(
                "INSERT INTO jobs (id, session_id, body, prompt, state, options, created_at,"
                " updated_at, affinity) VALUES (%s, %s, %s, %s, 'queued', %s, %s, %s, %s)",
                (*row, now, now, affinity),
            )
            await _insert_firing(conn, firing, at, "queued", jid, detail)
            await conn.execute("SELECT pg_notify('chorus_jobs', '')")
            return await _get_job(conn, jid)

        job = await self._call(insert)
        self._jobs_queued()
        return job

    def _jobs_queued(self) -> None:
        """Overridden by the store: wake this process's claimers."""

    async def record_firing(self, firing: Firing, outcome: str) -> FiringRecord:
        firing = clean_firing(self.redactor, firing)
        at = _firing_key(firing)
        detail = self._json(firing.detail)

        async def insert(conn: Conn) -> FiringRecord:
            await _insert_firing(conn, firing, at, outcome, None, detail)
            return (await _firings(conn, firing.routine, at=at, limit=1))[0]

        return await self._call(insert)

    async def list_firings(
        self, routine: str, *, kind: str | None = None, limit: int | None = None
    ) -> list[FiringRecord]:
        routine = self.redactor.redact_text(routine)
        return await self._read(lambda conn: _firings(conn, routine, kind=kind, limit=limit))

    # -- worktrees ---------------------------------------------------------------------

    async def create_worktree(self, record: WorktreeRecord) -> WorktreeRecord:
        check_id(record.job_id, "job id")
        record = clean_worktree(self.redactor, record)
        now = time.time()
        row = (*_worktree_row(record), self._json(record.info), now, now)

        async def insert(conn: Conn) -> WorktreeRecord:
            cur = await conn.execute(
                f"INSERT INTO worktrees ({_WT_SQL}) VALUES ({_WT_MARKS}) ON CONFLICT DO NOTHING",
                row,
            )
            if cur.rowcount == 0:
                msg = f"a worktree for job {record.job_id!r} or at {record.path} exists"
                raise DuplicateRecordError(msg)
            return await _get_worktree(conn, record.job_id)

        return await self._call(insert)

    async def get_worktree(self, job_id: str) -> WorktreeRecord:
        return await self._read(lambda conn: _get_worktree(conn, job_id))

    async def list_worktrees(self, *, repo: str | None = None) -> list[WorktreeRecord]:
        repo = clean_opt(self.redactor, repo)

        async def select(conn: Conn) -> list[WorktreeRecord]:
            cur = await conn.execute(
                f"SELECT {_WT_SQL} FROM worktrees WHERE (%(repo)s::text IS NULL"
                " OR repo = %(repo)s) ORDER BY created_at, ord",
                {"repo": repo},
            )
            return [_worktree(row) for row in await cur.fetchall()]

        return await self._read(select)

    async def update_worktree(
        self, job_id: str, *, state: str | None = None, info: JsonDict | None = None
    ) -> WorktreeRecord:
        values = {"state": state, "info": None if info is None else self._json(info)}

        async def update(conn: Conn) -> WorktreeRecord:
            cur = await conn.execute(
                "UPDATE worktrees SET state = COALESCE(%(state)s, state),"
                " info = COALESCE(%(info)s, info), updated_at = %(now)s WHERE job_id = %(job_id)s",
                {**values, "now": time.time(), "job_id": job_id},
            )
            if cur.rowcount == 0:
                raise UnknownWorktreeError(job_id)
            return await _get_worktree(conn, job_id)

        return await self._call(update)


# -- rows -------------------------------------------------------------------------------

_ROUTINE_SELECT = "SELECT name, enabled, anchor_at, updated_at FROM routines"


def _routine(row: Sequence[Any]) -> RoutineRecord:
    return RoutineRecord(name=row[0], enabled=bool(row[1]), anchor_at=row[2], updated_at=row[3])


async def _get_routine(conn: Conn, name: str) -> RoutineRecord:
    cur = await conn.execute(_ROUTINE_SELECT + " WHERE name = %s", (name,))
    row = await cur.fetchone()
    assert row is not None
    return _routine(row)


async def _register_routine(conn: Conn, name: str, now: float) -> RoutineRecord:
    await conn.execute(
        "INSERT INTO routines (name, enabled, anchor_at, updated_at) VALUES (%s, TRUE, %s, %s)"
        " ON CONFLICT (name) DO NOTHING",
        (name, now, now),
    )
    return await _get_routine(conn, name)


def _firing_key(firing: Firing) -> float:
    """Firings are keyed to the millisecond, so float noise never makes two keys."""
    return round(firing.scheduled_for, 3)


async def _insert_firing(
    conn: Conn, firing: Firing, at: float, outcome: str, job_id: str | None, detail: str
) -> None:
    try:
        async with conn.transaction():  # a savepoint: the caller sees a clean error
            await conn.execute(
                "INSERT INTO routine_firings (routine, scheduled_for, kind, outcome, job_id,"
                " detail, fired_at) VALUES (%s, %s, %s, %s, %s, %s, %s)",
                (firing.routine, at, firing.kind, outcome, job_id, detail, time.time()),
            )
    except pg_errors.UniqueViolation as exc:
        raise FiringExistsError(firing.routine, at) from exc


async def _firings(
    conn: Conn,
    routine: str,
    *,
    kind: str | None = None,
    at: float | None = None,
    limit: int | None = None,
) -> list[FiringRecord]:
    cur = await conn.execute(
        "SELECT f.routine, f.scheduled_for, f.kind, f.outcome, f.fired_at, f.job_id,"
        " j.state, f.detail FROM routine_firings f LEFT JOIN jobs j ON j.id = f.job_id"
        " WHERE f.routine = %(routine)s AND (%(kind)s::text IS NULL OR f.kind = %(kind)s)"
        " AND (%(at)s::float8 IS NULL OR f.scheduled_for = %(at)s)"
        " ORDER BY f.scheduled_for DESC LIMIT %(limit)s::bigint",
        {"routine": routine, "kind": kind, "at": at, "limit": limit},
    )
    return [_firing(row) for row in await cur.fetchall()]


def _firing(r: Sequence[Any]) -> FiringRecord:
    return FiringRecord(
        routine=r[0],
        scheduled_for=r[1],
        kind=r[2],
        outcome=r[3],
        fired_at=r[4],
        job_id=r[5],
        job_state=None if r[6] is None else JobState(r[6]),
        detail=json.loads(r[7]),
    )


async def _require_session(conn: Conn, session_id: str) -> None:
    cur = await conn.execute("SELECT 1 FROM sessions WHERE id = %s", (session_id,))
    if await cur.fetchone() is None:
        raise UnknownSessionError(session_id)


async def _get_job(conn: Conn, job_id: str) -> JobRecord:
    cur = await conn.execute(f"SELECT {', '.join(_JOB_COLUMNS)} FROM jobs WHERE id = %s", (job_id,))
    row = await cur.fetchone()
    assert row is not None
    return _job(row)


_WT_COLUMNS = (
    "job_id",
    "repo",
    "path",
    "branch",
    "base",
    "base_commit",
    "into_branch",
    "state",
    "info",
    "created_at",
    "updated_at",
)
_WT_SQL = ", ".join(_WT_COLUMNS)
_WT_MARKS = ", ".join("%s" for _ in _WT_COLUMNS)


def _worktree_row(record: WorktreeRecord) -> tuple[str, ...]:
    r = record
    return (r.job_id, r.repo, r.path, r.branch, r.base, r.base_commit, r.into, r.state)


def _worktree(row: Sequence[Any]) -> WorktreeRecord:
    data = dict(zip(_WT_COLUMNS, row, strict=True))
    data["into"] = data.pop("into_branch")
    data["info"] = json.loads(data["info"])
    return WorktreeRecord(**data)


async def _get_worktree(conn: Conn, job_id: str) -> WorktreeRecord:
    cur = await conn.execute(f"SELECT {_WT_SQL} FROM worktrees WHERE job_id = %s", (job_id,))
    row = await cur.fetchone()
    if row is None:
        raise UnknownWorktreeError(job_id)
    return _worktree(row)
