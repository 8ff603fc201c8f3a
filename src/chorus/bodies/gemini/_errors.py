"""How a headless Gemini run fails, as canonical errors.

In ``stream-json`` mode an API error ends the process with the HTTP status
``& 0xFF`` as its exit code (``process.exit(status)`` in the bundle): 173 is
429, 244 is 500. Exit 41 is a bad auth set-up. Exit 0 can still be a failure
(``result.status: "error"``), and a run with no ``result`` line at all crashed
or was signalled.
"""

from __future__ import annotations

from chorus._errors import UserError
from chorus.bodies._body import crash_error
from chorus.bodies.acp import classify_api_error
from chorus.events import ErrorCode, ErrorInfo

EXIT_BAD_AUTH = 41
#: Bad input (``FatalInputError``), e.g. ``--resume`` of a session Gemini never stored.
EXIT_BAD_INPUT = 42
#: HTTP statuses the API answers with; the exit code is their low byte.
_STATUSES = (400, 401, 403, 404, 408, 429, 500, 502, 503, 504)
_BY_EXIT = {status & 0xFF: status for status in _STATUSES}


def status_for_exit(exit_code: int | None) -> int | None:
    """The HTTP status an exit code stands for (173 → 429), if it is one."""
    if exit_code is None or exit_code <= 0:
        return None
    return _BY_EXIT.get(exit_code)


def result_error(message: str, exit_code: int | None = None) -> ErrorInfo:
    """The error of a ``result`` line with ``status: "error"`` (or an ``error`` event)."""
    text = _unwrap(message)
    info = classify_api_error(text, status=status_for_exit(exit_code))
    return info.model_copy(update={"native": {"message": message, "exit_code": exit_code}})


def exit_error(exit_code: int | None, stderr_tail: str) -> ErrorInfo:
    """The error of a run that ended without a ``result`` line."""
    status = status_for_exit(exit_code)
    if status is not None:
        info = classify_api_error(_last_attempt(stderr_tail), status=status)
        native = {"exit_code": exit_code, "stderr_tail": stderr_tail[-2000:]}
        return info.model_copy(update={"native": native})
    native = {"exit_code": exit_code, "stderr_tail": stderr_tail[-2000:]}
    if exit_code == EXIT_BAD_AUTH:
        message = "Gemini CLI: invalid auth set-up (exit 41; see settings.json)"
        return ErrorInfo(code=ErrorCode.AUTH, message=message, native=native)
    if exit_code == EXIT_BAD_INPUT:
        lines = stderr_tail.strip().splitlines()
        message = lines[-1] if lines else "Gemini CLI rejected its input (exit 42)"
        code = ErrorCode.SESSION_NOT_FOUND if "resum" in message else ErrorCode.INVALID_REQUEST
        return ErrorInfo(code=code, message=message, native=native)
    return crash_error(exit_code, stderr_tail)


def _unwrap(message: str) -> str:
    # "[API Error: <api message>]\nPlease wait and try again later. ..." -> the API message.
    head = message.strip()
    if head.startswith("[API Error: ") and "]" in head:
        return head[len("[API Error: ") : head.rfind("]")]
    return head


def _last_attempt(stderr_tail: str) -> str:
    lines = [line for line in stderr_tail.splitlines() if "failed" in line or "Error" in line]
    return "\n".join(lines[-3:]) if lines else stderr_tail[-500:]


class RunInProgressError(UserError):
    """A prompt while the previous run is still going, or before :meth:`start`."""
