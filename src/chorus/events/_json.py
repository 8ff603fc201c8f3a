"""JSON round trip and schema export for events and UCP frames.

Parsing is guarded: the size cap is checked on the raw bytes *before* any JSON
decoding, and every failure is a typed :class:`chorus.EventError`.
"""

from __future__ import annotations

from typing import Any, TypeVar

from pydantic import TypeAdapter, ValidationError

from chorus._errors import EventTooLargeError, InvalidEventError
from chorus._limits import MAX_EVENT_BYTES
from chorus.events._model import EVENT_ADAPTER, Event

T = TypeVar("T")


def _as_bytes(data: str | bytes) -> bytes:
    return data.encode("utf-8") if isinstance(data, str) else data


def validate_json(adapter: TypeAdapter[T], data: str | bytes, *, max_bytes: int) -> T:
    """Decode ``data`` with ``adapter``, enforcing ``max_bytes`` first."""
    raw = _as_bytes(data)
    if len(raw) > max_bytes:
        raise EventTooLargeError(len(raw), max_bytes)
    try:
        return adapter.validate_json(raw)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or "<root>"
        raise InvalidEventError(f"{where}: {first['msg']}") from exc


def parse_event(data: str | bytes, *, max_bytes: int = MAX_EVENT_BYTES) -> Event:
    """Parse one serialized canonical event. Raises :class:`chorus.EventError`."""
    return validate_json(EVENT_ADAPTER, data, max_bytes=max_bytes)


def event_from_dict(data: dict[str, Any]) -> Event:
    """Validate an already-decoded event dict (e.g. a row from the store)."""
    try:
        return EVENT_ADAPTER.validate_python(data)
    except ValidationError as exc:
        raise InvalidEventError(str(exc.errors()[0]["msg"])) from exc


def event_to_json(event: Event) -> str:
    """Serialize one event to compact JSON (the inverse of :func:`parse_event`)."""
    return event.model_dump_json()


def event_json_schema() -> dict[str, Any]:
    """JSON Schema (draft 2020-12) of the :data:`Event` union."""
    return EVENT_ADAPTER.json_schema(mode="serialization")
