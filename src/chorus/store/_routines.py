"""Routines' scheduling state and their firings.

A firing's primary key (routine, scheduled time), written in the transaction that
queues its job, is what makes a firing queue at most one job, across every node of
a cluster (the routine leader only makes it rare that two nodes even try)."""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from typing import Any

from chorus.store._errors import FiringExistsError
from chorus.store._jobs import get_job, insert_job, job_row_of
from chorus.store._query import NO_LIMIT, Query, count, one, rows
from chorus.store._records import (
    Firing,
    FiringRecord,
    JobRecord,
    JobState,
    JsonDict,
    RoutineRecord,
    new_id,
)
from chorus.store._repo import Repo

_SELECT = "SELECT name, enabled, anchor_at, updated_at FROM routines"
_REGISTER = (
    "INSERT INTO routines (name, enabled, anchor_at, updated_at) VALUES (?, TRUE, ?, ?)"
    " ON CONFLICT (name) DO NOTHING"
)
_ENABLE = "UPDATE routines SET enabled = ?, updated_at = ? WHERE name = ?"
_INSERT_FIRING = (
    "INSERT INTO routine_firings (routine, scheduled_for, kind, outcome, job_id, detail,"
    " fired_at) VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT (routine, scheduled_for) DO NOTHING"
)
_FIRINGS = (
    "SELECT f.routine, f.scheduled_for, f.kind, f.outcome, f.fired_at, f.job_id, j.state,"
    " f.detail FROM routine_firings f LEFT JOIN jobs j ON j.id = f.job_id"
    " WHERE f.routine = :routine AND (CAST(:kind AS TEXT) IS NULL OR f.kind = :kind)"
    " AND (CAST(:at AS DOUBLE PRECISION) IS NULL OR f.scheduled_for = :at)"
    " ORDER BY f.scheduled_for DESC LIMIT :limit"
)


class Routines(Repo):
    """The routines part of :class:`~chorus.store.Store`."""

    async def register_routine(self, name: str, *, now: float | None = None) -> RoutineRecord:
        """The routine's state row, created (enabled, anchored at ``now``, default the
        current time) if it is new."""
        at = time.time() if now is None else now
        name = self.redactor.redact_text(name)
        return await self._call(lambda: _register(name, at))

    async def list_routine_records(self) -> list[RoutineRecord]:
        """Every routine's state row, by name."""
        return await self._read(_list)

    async def set_routine_enabled(self, name: str, enabled: bool) -> RoutineRecord:
        """Enable or disable (registering it first if new)."""
        name = self.redactor.redact_text(name)
        return await self._call(lambda: _enable(name, enabled))

    async def delete_routine(self, name: str) -> None:
        """Forget the routine's state and firings (its jobs stay). Idempotent."""
        name = self.redactor.redact_text(name)
        await self._call(lambda: _delete(name))

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
        row = self._firing_row(firing, "queued")
        merged = {**(options or {}), "routine": row[0], "scheduled_for": row[1]}
        job_row = job_row_of(self, new_id(), prompt, body, session_id, merged, affinity)
        job = await self._call(lambda: _fire(row, job_row))
        self._jobs_queued()
        return job

    async def record_firing(self, firing: Firing, outcome: str) -> FiringRecord:
        """Record a firing that queued no job (skipped, coalesced, missed ...).
        Raises :class:`FiringExistsError`."""
        row = self._firing_row(firing, outcome)
        return await self._call(lambda: _record(row))

    async def list_firings(
        self, routine: str, *, kind: str | None = None, limit: int | None = None
    ) -> list[FiringRecord]:
        """The routine's firings (optionally of one ``kind``), latest scheduled time
        first, with their jobs' states."""
        params: dict[str, Any] = {"routine": self.redactor.redact_text(routine), "kind": kind}
        params.update(at=None, limit=limit or NO_LIMIT)
        return await self._read(lambda: _firings(params))

    def _firing_row(self, firing: Firing, outcome: str) -> list[Any]:
        """The firing's row (``job_id`` None), keyed to the millisecond so that float
        noise never makes two keys."""
        at = round(firing.scheduled_for, 3)
        routine = self.redactor.redact_text(firing.routine)
        detail = self._json(firing.detail)
        return [routine, at, firing.kind, outcome, None, detail, time.time()]


def _routine(row: Sequence[Any]) -> RoutineRecord:
    return RoutineRecord(name=row[0], enabled=bool(row[1]), anchor_at=row[2], updated_at=row[3])


def _get(name: str) -> Query[RoutineRecord]:
    return _routine((yield from one(_SELECT + " WHERE name = ?", (name,))))


def _list() -> Query[list[RoutineRecord]]:
    return [_routine(row) for row in (yield from rows(_SELECT + " ORDER BY name"))]


def _register(name: str, now: float) -> Query[RoutineRecord]:
    yield from count(_REGISTER, (name, now, now))
    return (yield from _get(name))


def _enable(name: str, enabled: bool) -> Query[RoutineRecord]:
    yield from _register(name, time.time())
    yield from count(_ENABLE, (enabled, time.time(), name))
    return (yield from _get(name))


def _delete(name: str) -> Query[None]:
    yield from count("DELETE FROM routine_firings WHERE routine = ?", (name,))
    yield from count("DELETE FROM routines WHERE name = ?", (name,))


def _insert_firing(row: Sequence[Any]) -> Query[None]:
    if (yield from count(_INSERT_FIRING, tuple(row))) == 0:
        raise FiringExistsError(row[0], row[1])


def _fire(row: list[Any], job_row: tuple[Any, ...]) -> Query[JobRecord]:
    yield from insert_job(job_row)
    yield from _insert_firing([*row[:4], job_row[0], *row[5:]])
    return (yield from get_job(job_row[0]))


def _record(row: list[Any]) -> Query[FiringRecord]:
    yield from _insert_firing(row)
    params = {"routine": row[0], "kind": None, "at": row[1], "limit": 1}
    return (yield from _firings(params))[0]


def _firings(params: dict[str, Any]) -> Query[list[FiringRecord]]:
    return [_firing(row) for row in (yield from rows(_FIRINGS, params))]


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
