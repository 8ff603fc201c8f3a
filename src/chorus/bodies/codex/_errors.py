"""Classify Codex failures into Chorus's stable :class:`ErrorCode` values.

Structured signals first (app-server ``codexErrorInfo``), text second (``codex
exec`` only ever reports a message). Both paths return an :class:`ErrorInfo`
whose ``native`` keeps what Codex said, so nothing is lost when a mapping is
coarse.

Observed with codex-cli 0.169.0 (AGENT_CLIS.md 2.5), fake response -> app-server
``codexErrorInfo`` -> exec text:

* 429 ``rate_limit_exceeded`` -> ``responseTooManyFailedAttempts{429}`` -> ``429 Too Many Requests``
* 429 ``insufficient_quota`` -> ``usageLimitExceeded`` -> ``Quota exceeded``
* 429 ``usage_limit_reached`` -> ``usageLimitExceeded`` -> ``You've hit your usage limit``
* 500 -> ``internalServerError`` -> ``high demand``
* 401 -> ``httpConnectionFailed{401}`` -> ``401 Unauthorized``
* 400 ``context_length_exceeded`` -> ``contextWindowExceeded`` -> ``context window``
* SSE ``response.failed`` -> ``other`` -> ``stream disconnected before completion``
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from chorus._errors import BodyProtocolError
from chorus.events import ErrorCode, ErrorInfo

_RETRYABLE = frozenset(
    {
        ErrorCode.RATE_LIMITED,
        ErrorCode.SERVER_ERROR,
        ErrorCode.OVERLOADED,
        ErrorCode.NETWORK,
    }
)

#: ``codexErrorInfo`` string variants (schema ``CodexErrorInfo``).
_INFO_CODES: dict[str, ErrorCode] = {
    "usageLimitExceeded": ErrorCode.QUOTA_EXHAUSTED,
    "sessionBudgetExceeded": ErrorCode.QUOTA_EXHAUSTED,
    "rateLimitExceeded": ErrorCode.RATE_LIMITED,
    "contextWindowExceeded": ErrorCode.CONTEXT_OVERFLOW,
    "serverOverloaded": ErrorCode.OVERLOADED,
    "flexUnavailable": ErrorCode.OVERLOADED,
    "policyCapacityUnavailable": ErrorCode.OVERLOADED,
    "internalServerError": ErrorCode.SERVER_ERROR,
    "unauthorized": ErrorCode.AUTH,
    "badRequest": ErrorCode.API_ERROR,
    "modelNotFound": ErrorCode.API_ERROR,
    "cyberPolicy": ErrorCode.API_ERROR,
    "misalignmentPolicyViolation": ErrorCode.API_ERROR,
    "tooManyDenials": ErrorCode.POLICY_DENIED,
    "inferenceHookDenied": ErrorCode.POLICY_DENIED,
    "threadRollbackFailed": ErrorCode.UNKNOWN,
    "sandboxError": ErrorCode.UNKNOWN,
}

#: ``codexErrorInfo`` object variants that carry an ``httpStatusCode``.
_HTTP_VARIANTS = (
    "httpConnectionFailed",
    "responseStreamConnectionFailed",
    "responseStreamDisconnected",
    "responseTooManyFailedAttempts",
)

#: Text rules for exec messages, checked in order (quota before the generic 429).
_TEXT_RULES: tuple[tuple[re.Pattern[str], ErrorCode], ...] = tuple(
    (re.compile(pattern, re.IGNORECASE), code)
    for pattern, code in (
        (r"quota exceeded|insufficient_quota|usage limit|credits? (?:depleted|exhausted)",
         ErrorCode.QUOTA_EXHAUSTED),
        (r"\b429\b|too many requests|rate limit", ErrorCode.RATE_LIMITED),
        (r"context window|context_length_exceeded|maximum context length",
         ErrorCode.CONTEXT_OVERFLOW),
        (r"\b401\b|\b403\b|unauthorized|forbidden|api key|missing environment variable",
         ErrorCode.AUTH),
        (r"no rollout found|thread not found|session not found", ErrorCode.SESSION_NOT_FOUND),
        (r"\b503\b|overloaded|service unavailable", ErrorCode.OVERLOADED),
        (r"\b5\d\d\b|high demand|internal server error|server_error", ErrorCode.SERVER_ERROR),
        (r"connection failed|error sending request|stream disconnected|waiting for network"
         r"|timed out|connection (?:refused|reset)", ErrorCode.NETWORK),
    )
)  # fmt: skip

_STATUS = re.compile(r"\b(?:status:?\s*)?([1-5]\d\d)\s+[A-Z][A-Za-z ]+")
_RECONNECTING = re.compile(r"^Reconnecting\.\.\.\s*(?:(\d+)/(\d+))?\s*(?:\((.*)\))?\s*$", re.DOTALL)


class CodexRequestError(BodyProtocolError):
    """``codex app-server`` answered one of our requests with a JSON-RPC error.

    ``method`` is the request (``thread/resume``, ``turn/steer``, ...), ``code``
    and ``rpc_message`` the error object (``-32600`` and ``no rollout found for
    thread id ...`` for an unknown thread).
    """

    def __init__(self, method: str, error: Mapping[str, Any]) -> None:
        self.method = method
        self.code = error.get("code") if isinstance(error.get("code"), int) else None
        self.rpc_message = str(error.get("message") or error)
        super().__init__(f"codex {method} failed: {self.rpc_message}")

    @property
    def error_code(self) -> ErrorCode:
        """The stable code of this failure (e.g. ``session_not_found``)."""
        return code_for_text(self.rpc_message) or ErrorCode.INVALID_REQUEST


def code_for_status(status: int | None) -> ErrorCode:
    """The code for a bare HTTP status (``None``: no response at all, a network failure)."""
    if status is None:
        return ErrorCode.NETWORK
    if status == 429:
        return ErrorCode.RATE_LIMITED
    if status in (401, 403):
        return ErrorCode.AUTH
    if status in (502, 503, 504, 529):
        return ErrorCode.OVERLOADED
    if status >= 500:
        return ErrorCode.SERVER_ERROR
    return ErrorCode.API_ERROR


def code_for_text(message: str) -> ErrorCode | None:
    """The first text rule that matches ``message``, else ``None``."""
    for pattern, code in _TEXT_RULES:
        if pattern.search(message):
            return code
    return None


def status_in_text(message: str) -> int | None:
    """An HTTP status quoted in a Codex message (``last status: 429 Too Many Requests``)."""
    found = _STATUS.search(message)
    return int(found.group(1)) if found else None


def _info_code(info: Any) -> tuple[ErrorCode | None, int | None]:
    """Code and HTTP status from one ``codexErrorInfo`` value (string or one-key object)."""
    if isinstance(info, str):
        return _INFO_CODES.get(info), None
    if isinstance(info, Mapping):
        for variant in _HTTP_VARIANTS:
            body = info.get(variant)
            if isinstance(body, Mapping):
                status = body.get("httpStatusCode")
                status = status if isinstance(status, int) else None
                return code_for_status(status), status
        if "activeTurnNotSteerable" in info:
            return ErrorCode.INVALID_REQUEST, None
    return None, None


def make_error(
    code: ErrorCode, message: str, *, http_status: int | None = None, native: Any = None
) -> ErrorInfo:
    """An :class:`ErrorInfo` with ``retryable`` derived from ``code``."""
    return ErrorInfo(
        code=code,
        message=message,
        retryable=code in _RETRYABLE,
        http_status=http_status,
        native=native if isinstance(native, dict) else None,
    )


def classify_turn_error(error: Mapping[str, Any]) -> ErrorInfo:
    """Classify an app-server ``TurnError`` (``{message, codexErrorInfo, additionalDetails}``).

    ``codexErrorInfo`` decides when it maps to something specific; ``other`` or
    an unknown variant falls back to the text of the message and details.
    """
    message = str(error.get("message") or "")
    details = str(error.get("additionalDetails") or "")
    code, status = _info_code(error.get("codexErrorInfo"))
    text = f"{message} {details}".strip()
    if code is None or code in (ErrorCode.UNKNOWN, ErrorCode.API_ERROR, ErrorCode.NETWORK):
        code = code_for_text(text) or code or ErrorCode.UNKNOWN
    if status is None:
        status = status_in_text(text)
    return make_error(code, message or details, http_status=status, native=dict(error))


def classify_text(message: str) -> ErrorInfo:
    """Classify an exec ``turn.failed`` / ``error`` message (text is all exec gives)."""
    code = code_for_text(message) or ErrorCode.UNKNOWN
    native = {"message": message}
    return make_error(code, message, http_status=status_in_text(message), native=native)


def parse_reconnecting(message: str) -> tuple[int, int | None, str] | None:
    """``(attempt, max, cause)`` for a ``Reconnecting... n/m (cause)`` line, else ``None``.

    ``Reconnecting... waiting for network (...)`` (unbounded retries) yields
    attempt 0 and no maximum. These lines are retry notices, never final.
    """
    if not message.startswith("Reconnecting..."):
        return None
    found = _RECONNECTING.match(message)
    if found is None:
        cause = message.partition("(")[2].rstrip(")") or message
        return 0, None, cause
    attempt, limit, cause = found.groups()
    return (
        int(attempt) if attempt else 0,
        int(limit) if limit else None,
        cause or message,
    )
