"""Classification of Claude Code failures into stable error codes."""

from __future__ import annotations

import pytest

from chorus.bodies.claude import code_for_status
from chorus.bodies.claude._errors import result_error, retry_error
from chorus.events import ErrorCode

RATE_TEXT = "This request would exceed the rate limit for your organization of 50 requests"
QUOTA_TEXT = "You have reached your specified API usage limits. You will regain access on 12-01"


@pytest.mark.parametrize(
    ("status", "text", "kind", "code"),
    [
        (429, RATE_TEXT, None, ErrorCode.RATE_LIMITED),
        (429, QUOTA_TEXT, None, ErrorCode.QUOTA_EXHAUSTED),
        (429, "Claude AI usage limit reached|1700000000", "rate_limit", ErrorCode.QUOTA_EXHAUSTED),
        (None, "", "usage_limit_reached", ErrorCode.QUOTA_EXHAUSTED),
        (400, "Your credit balance is too low to access the API", None, ErrorCode.QUOTA_EXHAUSTED),
        (401, "invalid x-api-key", None, ErrorCode.AUTH),
        (403, "forbidden", None, ErrorCode.AUTH),
        (
            400,
            "prompt is too long: 210000 tokens > 200000 maximum",
            None,
            ErrorCode.CONTEXT_OVERFLOW,
        ),
        (400, "fake injected error", None, ErrorCode.API_ERROR),
        (529, "Overloaded", None, ErrorCode.OVERLOADED),
        (500, "Internal server error", None, ErrorCode.SERVER_ERROR),
        (None, "", "server_error", ErrorCode.SERVER_ERROR),
        (None, "connect ECONNREFUSED", None, ErrorCode.NETWORK),
    ],
)
def test_code_for_status(status: int | None, text: str, kind: str | None, code: ErrorCode) -> None:
    assert code_for_status(status, text, kind) is code


def _failed_result(**fields: object) -> dict[str, object]:
    return {"type": "result", "subtype": "success", "is_error": True, **fields}


def test_result_error_reads_the_synthetic_assistant_line() -> None:
    api_line = {"error": "rate_limit", "api_error_status": 429, "is_api_error_message": True}
    result = _failed_result(
        api_error_status=429, result=f"API Error: Request rejected (429) · {QUOTA_TEXT}"
    )
    info = result_error(result, api_line)
    assert (info.code, info.retryable, info.http_status) == (ErrorCode.QUOTA_EXHAUSTED, False, 429)
    assert info.native is not None
    assert info.native["assistant_error"] == "rate_limit"


@pytest.mark.parametrize(
    ("fields", "code"),
    [
        (
            {"terminal_reason": "aborted_streaming", "subtype": "error_during_execution"},
            ErrorCode.INTERRUPTED,
        ),
        ({"terminal_reason": "aborted_tools"}, ErrorCode.INTERRUPTED),
        (
            {"terminal_reason": "prompt_too_long", "api_error_status": 400},
            ErrorCode.CONTEXT_OVERFLOW,
        ),
        ({"errors": ["No conversation found with session ID: x"]}, ErrorCode.SESSION_NOT_FOUND),
        (
            {"errors": ['--resume requires a valid session ID or session title ... "x"']},
            ErrorCode.SESSION_NOT_FOUND,
        ),
        ({"subtype": "error_max_turns", "errors": ["max turns"]}, ErrorCode.UNKNOWN),
        ({"subtype": "error_max_budget_usd", "errors": ["budget"]}, ErrorCode.QUOTA_EXHAUSTED),
    ],
)
def test_result_error_without_api_status(fields: dict[str, object], code: ErrorCode) -> None:
    assert result_error(_failed_result(**fields), None).code is code


def test_interrupted_is_retryable_and_auth_is_not() -> None:
    assert result_error(_failed_result(terminal_reason="aborted_streaming"), None).retryable
    assert not result_error(
        _failed_result(api_error_status=401, result="Invalid API key"), None
    ).retryable


def test_retry_error_from_api_retry_line() -> None:
    info = retry_error({"error_status": 401, "error": "authentication_failed", "attempt": 1})
    assert (info.code, info.http_status, info.retryable) == (ErrorCode.AUTH, 401, False)
    timeout = retry_error({"error_status": None, "error": "unknown", "attempt": 2})
    assert timeout.code is ErrorCode.UNKNOWN
