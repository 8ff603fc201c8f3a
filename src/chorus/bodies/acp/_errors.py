"""ACP errors, and the translation of model-API failures into stable error codes.

Errors raised by this package extend Chorus's tree (``chorus._errors``)::

    BodyError
    ├── AcpRpcError        the agent answered one of our requests with a JSON-RPC error
    └── FsAccessError      the agent asked for a file we refuse to serve (outside the
                           session's roots, missing, too large); sent back to the agent
                           as a JSON-RPC error, never raised to the caller of a body
    UserError
    └── AcpStateError      a command that does not fit the session's state (a second
                           prompt while a turn runs, a prompt before the session exists)

:func:`classify_api_error` turns the text of a model-API failure (as an agent
reports it: a JSON-RPC error message, a ``result.error.message``, a stderr tail)
into an :class:`ErrorInfo`. Structured signals (an HTTP status, a JSON-RPC code)
are passed in as ``status`` and win over text; text decides between quota and
rate limit, which share status 429.
"""

from __future__ import annotations

import json
import re
from typing import Any

from chorus._errors import BodyError, UserError
from chorus.events import ErrorCode, ErrorInfo

# JSON-RPC 2.0 and ACP error codes (ACP adds -32000 auth required, -32002 not found).
PARSE_ERROR = -32700
INVALID_REQUEST = -32600
METHOD_NOT_FOUND = -32601
INVALID_PARAMS = -32602
INTERNAL_ERROR = -32603
AUTH_REQUIRED = -32000
RESOURCE_NOT_FOUND = -32002


class AcpRpcError(BodyError):
    """The agent answered ``method`` with a JSON-RPC error object."""

    def __init__(self, method: str, code: int, message: str, data: Any = None) -> None:
        detail = _details(data)
        text = f"{method} failed ({code}): {message}"
        super().__init__(f"{text}: {detail}" if detail else text)
        self.method = method
        self.code = code
        self.rpc_message = message
        self.data = data

    def info(self) -> ErrorInfo:
        """The canonical error for this failure (see :func:`rpc_error_info`)."""
        return rpc_error_info(self.code, self.rpc_message, self.data)


class AcpStateError(UserError):
    """A command that does not fit the session's current state."""


class FsAccessError(BodyError):
    """A ``fs/*`` request we refuse; ``code`` is the JSON-RPC error code to answer with."""

    def __init__(self, code: int, message: str, *, path: str | None = None) -> None:
        super().__init__(message)
        self.code = code
        self.path = path

    def error_object(self) -> dict[str, Any]:
        """The JSON-RPC ``error`` member for the reply to the agent."""
        data = {"path": self.path} if self.path is not None else None
        body: dict[str, Any] = {"code": self.code, "message": str(self)}
        if data is not None:
            body["data"] = data
        return body


# -- classification of model-API failures --------------------------------------

_RETRY_HINT = re.compile(r"retry (?:in|after)\s+(\d+(?:\.\d+)?)\s*(ms|s)\b", re.IGNORECASE)
_EMBEDDED_STATUS = re.compile(r'"code"\s*:\s*(\d{3})\b|\bstatus(?: code)?\s+(\d{3})\b')

_DAILY_QUOTA = ("daily quota", "perday", "per day")
_QUOTA = (
    "exceeded your current quota",
    "insufficient_quota",
    "check your plan and billing",
    "usage limit",
    "quota exceeded",
)
_RATE = ("resource has been exhausted", "rate limit", "too many requests", "resource_exhausted")
_AUTH = (
    "api key not valid",
    "api_key_invalid",
    "invalid api key",
    "unauthenticated",
    "unauthorized",
    "invalid auth method",
)
_CONTEXT = ("maximum number of tokens", "context window", "context_length", "too long")
_OVERLOADED = ("overloaded", "service unavailable")
_SERVER = ("internal error", "internal", "server error")


def classify_api_error(message: str, *, status: int | None = None) -> ErrorInfo:
    """Map the text of a model-API failure (and its HTTP status if known) to an error code.

    Quota and rate limit both arrive as 429: a daily quota, or one with no retry
    hint, is ``quota_exhausted`` (fail over); one that says when to retry is
    ``rate_limited`` with ``retry_after_s``; a bare "resource exhausted" is
    ``rate_limited`` (the API itself retries those).
    """
    lower = message.lower()
    status = status if status is not None else _status_in_text(message)
    retry_after = _retry_after(message)
    code = _code_for(lower, status, retry_after)
    return ErrorInfo(
        code=code,
        message=message.strip() or f"model API error (status {status})",
        retryable=code in _RETRYABLE or (code is ErrorCode.API_ERROR and "empty" in lower),
        retry_after_s=retry_after if code is ErrorCode.RATE_LIMITED else None,
        http_status=status if status is not None and 100 <= status <= 599 else None,
    )


_RETRYABLE = frozenset(
    {ErrorCode.RATE_LIMITED, ErrorCode.OVERLOADED, ErrorCode.SERVER_ERROR, ErrorCode.NETWORK}
)


def _code_for(lower: str, status: int | None, retry_after: float | None) -> ErrorCode:
    if status == 429 or _has(lower, _DAILY_QUOTA + _QUOTA + _RATE):
        return _limit_code(lower, retry_after)
    if status in (401, 403) or _has(lower, _AUTH):
        return ErrorCode.AUTH
    if _has(lower, _CONTEXT):
        return ErrorCode.CONTEXT_OVERFLOW
    if status == 503 or _has(lower, _OVERLOADED):
        return ErrorCode.OVERLOADED
    if (status is not None and status >= 500) or _has(lower, _SERVER):
        return ErrorCode.SERVER_ERROR
    return ErrorCode.API_ERROR


def _limit_code(lower: str, retry_after: float | None) -> ErrorCode:
    if _has(lower, _DAILY_QUOTA):
        return ErrorCode.QUOTA_EXHAUSTED
    if retry_after is not None:
        return ErrorCode.RATE_LIMITED
    if _has(lower, _QUOTA):
        return ErrorCode.QUOTA_EXHAUSTED
    return ErrorCode.RATE_LIMITED


def _has(text: str, needles: tuple[str, ...]) -> bool:
    return any(needle in text for needle in needles)


def _retry_after(message: str) -> float | None:
    found = _RETRY_HINT.search(message)
    if found is None:
        return None
    value = float(found.group(1))
    return value / 1000 if found.group(2).lower() == "ms" else value


def _status_in_text(message: str) -> int | None:
    found = _EMBEDDED_STATUS.search(message)
    if found is None:
        return None
    return int(found.group(1) or found.group(2))


# -- JSON-RPC errors ---------------------------------------------------------------


def rpc_error_info(code: int, message: str, data: Any = None) -> ErrorInfo:
    """The canonical error for a JSON-RPC error the agent sent in answer to a prompt.

    Gemini reports model-API failures with the HTTP status as the JSON-RPC code
    (429 for quota); ``-32603`` carries the agent's own failure in ``data.details``.
    """
    text = message if not _details(data) else f"{message}: {_details(data)}"
    native = {"rpc_code": code, "message": message, "data": data}
    if 100 <= code <= 599:
        info = classify_api_error(text, status=code)
    elif code == AUTH_REQUIRED:
        info = ErrorInfo(code=ErrorCode.AUTH, message=text)
    elif code in (INVALID_PARAMS, INVALID_REQUEST):
        info = ErrorInfo(code=ErrorCode.INVALID_REQUEST, message=text)
    elif code == METHOD_NOT_FOUND:
        info = ErrorInfo(code=ErrorCode.UNSUPPORTED, message=text)
    else:
        info = _internal_error_info(text)
    return info.model_copy(update={"native": native})


def _internal_error_info(text: str) -> ErrorInfo:
    # An agent's internal error may wrap a model-API failure; trust the text only
    # for the signals a router acts on, not for words like "internal".
    guessed = classify_api_error(text)
    if guessed.code in _ROUTABLE:
        return guessed
    return ErrorInfo(code=ErrorCode.API_ERROR, message=text)


_ROUTABLE = frozenset(
    {
        ErrorCode.QUOTA_EXHAUSTED,
        ErrorCode.RATE_LIMITED,
        ErrorCode.AUTH,
        ErrorCode.CONTEXT_OVERFLOW,
    }
)


def _details(data: Any) -> str:
    if isinstance(data, dict):
        details = data.get("details")
        if isinstance(details, str):
            return details
        return json.dumps(data, ensure_ascii=False) if data else ""
    if isinstance(data, str):
        return data
    return ""
