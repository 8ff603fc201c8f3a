"""Checks on a job request before anything is written: its shape and its size.

The body of ``POST /jobs`` is read with a cap (a 12 MB prompt is refused without
being parsed or stored), must be a JSON object whose fields are strings (or null),
and its prompt must fit ``[daemon] max_prompt_bytes``. Every refusal is a
:class:`chorus.UserError` (HTTP 400, CLI exit 2) with a stable code.
"""

from __future__ import annotations

from typing import Any

from starlette.requests import Request

from chorus._errors import UserError
from chorus._json_input import BadJsonError, parse_json, read_capped
from chorus.client import prompt_problem

#: Room for the request's other fields and JSON escaping around the prompt.
_ENVELOPE_BYTES = 64 << 10
#: Escaping can make a prompt's JSON up to 6x its UTF-8 size (\uXXXX).
_JSON_ESCAPE_FACTOR = 6
_STRING_FIELDS = (
    "prompt",
    "body",
    "model",
    "cwd",
    "session_id",
    "permission_mode",
    "framework",
    "reviewer",
)

_BOOL_FIELDS = ("worktree", "failover")


class BadJobRequestError(UserError):
    """A job request refused before anything was written; ``code`` is stable."""

    def __init__(self, message: str, code: str) -> None:
        super().__init__(message)
        self.code = code


async def read_job_request(request: Request, max_prompt_bytes: int) -> dict[str, Any]:
    """The request's fields (None values dropped), or :class:`BadJobRequestError`."""
    cap = max_prompt_bytes * _JSON_ESCAPE_FACTOR + _ENVELOPE_BYTES
    try:
        raw = await read_capped(request, cap)
        payload = parse_json(raw, max_bytes=cap, what="the job request")
    except BadJsonError as exc:
        if exc.code == "body_too_large":
            raise _too_large(cap) from exc
        raise BadJobRequestError(f"bad job request: {exc}", "bad_request") from exc
    if not isinstance(payload, dict):
        raise BadJobRequestError("bad job request: expected a JSON object", "bad_request")
    for name in _STRING_FIELDS:
        value = payload.get(name)
        if value is not None and not isinstance(value, str):
            raise BadJobRequestError(f"bad job request: {name!r} must be a string", "bad_request")
    for name in _BOOL_FIELDS:
        value = payload.get(name)
        if value is not None and not isinstance(value, bool):
            raise BadJobRequestError(
                f"bad job request: {name!r} must be true or false", "bad_request"
            )
    problem = prompt_problem(payload.get("prompt") or "", max_prompt_bytes)
    if problem is not None:
        raise BadJobRequestError(problem, "prompt_too_large")
    return {key: value for key, value in payload.items() if value is not None}


def _too_large(size: int) -> BadJobRequestError:
    return BadJobRequestError(
        f"the job request is over {size:,} bytes: its prompt is over the limit "
        "([daemon] max_prompt_bytes in config.toml)",
        "prompt_too_large",
    )
