"""Control requests: one per (session, request id), and its one response."""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from typing import Any

from chorus.store._errors import (
    ControlAnsweredError,
    DuplicateRecordError,
    StoreError,
    UnknownControlRequestError,
)
from chorus.store._query import Query, count, one, rows
from chorus.store._records import ControlRecord, ControlStatus, JsonDict
from chorus.store._repo import Repo
from chorus.store._sessions import require_session

_SELECT = (
    "SELECT session_id, request_id, subtype, payload, status, requested_at, response,"
    " responded_at FROM control_requests"
)
_INSERT = (
    "INSERT INTO control_requests (session_id, request_id, subtype, payload, status,"
    " requested_at) VALUES (?, ?, ?, ?, 'pending', ?) ON CONFLICT DO NOTHING"
)
_ANSWER = (
    "UPDATE control_requests SET status = ?, response = ?, responded_at = ?"
    " WHERE session_id = ? AND request_id = ? AND status = 'pending'"
)
_LIST = (
    _SELECT + " WHERE session_id = :id AND (CAST(:status AS TEXT) IS NULL"
    " OR status = :status) ORDER BY requested_at, {ord}"
)


class Controls(Repo):
    """The control-request part of :class:`~chorus.store.Store`."""

    async def record_control_request(
        self, session_id: str, request_id: str, subtype: str, payload: JsonDict | None = None
    ) -> ControlRecord:
        """Insert a pending control request. Raises :class:`DuplicateRecordError`
        if the session already has ``request_id``, :class:`UnknownSessionError`."""
        text = self.redactor.redact_text(subtype)
        row = (session_id, request_id, text, self._json(payload or {}), time.time())
        return await self._call(lambda: _insert(row))

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
        if status is ControlStatus.PENDING:
            raise StoreError("a control response cannot have status 'pending'")
        values = (status.value, self._json(response or {}), time.time(), session_id, request_id)
        return await self._call(lambda: _answer(values))

    async def get_control_request(self, session_id: str, request_id: str) -> ControlRecord:
        """The control request, or :class:`UnknownControlRequestError`."""
        return await self._read(lambda: _get(session_id, request_id))

    async def list_control_requests(
        self, session_id: str, *, status: ControlStatus | None = None
    ) -> list[ControlRecord]:
        """The session's control requests, oldest first."""
        params = {"id": session_id, "status": status.value if status else None}
        return await self._read(lambda: _list(params))


def _record(row: Sequence[Any]) -> ControlRecord:
    return ControlRecord(
        session_id=row[0],
        request_id=row[1],
        subtype=row[2],
        payload=json.loads(row[3]),
        status=ControlStatus(row[4]),
        requested_at=row[5],
        response=None if row[6] is None else json.loads(row[6]),
        responded_at=row[7],
    )


def _get(session_id: str, request_id: str) -> Query[ControlRecord]:
    where = " WHERE session_id = ? AND request_id = ?"
    row = yield from one(_SELECT + where, (session_id, request_id))
    if row is None:
        raise UnknownControlRequestError(session_id, request_id)
    return _record(row)


def _insert(row: tuple[Any, ...]) -> Query[ControlRecord]:
    session_id, request_id = row[0], row[1]
    yield from require_session(session_id)
    if (yield from count(_INSERT, row)) == 0:
        msg = f"session {session_id!r} already has control request {request_id!r}"
        raise DuplicateRecordError(msg)
    return (yield from _get(session_id, request_id))


def _answer(values: tuple[Any, ...]) -> Query[ControlRecord]:
    session_id, request_id = values[3], values[4]
    if (yield from count(_ANSWER, values)) == 0:
        current = yield from _get(session_id, request_id)
        status = current.status.value
        raise ControlAnsweredError(f"control request {request_id!r} already answered ({status})")
    return (yield from _get(session_id, request_id))


def _list(params: dict[str, Any]) -> Query[list[ControlRecord]]:
    return [_record(row) for row in (yield from rows(_LIST, params))]
