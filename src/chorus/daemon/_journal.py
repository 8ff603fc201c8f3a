"""Structured lines in ``daemon.log``: one JSON object per body and
session transition, read off the log as it is written (like the metrics), so a
plain ``grep``/``jq`` over the daemon's log tells what happened and when.

A record carrying ``extra={"structured": {...}}`` is written by
:class:`JsonLineFormatter` as one JSON line; every other record keeps the plain
format.
"""

from __future__ import annotations

import json
import logging
import time
from typing import Any

from chorus.events import (
    Event,
    Handoff,
    JobEnded,
    Notice,
    Routed,
    SessionEnded,
    SessionStarted,
    TurnFailed,
)

log = logging.getLogger("chorus.journal")
#: Notices that mark a transition of the body (not chatter).
_NOTICE_KINDS = frozenset({"recovery", "resume", "waiting", "retry", "budget"})


class JsonLineFormatter(logging.Formatter):
    """Plain lines as ``fmt`` says; records with ``structured`` as one JSON object."""

    def format(self, record: logging.LogRecord) -> str:
        fields = getattr(record, "structured", None)
        if not isinstance(fields, dict):
            return super().format(record)
        stamp = time.strftime("%Y-%m-%dT%H:%M:%S", time.localtime(record.created))
        head = {"ts": f"{stamp}.{int(record.msecs):03d}", "level": record.levelname.lower()}
        return json.dumps({**head, "logger": record.name, **fields}, default=str)


def structured(logger: logging.Logger, level: int, event: str, **fields: Any) -> None:
    """Log one structured line: ``{"event": event, **fields}``."""
    logger.log(level, event, extra={"structured": {"event": event, **fields}})


def journal(event: Event) -> None:
    """Log ``event`` if it is a body or session transition."""
    fields = _fields(event)
    if fields is None:
        return
    ids = {"session": event.session_id, "job": event.job_id, "body": event.body or None}
    level = logging.WARNING if fields.get("error") else logging.INFO
    structured(log, level, event.type, **{k: v for k, v in ids.items() if v}, **fields)


def _fields(event: Event) -> dict[str, Any] | None:
    match event:
        case SessionStarted():
            return {"model": event.model, "native_session": event.native_session_id}
        case SessionEnded():
            return {"reason": event.reason, "error": _code(event.error)}
        case JobEnded():
            return {"state": event.state, "attempts": event.attempts, "error": _code(event.error)}
        case Routed():
            return {"to": event.to_body, "reason": event.reason, "failover": event.failover}
        case Handoff():
            return {"from": event.from_body, "to": event.to_body, "error": _code(event.reason)}
        case TurnFailed():
            return {"error": _code(event.error)}
        case Notice() if event.kind in _NOTICE_KINDS:
            return {"kind": event.kind, "message": event.message}
    return None


def _code(error: Any) -> str | None:
    return str(error.code) if error is not None else None
