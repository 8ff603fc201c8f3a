"""Control requests in the store: the control table (one answer per id) and the log.

Every session-bound request is recorded before it runs (the store's control
table, plus a :class:`ControlRequestEvent` in the session's log) and its answer
after (:class:`ControlResponseEvent`). The control table's unique ids make
retries safe: a request id seen before is answered from the table, not run
again.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Protocol

from chorus.events import (
    ControlRequest,
    ControlRequestEvent,
    ControlResponse,
    ControlResponseEvent,
    ErrorCode,
    ErrorInfo,
    JsonDict,
    error,
)
from chorus.gateway._errors import GatewayCode
from chorus.store import ORIGIN_CHORUS, ControlStatus, DuplicateRecordError, Store

log = logging.getLogger("chorus.gateway")

_STATUS_OF: dict[str, ControlStatus] = {
    GatewayCode.TIMEOUT: ControlStatus.TIMEOUT,
    GatewayCode.CANCELLED: ControlStatus.CANCELLED,
}


class _HasId(Protocol):
    @property
    def id(self) -> str: ...


def payload_of(frame: ControlRequest) -> JsonDict:
    """The request's fields without its subtype."""
    return frame.request.model_dump(exclude={"subtype"})


def error_reply(frame: ControlRequest, code: GatewayCode, text: str) -> ControlResponse:
    return error(frame.request_id, text, code)


class ControlRecords:
    """Record requests and answers of any session in ``store``."""

    def __init__(self, store: Store) -> None:
        self._store = store

    async def open(self, session: _HasId, frame: ControlRequest) -> ControlResponse | None:
        """Record the request. For an id recorded before: its recorded answer, or a
        ``duplicate_request`` error when it has none yet. Store errors propagate."""
        rid, subtype, payload = frame.request_id, frame.request.subtype, payload_of(frame)
        try:
            await self._store.record_control_request(session.id, rid, subtype, payload)
        except DuplicateRecordError:
            return await self._replay(session, frame)
        event = ControlRequestEvent(request_id=rid, subtype=subtype, payload=payload)
        await self._store.append(session.id, event, origin=ORIGIN_CHORUS)
        return None

    async def _replay(self, session: _HasId, frame: ControlRequest) -> ControlResponse:
        record = await self._store.get_control_request(session.id, frame.request_id)
        if record.response is None:
            message = f"request {frame.request_id!r} was received before and has no answer yet"
            return error_reply(frame, GatewayCode.DUPLICATE_REQUEST, message)
        return ControlResponse.model_validate({"response": record.response})

    async def close(self, session: _HasId, frame: ControlRequest, reply: ControlResponse) -> None:
        """Record the answer; a store failure is logged (the brain gets its answer anyway)."""
        body = reply.response
        if body.subtype == "success":
            status = ControlStatus.OK
            event = ControlResponseEvent(
                request_id=frame.request_id, ok=True, payload=body.response
            )
        else:
            status = _STATUS_OF.get(body.error_code, ControlStatus.ERROR)
            event = _error_event(frame.request_id, body.error_code, body.error)
        try:  # both in one group commit: they do not depend on each other
            await asyncio.gather(
                self._store.record_control_response(
                    session.id, frame.request_id, status=status, response=body.model_dump()
                ),
                self._store.append(session.id, event, origin=ORIGIN_CHORUS),
            )
        except Exception:  # the store is failing; the answer still goes out
            log.exception("could not record the answer to %s", frame.request_id)


def _error_event(request_id: str, code: str, message: str) -> ControlResponseEvent:
    """A failed response as an event (gateway-only codes map to ``unknown``, the exact
    code kept in ``native``)."""
    try:
        event_code = ErrorCode(code)
    except ValueError:
        event_code = ErrorCode.UNKNOWN
    info = ErrorInfo(code=event_code, message=message, native={"error_code": code})
    return ControlResponseEvent(request_id=request_id, ok=False, error=info)
