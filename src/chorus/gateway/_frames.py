"""Inbound frame decoding with limits: total over any input, never an exception.

:func:`decode_frame` turns one WebSocket message into an
:data:`chorus.events.InboundFrame` or a :class:`Rejected` that says which
error response to send. The order of checks is the contract:

1. size, on the raw bytes, before anything is decoded (``frame_too_large``);
2. UTF-8 and JSON (``invalid_json``; ``NaN``/``Infinity`` are not JSON, and a
   document nested deeper than :data:`MAX_DEPTH` or holding a lone surrogate
   escape such as ``"\\ud800"`` is refused too, so that no later stage can
   recurse without bound or fail to encode a string);
3. the UCP v1 envelope (``invalid_request``).

A rejection carries the frame's own ``request_id`` when one can be read from
the decoded JSON, else the empty string (as JSON-RPC answers an unparseable
request with ``id: null``).

Typed validation of a request's fields (:func:`known_request`) happens later,
per subtype, so an unknown subtype is answered ``unsupported`` rather than
refused as malformed.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from pydantic import TypeAdapter, ValidationError

from chorus.events import (
    KNOWN_REQUEST_ADAPTER,
    KNOWN_SUBTYPES,
    ControlRequest,
    ControlResponse,
    InboundFrame,
    KnownRequest,
    OutboundFrame,
    UserMessage,
    error,
)
from chorus.gateway._errors import GatewayCode, RequestError

#: Deepest JSON nesting accepted in a frame (a request needs 4 levels).
MAX_DEPTH = 64
#: Longest request id echoed back in a rejection (the envelope allows 256).
_MAX_ID_CHARS = 256

_INBOUND: TypeAdapter[InboundFrame] = TypeAdapter(InboundFrame)


@dataclass(frozen=True, slots=True)
class Rejected:
    """A frame the gateway will not act on: answer it with :meth:`response`."""

    code: GatewayCode
    message: str
    request_id: str = ""

    def response(self) -> ControlResponse:
        return error(self.request_id, self.message, self.code)


Decoded = InboundFrame | Rejected


def decode_frame(data: str | bytes, *, max_bytes: int) -> Decoded:
    """Decode one inbound message; see the module docstring for the order of checks."""
    size = len(data) if isinstance(data, bytes) else _utf8_size(data)
    if size > max_bytes:
        return Rejected(
            GatewayCode.FRAME_TOO_LARGE,
            f"frame of {size} bytes exceeds the limit of {max_bytes} bytes",
        )
    parsed = _load_json(data)
    if isinstance(parsed, Rejected):
        return parsed
    try:
        return _INBOUND.validate_python(parsed)
    except ValidationError as exc:
        return Rejected(GatewayCode.INVALID_REQUEST, _first_problem(exc), _request_id_of(parsed))


def _utf8_size(text: str) -> int:
    """Bytes of ``text`` in UTF-8, counting a lone surrogate as its 3 bytes (it is refused
    later; the size check must come first and must not fail)."""
    return len(text.encode("utf-8", "surrogatepass"))


def _load_json(data: str | bytes) -> Any:
    try:
        # Decode explicitly: json.loads would also guess UTF-16/32 for bytes.
        text = data.decode("utf-8") if isinstance(data, bytes) else data
        value = json.loads(text, parse_constant=_refuse_constant)
    except (ValueError, RecursionError) as exc:  # UnicodeDecodeError is a ValueError
        return Rejected(GatewayCode.INVALID_JSON, f"frame is not JSON: {_short(exc)}")
    problem = _tree_problem(value, MAX_DEPTH)
    if problem is not None:
        return Rejected(GatewayCode.INVALID_JSON, problem)
    return value


def _refuse_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def _tree_problem(value: Any, limit: int) -> str | None:
    """Why a decoded document is refused: nesting deeper than ``limit`` or a string
    (key or value) that is not encodable UTF-8. Iterative, so it cannot recurse."""
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, str):
            if not _encodable(item):
                return "frame holds a lone surrogate escape"
            continue
        if not isinstance(item, dict | list):
            continue
        if depth > limit:
            return f"frame is nested deeper than {limit}"
        children = [*item.keys(), *item.values()] if isinstance(item, dict) else item
        stack.extend((child, depth + 1) for child in children)
    return None


def _encodable(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _request_id_of(parsed: Any) -> str:
    """The request id a malformed frame meant to use, if it has a readable one."""
    if not isinstance(parsed, dict):
        return ""
    rid = parsed.get("request_id")
    response = parsed.get("response")
    if rid is None and isinstance(response, dict):
        rid = response.get("request_id")
    if isinstance(rid, str) and 0 < len(rid) <= _MAX_ID_CHARS:
        return rid
    return ""


def _first_problem(exc: ValidationError) -> str:
    first = exc.errors()[0]
    where = ".".join(str(p) for p in first["loc"]) or "<root>"
    return f"not a UCP v1 frame: {where}: {first['msg']}"


def _short(exc: BaseException) -> str:
    text = str(exc) or type(exc).__name__
    return text if len(text) <= 200 else text[:200] + "..."


# -- requests ---------------------------------------------------------------------------


def known_request(frame: ControlRequest) -> KnownRequest | None:
    """The typed request, or None for a subtype UCP v1 does not define.

    Raises :class:`RequestError` (``invalid_request``) when a known subtype has
    fields of the wrong type.
    """
    if frame.request.subtype not in KNOWN_SUBTYPES:
        return None
    try:
        return KNOWN_REQUEST_ADAPTER.validate_python(frame.request.model_dump())
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"][1:]) or "request"
        raise RequestError(
            GatewayCode.INVALID_REQUEST,
            f"bad {frame.request.subtype} request: {where}: {first['msg']}",
        ) from exc


def user_text(message: UserMessage) -> str:
    """The prompt of a user message: its string, or its text blocks joined by newlines.

    Raises :class:`RequestError` when there is no text (bodies take text prompts only).
    """
    content = message.message.content
    if isinstance(content, str):
        text = content
    else:
        parts = [b.get("text") for b in content if b.get("type") == "text"]
        text = "\n".join(p for p in parts if isinstance(p, str))
        if len(parts) != len(content):
            raise RequestError(
                GatewayCode.UNSUPPORTED, "only text content blocks are supported in user messages"
            )
    if not text.strip():
        raise RequestError(GatewayCode.INVALID_REQUEST, "the user message has no text")
    return text


def encode_frame(frame: OutboundFrame) -> str:
    """One outbound frame as compact JSON text."""
    return frame.model_dump_json()
