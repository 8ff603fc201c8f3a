"""The git worktree a job runs in, keyed by the job that made it."""

from __future__ import annotations

import dataclasses
import json
import time
from collections.abc import Sequence
from typing import Any

from chorus.store._errors import DuplicateRecordError, UnknownWorktreeError
from chorus.store._query import Query, count, one, rows
from chorus.store._records import JsonDict, WorktreeRecord, check_id
from chorus.store._redact import Redactor
from chorus.store._repo import Repo

WORKTREE_COLUMNS = (
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
_SQL = ", ".join(WORKTREE_COLUMNS)
_INSERT = (
    f"INSERT INTO worktrees ({_SQL}) VALUES ({', '.join('?' for _ in WORKTREE_COLUMNS)})"
    " ON CONFLICT DO NOTHING"
)
_LIST = (
    f"SELECT {_SQL} FROM worktrees WHERE (CAST(:repo AS TEXT) IS NULL OR repo = :repo)"
    " ORDER BY created_at, {ord}"
)
_UPDATE = (
    "UPDATE worktrees SET state = COALESCE(:state, state), info = COALESCE(:info, info),"
    " updated_at = :now WHERE job_id = :job_id"
)


class Worktrees(Repo):
    """The worktrees part of :class:`~chorus.store.Store`."""

    async def create_worktree(self, record: WorktreeRecord) -> WorktreeRecord:
        """Insert the record (its timestamps are set now). Raises
        :class:`DuplicateRecordError` when the job or the path already has one."""
        check_id(record.job_id, "job id")
        r, now = _clean(self.redactor, record), time.time()
        row: tuple[Any, ...] = (r.job_id, r.repo, r.path, r.branch, r.base, r.base_commit)
        row += (r.into, r.state, self._json(r.info), now, now)
        return await self._call(lambda: _insert(row))

    async def get_worktree(self, job_id: str) -> WorktreeRecord:
        """The job's worktree, or :class:`UnknownWorktreeError`."""
        return await self._read(lambda: _get(job_id))

    async def list_worktrees(self, *, repo: str | None = None) -> list[WorktreeRecord]:
        """Worktree records oldest first, optionally of one repository."""
        params = {"repo": self._clean(repo)}
        return await self._read(lambda: _list(params))

    async def update_worktree(
        self, job_id: str, *, state: str | None = None, info: JsonDict | None = None
    ) -> WorktreeRecord:
        """Set the state and/or replace ``info`` (None: leave as is) and ``updated_at``.
        Raises :class:`UnknownWorktreeError`."""
        params: dict[str, Any] = {"state": state, "now": time.time(), "job_id": job_id}
        params["info"] = None if info is None else self._json(info)
        return await self._call(lambda: _update(params))


def _clean(redactor: Redactor, record: WorktreeRecord) -> WorktreeRecord:
    """The record with its text columns (not ``job_id``, ``base_commit``, ``state``) redacted."""
    redact = redactor.redact_text
    return dataclasses.replace(
        record,
        repo=redact(record.repo),
        path=redact(record.path),
        branch=redact(record.branch),
        base=redact(record.base),
        into=redact(record.into),
    )


def _record(row: Sequence[Any]) -> WorktreeRecord:
    data = dict(zip(WORKTREE_COLUMNS, row, strict=True))
    data["into"] = data.pop("into_branch")
    data["info"] = json.loads(data["info"])
    return WorktreeRecord(**data)


def _get(job_id: str) -> Query[WorktreeRecord]:
    row = yield from one(f"SELECT {_SQL} FROM worktrees WHERE job_id = ?", (job_id,))
    if row is None:
        raise UnknownWorktreeError(job_id)
    return _record(row)


def _insert(row: tuple[Any, ...]) -> Query[WorktreeRecord]:
    if (yield from count(_INSERT, row)) == 0:
        raise DuplicateRecordError(f"a worktree for job {row[0]!r} or at {row[2]} exists")
    return (yield from _get(row[0]))


def _list(params: dict[str, Any]) -> Query[list[WorktreeRecord]]:
    return [_record(row) for row in (yield from rows(_LIST, params))]


def _update(params: dict[str, Any]) -> Query[WorktreeRecord]:
    if (yield from count(_UPDATE, params)) == 0:
        raise UnknownWorktreeError(params["job_id"])
    return (yield from _get(params["job_id"]))
