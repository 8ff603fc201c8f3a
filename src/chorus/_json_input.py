"""JSON that arrives from outside (HTTP request bodies), read with limits.

Every endpoint that takes a JSON body reads it through :func:`read_json`: the body
is read with a size cap (checked on ``Content-Length`` and again while reading), its
nesting is measured on the raw text *before* anything is decoded, and only then is
it parsed. ``NaN``/``Infinity`` (not JSON, and unanswerable in a JSON response) and
strings holding a lone surrogate escape (``"\\ud800"``, which no store can encode)
are refused too. Every refusal is a :class:`BadJsonError`, a
:class:`chorus.UserError` the routes answer with HTTP 400 and a message that says
what was wrong; never a traceback or a 500.

:func:`parse_json` is the same check without I/O, for text already in hand.
"""

from __future__ import annotations

import json
import re
from typing import Any

from starlette.requests import Request

from chorus._errors import UserError

#: A request body larger than this is refused unread (the job route has its own cap).
MAX_JSON_BYTES = 1 << 20
#: Deepest nesting accepted (a request needs a few levels; 10,000 would crash a parser).
MAX_JSON_DEPTH = 64
#: Brackets outside strings: a string token first, so brackets inside one are skipped.
_TOKENS = re.compile(r'"(?:[^"\\]|\\.)*"|[\[\]{}]', re.DOTALL)
_MISSING: Any = object()


class BadJsonError(UserError):
    """A request body that is not acceptable JSON; ``code`` is stable."""

    def __init__(self, message: str, code: str = "bad_json") -> None:
        super().__init__(message)
        self.code = code


def parse_json(
    data: bytes | str,
    *,
    max_bytes: int = MAX_JSON_BYTES,
    max_depth: int = MAX_JSON_DEPTH,
    what: str = "the request body",
) -> Any:
    """``data`` decoded (UTF-8, then JSON) within the limits, or :class:`BadJsonError`."""
    raw = data if isinstance(data, bytes) else data.encode("utf-8", "surrogatepass")
    if len(raw) > max_bytes:
        raise _too_large(what, len(raw), max_bytes)
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise BadJsonError(f"{what} is not UTF-8 text (byte {exc.start})") from exc
    _check_depth(text, max_depth, what)
    try:
        value = json.loads(text, parse_constant=_refuse_constant)
    except (ValueError, RecursionError) as exc:
        raise BadJsonError(f"{what} is not JSON: {_short(exc)}") from exc
    _check_strings(value, what)
    return value


async def read_json(
    request: Request,
    *,
    max_bytes: int = MAX_JSON_BYTES,
    max_depth: int = MAX_JSON_DEPTH,
    empty: Any = _MISSING,
    what: str = "the request body",
) -> Any:
    """The request's JSON body (see :func:`parse_json`); an empty body is ``empty``
    when given, else refused."""
    raw = await read_capped(request, max_bytes, what)
    if not raw.strip() and empty is not _MISSING:
        return empty
    return parse_json(raw, max_bytes=max_bytes, max_depth=max_depth, what=what)


async def read_object(request: Request, *, empty: Any = _MISSING, **limits: Any) -> dict[str, Any]:
    """:func:`read_json`, which must be a JSON object."""
    value = await read_json(request, empty=empty, **limits)
    if not isinstance(value, dict):
        raise BadJsonError(f"{limits.get('what', 'the request body')} must be a JSON object")
    return value


async def read_capped(request: Request, cap: int, what: str = "the request body") -> bytes:
    """The body, refused with :class:`BadJsonError` (``body_too_large``) past ``cap``."""
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > cap:
        raise _too_large(what, int(declared), cap)
    chunks: list[bytes] = []
    size = 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > cap:
            raise _too_large(what, size, cap)
        chunks.append(chunk)
    return b"".join(chunks)


def _too_large(what: str, size: int, cap: int) -> BadJsonError:
    return BadJsonError(f"{what} is over {size:,} bytes; the limit is {cap:,}", "body_too_large")


def _check_depth(text: str, limit: int, what: str) -> None:
    """Refuse nesting deeper than ``limit``, counted on the text (no recursion)."""
    depth = 0
    for match in _TOKENS.finditer(text):
        token = match.group()
        if token in ("[", "{"):
            depth += 1
            if depth > limit:
                raise BadJsonError(f"{what} is nested deeper than {limit} levels")
        elif token in ("]", "}"):
            depth -= 1


def _check_strings(value: Any, what: str) -> None:
    """Refuse a string (key or value) that is not encodable UTF-8. Iterative."""
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            _encodable(item, what)
        elif isinstance(item, dict):
            stack.extend(item.keys())
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)


def _encodable(text: str, what: str) -> None:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise BadJsonError(f"{what} holds a lone surrogate escape") from exc


def _refuse_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def _short(exc: BaseException) -> str:
    text = str(exc) or type(exc).__name__
    return text if len(text) <= 200 else text[:200] + "..."
