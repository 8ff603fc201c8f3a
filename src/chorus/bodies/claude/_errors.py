"""Claude Code failures -> stable :class:`ErrorInfo` codes, and the body's own errors.

Structured signals come first (``api_error_status``, ``api_error_type``, the
assistant line's ``error`` kind, ``terminal_reason``); the message text is read
only to split what the status alone cannot (a 429 that is a rate limit versus
one that is an exhausted quota, a 400 that is a context overflow).

Error tree addition (under :class:`chorus.BodyError`)::

    BodyError
    └── ControlRequestError    the CLI answered a control request with ``error``
"""

from __future__ import annotations

import re
from typing import Any

from chorus._errors import BodyError, UnsupportedControlError
from chorus.events import ControlResponseEvent, ErrorCode, ErrorInfo, JsonDict

#: Text of a 429 (or a 400/402) that will not clear by waiting a minute.
_QUOTA_TEXT = re.compile(
    r"usage limit|regain access|credit balance|quota|billing|spend(?:ing)? limit"
    r"|hit your limit|limit reached|insufficient|out of (?:extra )?usage",
    re.IGNORECASE,
)
_CONTEXT_TEXT = re.compile(
    r"prompt is too long|context (?:window|length|limit)|maximum context|too many tokens",
    re.IGNORECASE,
)
_AUTH_TEXT = re.compile(r"x-api-key|api key|authenticat|unauthori[sz]ed|oauth", re.IGNORECASE)

#: ``terminal_reason`` values that mean the host (or the user) stopped the turn.
_INTERRUPTED = frozenset({"aborted_streaming", "aborted_tools", "interrupted"})
#: ``terminal_reason`` values of a context-window failure.
_CONTEXT = frozenset({"prompt_too_long", "blocking_limit", "autocompact_thrashing"})
#: Assistant ``api_error`` kinds that mean the account has no quota left.
_QUOTA_KINDS = frozenset(
    {"usage_limit_reached", "model_requires_usage_credits", "long_context_credits_required"}
)
#: Assistant ``error`` kinds (``SDKAssistantMessageError``) and what they mean.
_ERROR_KINDS: dict[str, ErrorCode] = {
    "authentication_failed": ErrorCode.AUTH,
    "oauth_org_not_allowed": ErrorCode.AUTH,
    "account_on_hold": ErrorCode.AUTH,
    "verification_required": ErrorCode.AUTH,
    "cloud_credential_error": ErrorCode.AUTH,
    "billing_error": ErrorCode.QUOTA_EXHAUSTED,
    "rate_limit": ErrorCode.RATE_LIMITED,
    "overloaded": ErrorCode.OVERLOADED,
    "server_error": ErrorCode.SERVER_ERROR,
    "invalid_request": ErrorCode.API_ERROR,
    "model_not_found": ErrorCode.API_ERROR,
}
_RETRYABLE = frozenset(
    {
        ErrorCode.RATE_LIMITED,
        ErrorCode.OVERLOADED,
        ErrorCode.SERVER_ERROR,
        ErrorCode.NETWORK,
        ErrorCode.INTERRUPTED,
    }
)

#: Startup failures of ``--resume``: an unknown session id, or not an id at all.
NO_CONVERSATION = re.compile(
    r"No conversation found|--resume requires a valid session ID", re.IGNORECASE
)


class ControlRequestError(BodyError):
    """Claude Code answered a control request with ``subtype: error``."""

    def __init__(self, subtype: str, message: str, *, error_code: str | None = None) -> None:
        super().__init__(f"{subtype} failed: {message}")
        self.subtype = subtype
        self.error_code = error_code


def control_payload(body: str, subtype: str, response: ControlResponseEvent) -> JsonDict:
    """The success payload of a control answer, or its typed error:
    :class:`UnsupportedControlError` when the CLI does not know ``subtype``,
    :class:`ControlRequestError` for any other error answer."""
    if response.ok:
        return dict(response.payload)
    error = response.error
    message = error.message if error else "control request failed"
    if error is not None and error.code is ErrorCode.UNSUPPORTED:
        raise UnsupportedControlError(body, subtype, message)
    native = error.native if error and error.native else {}
    raise ControlRequestError(subtype, message, error_code=native.get("error_code"))


def code_for_status(status: int | None, text: str = "", kind: str | None = None) -> ErrorCode:
    """The code for one API failure from its HTTP status, message text and error kind."""
    if kind in _QUOTA_KINDS:
        return ErrorCode.QUOTA_EXHAUSTED
    if status == 429 or kind == "rate_limit":
        return ErrorCode.QUOTA_EXHAUSTED if _QUOTA_TEXT.search(text) else ErrorCode.RATE_LIMITED
    if status in (401, 403):
        return ErrorCode.AUTH
    if status in (400, 413) and _CONTEXT_TEXT.search(text):
        return ErrorCode.CONTEXT_OVERFLOW
    if status == 402 or (status == 400 and _QUOTA_TEXT.search(text)):
        return ErrorCode.QUOTA_EXHAUSTED
    return _code_for_rest(status, kind, text)


def _code_for_rest(status: int | None, kind: str | None, text: str) -> ErrorCode:
    if status == 529:
        return ErrorCode.OVERLOADED
    if status is not None and status >= 500:
        return ErrorCode.SERVER_ERROR
    if kind in _ERROR_KINDS:
        return _ERROR_KINDS[kind]
    if status is not None and 400 <= status < 500:
        return ErrorCode.API_ERROR
    if status is None and _AUTH_TEXT.search(text):
        return ErrorCode.AUTH
    return ErrorCode.NETWORK if status is None and kind is None else ErrorCode.UNKNOWN


def _error_info(code: ErrorCode, message: str, status: int | None, native: JsonDict) -> ErrorInfo:
    return ErrorInfo(
        code=code,
        message=message or code.value,
        retryable=code in _RETRYABLE,
        http_status=status,
        native=native,
    )


def retry_error(msg: JsonDict) -> ErrorInfo:
    """The error behind a ``system/api_retry`` line (the CLI is about to retry)."""
    status = _int(msg.get("error_status"))
    kind = _str(msg.get("error"))
    code = code_for_status(status, "", kind)
    text = f"API {status or 'connection'} error ({kind or 'unknown'}), retrying"
    native: JsonDict = {k: msg[k] for k in ("error", "error_status", "attempt") if k in msg}
    return _error_info(code, text, status, native)


def system_api_error(msg: JsonDict) -> ErrorInfo:
    """The error behind a ``system/api_error`` line (the retry banner's snapshot)."""
    err = msg.get("error") if isinstance(msg.get("error"), dict) else {}
    assert isinstance(err, dict)
    status = _int(err.get("status"))
    text = _str(err.get("message")) or _str(err.get("formatted")) or ""
    code = code_for_status(status, text, None)
    if status == 429 and err.get("rate_limits"):
        # The CLI fills rate_limits only for a quota 429 (its own schema says so).
        code = ErrorCode.QUOTA_EXHAUSTED
    return _error_info(code, text, status, {"error": err})


def result_error(result: JsonDict, api_message: JsonDict | None) -> ErrorInfo:
    """The error of a ``result`` line with ``is_error: true``.

    ``api_message`` is the synthetic ``assistant`` line (``is_api_error_message``)
    the CLI wrote just before, when there was one: it carries the error kind.
    """
    reason = _str(result.get("terminal_reason"))
    text = _result_text(result, api_message)
    status = _int(result.get("api_error_status"))
    native = _native(result, api_message)
    if reason in _INTERRUPTED:
        return _error_info(ErrorCode.INTERRUPTED, "turn interrupted", None, native)
    if NO_CONVERSATION.search(text):
        return _error_info(ErrorCode.SESSION_NOT_FOUND, text, None, native)
    if reason in _CONTEXT or _api_kind(api_message) == "message_over_context_limit":
        return _error_info(ErrorCode.CONTEXT_OVERFLOW, text, status, native)
    kind = _api_kind(api_message) or _str((api_message or {}).get("error"))
    if status is None and kind is None:
        return _error_info(_code_without_api_error(result, text), text, None, native)
    return _error_info(code_for_status(status, text, kind), text, status, native)


def _code_without_api_error(result: JsonDict, text: str) -> ErrorCode:
    if _CONTEXT_TEXT.search(text):
        return ErrorCode.CONTEXT_OVERFLOW
    if result.get("subtype") == "error_max_budget_usd":
        return ErrorCode.QUOTA_EXHAUSTED
    return ErrorCode.UNKNOWN


def _api_kind(api_message: JsonDict | None) -> str | None:
    """The assistant line's ``api_error`` kind (e.g. ``usage_limit_reached``)."""
    return _str((api_message or {}).get("api_error"))


def _result_text(result: JsonDict, api_message: JsonDict | None) -> str:
    if isinstance(result.get("result"), str) and result["result"]:
        return str(result["result"])
    errors = result.get("errors")
    if isinstance(errors, list) and errors:
        return "; ".join(str(e) for e in errors)
    return _assistant_text(api_message) or _str(result.get("subtype")) or "turn failed"


def _assistant_text(message: JsonDict | None) -> str | None:
    inner = (message or {}).get("message")
    content = inner.get("content") if isinstance(inner, dict) else None
    if not isinstance(content, list):
        return None
    texts = [str(b.get("text")) for b in content if isinstance(b, dict) and b.get("text")]
    return " ".join(texts) or None


def _native(result: JsonDict, api_message: JsonDict | None) -> JsonDict:
    keys = ("subtype", "terminal_reason", "api_error_status", "api_error_type", "errors")
    native: JsonDict = {k: result[k] for k in keys if result.get(k) is not None}
    if api_message is not None:
        for key in ("error", "api_error", "api_error_params"):
            if api_message.get(key) is not None:
                native[f"assistant_{key}"] = api_message[key]
    return native


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _str(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None
