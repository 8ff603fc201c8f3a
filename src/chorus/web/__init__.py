"""What every HTTP API of Chorus shares: one table from exceptions to answers."""

from chorus.web._errors import (
    ERRORS,
    SERVER_ERROR,
    ErrorRule,
    Handler,
    bad_request,
    code_of,
    error_response,
    guarded,
    json_error,
    status_of,
)

__all__ = [
    "ERRORS",
    "SERVER_ERROR",
    "ErrorRule",
    "Handler",
    "bad_request",
    "code_of",
    "error_response",
    "guarded",
    "json_error",
    "status_of",
]
