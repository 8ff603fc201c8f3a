"""The session layer's errors. Each carries a stable ``code``: the same strings as
UCP v1's error codes, so the gateway passes them to brains unchanged and the
daemon maps them to HTTP."""

from __future__ import annotations

from typing import Literal

from chorus._errors import ChorusError

Code = Literal[
    "invalid_request",
    "unsupported",
    "session_not_found",
    "session_ended",
    "unknown_body",
    "too_many_sessions",
    "queue_full",
    "not_running",
    "internal",
]


class SessionError(ChorusError):
    """A request on a session cannot be done; :attr:`code` says why."""

    def __init__(self, code: Code, message: str) -> None:
        super().__init__(message)
        self.code: Code = code
        self.message = message


class IllegalTransitionError(SessionError):
    """A lifecycle move the transition table does not allow (a bug, or a race lost)."""

    def __init__(self, session_id: str, old: str, new: str) -> None:
        super().__init__("internal", f"session {session_id}: illegal move {old} -> {new}")
        self.old = old
        self.new = new
