"""Sessions: one row each; ``last_seq`` is counted from the log."""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from typing import Any

from chorus.store._errors import SessionExistsError, UnknownSessionError
from chorus.store._query import Query, count, one, rows, update_sql
from chorus.store._records import JsonDict, SessionRecord, check_id, new_id
from chorus.store._repo import Repo

_SELECT = (
    "SELECT s.id, s.body, s.state, s.created_at, s.updated_at, s.model, s.cwd,"
    " s.native_session_id, s.transport,"
    " (SELECT COALESCE(MAX(seq), 0) FROM events e WHERE e.session_id = s.id) FROM sessions s"
)
_INSERT = (
    "INSERT INTO sessions (id, body, model, cwd, native_session_id, transport, state,"
    " created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (id) DO NOTHING"
)
_LIST = (
    _SELECT + " WHERE (CAST(:state AS TEXT) IS NULL OR s.state = :state)"
    " AND (CAST(:body AS TEXT) IS NULL OR s.body = :body)"
    " ORDER BY s.created_at DESC, s.{ord} DESC LIMIT :limit"
)
_COLUMNS = frozenset({"state", "model", "native_session_id", "transport", "updated_at"})


class Sessions(Repo):
    """The sessions part of :class:`~chorus.store.Store`."""

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
        sid = check_id(session_id or new_id(), "session id")
        now = time.time()
        cleaned = [self._clean(v) for v in (model, cwd, native_session_id)]
        row = (sid, body, *cleaned, self._json(transport or {}), state, now, now)
        return await self._call(lambda: _insert(row))

    async def get_session(self, session_id: str) -> SessionRecord:
        """The session, or :class:`UnknownSessionError`."""
        return await self._read(lambda: get_session(session_id))

    async def list_sessions(
        self, *, state: str | None = None, body: str | None = None, limit: int = 100
    ) -> list[SessionRecord]:
        """Sessions, newest first, optionally filtered by state and body."""
        params = {"state": state, "body": body, "limit": limit}
        return await self._read(lambda: _list(params))

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
        changes: dict[str, Any] = {
            "state": state,
            "model": self._clean(model),
            "native_session_id": self._clean(native_session_id),
            "transport": None if transport is None else self._json(transport),
        }
        changes = {key: value for key, value in changes.items() if value is not None}
        changes["updated_at"] = time.time()
        return await self._call(lambda: _update(session_id, changes))


def session_record(row: Sequence[Any]) -> SessionRecord:
    return SessionRecord(
        id=row[0],
        body=row[1],
        state=row[2],
        created_at=row[3],
        updated_at=row[4],
        model=row[5],
        cwd=row[6],
        native_session_id=row[7],
        transport=json.loads(row[8]),
        last_seq=row[9],
    )


def get_session(session_id: str) -> Query[SessionRecord]:
    row = yield from one(_SELECT + " WHERE s.id = ?", (session_id,))
    if row is None:
        raise UnknownSessionError(session_id)
    return session_record(row)


def require_session(session_id: str) -> Query[None]:
    if (yield from one("SELECT 1 FROM sessions WHERE id = ?", (session_id,))) is None:
        raise UnknownSessionError(session_id)


def _insert(row: tuple[Any, ...]) -> Query[SessionRecord]:
    if (yield from count(_INSERT, row)) == 0:
        raise SessionExistsError(f"session {row[0]!r} already exists")
    return (yield from get_session(row[0]))


def _list(params: dict[str, Any]) -> Query[list[SessionRecord]]:
    return [session_record(row) for row in (yield from rows(_LIST, params))]


def _update(session_id: str, changes: dict[str, Any]) -> Query[SessionRecord]:
    assert set(changes) <= _COLUMNS  # fixed column names, never caller input
    sql = update_sql("sessions", list(changes), "id = :id")
    if (yield from count(sql, {**changes, "id": session_id})) == 0:
        raise UnknownSessionError(session_id)
    return (yield from get_session(session_id))
