"""One table from exceptions to HTTP answers, for every JSON API Chorus serves (the
daemon's, the teams', worktrees' and routines' routes, the gateway's and the
dashboard's): ``{"error": message, "code": code}`` with the status of the first
row whose type the exception is an instance of.

One 404 rule: whatever a request names that does not exist (a record of the store,
a routine, a team: :class:`chorus.NotFoundError`) is 404; a flag decided already is
409; any other :class:`chorus.UserError` is 400 (nothing was written); anything
else is 500. The code is the exception's own stable ``code`` where it has one,
else its class name.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from chorus._errors import ChorusError, NotFoundError, UserError
from chorus.store import FlagDecidedError, StoreError, UnknownRecordError

Handler = Callable[[Request], Awaitable[Response]]


@dataclass(frozen=True, slots=True)
class ErrorRule:
    """Exceptions of ``kind`` answer ``status``."""

    kind: type[BaseException]
    status: int


#: The table, first match wins (so the narrower types come first).
ERRORS: tuple[ErrorRule, ...] = (
    ErrorRule(NotFoundError, 404),
    ErrorRule(UnknownRecordError, 404),
    ErrorRule(FlagDecidedError, 409),
    ErrorRule(UserError, 400),
)
#: Status of an exception no row names.
SERVER_ERROR = 500


def status_of(exc: BaseException) -> int:
    """The HTTP status for ``exc`` (from :data:`ERRORS`)."""
    return next((rule.status for rule in ERRORS if isinstance(exc, rule.kind)), SERVER_ERROR)


def code_of(exc: BaseException) -> str:
    """The stable code of ``exc``: its own ``code`` string, else its class name."""
    code = getattr(exc, "code", None)
    return code if isinstance(code, str) else type(exc).__name__


def json_error(message: str, code: str, status: int) -> JSONResponse:
    """``{"error": message, "code": code}`` with ``status``."""
    return JSONResponse({"error": message, "code": code}, status_code=status)


def bad_request(message: str) -> JSONResponse:
    """400 with the code ``bad_request``: the request's own shape is wrong."""
    return json_error(message, "bad_request", 400)


def error_response(exc: BaseException) -> JSONResponse:
    """The answer for ``exc`` by the table."""
    return json_error(str(exc), code_of(exc), status_of(exc))


def guarded(fn: Handler) -> Handler:
    """``fn`` with Chorus's errors (and the store's) answered by the table."""

    async def handler(request: Request) -> Response:
        try:
            return await fn(request)
        except (ChorusError, StoreError) as exc:
            return error_response(exc)

    return handler
