"""Gateway errors and the stable error codes a brain sees.

Every ``control_request`` is answered by exactly one ``control_response``; an
``error`` response carries one :class:`GatewayCode`. The codes are part of UCP
v1: a brain may switch on them, so they never change meaning. Where a code
already exists in :class:`chorus.events.ErrorCode` it has the same string.

Errors, by who is to blame::

    ChorusError
    ├── GatewayError                 the gateway could not do what was asked
    │   ├── RequestError             one request is answered with an error (carries a code)
    │   ├── GatewayTokenError        the token file is unusable (e.g. readable by others)
    │   ├── BrainLinkError           the outbound link to a brain failed for good
    │   └── ResponseError            (client side) the gateway answered ``error``
    └── UserError (exit 2)
        └── BrainUrlError            a brain URL refused (not wss, not allowlisted, malformed)
"""

from __future__ import annotations

from enum import StrEnum

from chorus._errors import (
    BodyCrashedError,
    BodyError,
    BodyTimeoutError,
    ChorusError,
    EventTooLargeError,
    UnknownBodyError,
    UnsupportedControlError,
    UserError,
)
from chorus.session import SessionError
from chorus.store import UnknownSessionError


class GatewayCode(StrEnum):
    """Stable ``error_code`` values of UCP v1 error responses."""

    #: The frame is larger than ``max_frame_bytes``; it was not parsed.
    FRAME_TOO_LARGE = "frame_too_large"
    #: The frame is not a JSON document (or not UTF-8, or nested too deeply).
    INVALID_JSON = "invalid_json"
    #: Valid JSON of the wrong shape, or a known subtype with bad fields.
    INVALID_REQUEST = "invalid_request"
    #: Unknown subtype, or a control the session's body cannot do.
    UNSUPPORTED = "unsupported"
    #: A session-bound request (or a user message) before ``initialize``.
    NOT_INITIALIZED = "not_initialized"
    #: ``initialize`` named a session the store does not know.
    SESSION_NOT_FOUND = "session_not_found"
    #: The session's body has ended; ``initialize`` with ``resume`` to restart it.
    SESSION_ENDED = "session_ended"
    #: ``initialize`` named a body nobody configured.
    UNKNOWN_BODY = "unknown_body"
    #: The policy hook refused the request.
    POLICY_DENIED = "policy_denied"
    #: The connection sent frames faster than its rate limit.
    RATE_LIMITED = "rate_limited"
    #: The connection has ``max_pending`` requests in flight already.
    TOO_MANY_PENDING = "too_many_pending"
    #: The gateway runs ``max_sessions`` sessions already.
    TOO_MANY_SESSIONS = "too_many_sessions"
    #: The session holds ``max_queued_messages`` user messages already.
    QUEUE_FULL = "queue_full"
    #: The request id is in flight already, or recorded without an answer.
    DUPLICATE_REQUEST = "duplicate_request"
    #: The request was cancelled when the connection that sent it closed.
    CANCELLED = "cancelled"
    #: No answer within the deadline.
    TIMEOUT = "timeout"
    #: The body refused or failed the control.
    BODY_ERROR = "body_error"
    #: The body process died.
    BODY_CRASHED = "body_crashed"
    #: A bug or a store failure inside Chorus.
    INTERNAL = "internal"


class GatewayError(ChorusError):
    """Root of the gateway's own errors."""


class RequestError(GatewayError):
    """Answer the current request with ``error`` and :attr:`code`."""

    def __init__(self, code: GatewayCode, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


class GatewayTokenError(GatewayError):
    """The gateway token file cannot be used."""


class BrainLinkError(GatewayError):
    """The outbound link to a brain failed after its bounded retries."""


class ResponseError(GatewayError):
    """Client side: the gateway answered a request with ``error``."""

    def __init__(self, request_id: str, code: str, message: str) -> None:
        super().__init__(f"{code}: {message}")
        self.request_id = request_id
        self.code = code
        self.message = message


class BrainUrlError(UserError):
    """A brain URL was refused before dialing."""


def code_for(exc: BaseException) -> GatewayCode:
    """The error code for an exception raised while serving a request."""
    if isinstance(exc, RequestError):
        return exc.code
    if isinstance(exc, SessionError):
        return _SESSION_CODES.get(exc.code, GatewayCode.INTERNAL)
    for kind, code in _CODES:
        if isinstance(exc, kind):
            return code
    return GatewayCode.INTERNAL


#: The session layer's codes as UCP v1 codes (``not_running`` is a body refusal).
_SESSION_CODES: dict[str, GatewayCode] = {
    **{code.value: code for code in GatewayCode},
    "not_running": GatewayCode.BODY_ERROR,
}

# Most specific first: BodyCrashedError is a BodyError, UnknownSessionError a UserError.
_CODES: tuple[tuple[type[BaseException], GatewayCode], ...] = (
    (UnsupportedControlError, GatewayCode.UNSUPPORTED),
    (UnknownSessionError, GatewayCode.SESSION_NOT_FOUND),
    (UnknownBodyError, GatewayCode.UNKNOWN_BODY),
    (EventTooLargeError, GatewayCode.FRAME_TOO_LARGE),
    (BodyTimeoutError, GatewayCode.TIMEOUT),
    (BodyCrashedError, GatewayCode.BODY_CRASHED),
    (BodyError, GatewayCode.BODY_ERROR),
    (UserError, GatewayCode.INVALID_REQUEST),
    (TimeoutError, GatewayCode.TIMEOUT),
)
