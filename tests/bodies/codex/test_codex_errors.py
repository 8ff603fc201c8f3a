"""Classification of Codex failures into stable error codes."""

from __future__ import annotations

from typing import Any

import pytest

from chorus.bodies.codex import CodexRequestError, classify_text, classify_turn_error
from chorus.bodies.codex._errors import parse_reconnecting
from chorus.events import ErrorCode


@pytest.mark.parametrize(
    ("info", "code", "status"),
    [
        ("usageLimitExceeded", ErrorCode.QUOTA_EXHAUSTED, None),
        ("sessionBudgetExceeded", ErrorCode.QUOTA_EXHAUSTED, None),
        ("rateLimitExceeded", ErrorCode.RATE_LIMITED, None),
        ("contextWindowExceeded", ErrorCode.CONTEXT_OVERFLOW, None),
        ("internalServerError", ErrorCode.SERVER_ERROR, None),
        ("serverOverloaded", ErrorCode.OVERLOADED, None),
        ("unauthorized", ErrorCode.AUTH, None),
        ({"responseTooManyFailedAttempts": {"httpStatusCode": 429}}, ErrorCode.RATE_LIMITED, 429),
        ({"httpConnectionFailed": {"httpStatusCode": 401}}, ErrorCode.AUTH, 401),
        ({"responseStreamConnectionFailed": {"httpStatusCode": 503}}, ErrorCode.OVERLOADED, 503),
        ({"responseStreamDisconnected": {"httpStatusCode": None}}, ErrorCode.NETWORK, None),
        ({"activeTurnNotSteerable": {"turnKind": "review"}}, ErrorCode.INVALID_REQUEST, None),
    ],
)
def test_codex_error_info(info: Any, code: ErrorCode, status: int | None) -> None:
    error = classify_turn_error({"message": "something", "codexErrorInfo": info})
    assert (error.code, error.http_status) == (code, status)
    assert error.native is not None
    assert error.native["codexErrorInfo"] == info


def test_other_falls_back_to_the_text() -> None:
    stream = classify_turn_error(
        {"message": "stream disconnected before completion: boom", "codexErrorInfo": "other"}
    )
    assert stream.code == ErrorCode.NETWORK
    assert stream.retryable
    unknown = classify_turn_error({"message": "the moon is made of cheese", "codexErrorInfo": None})
    assert unknown.code == ErrorCode.UNKNOWN
    assert not unknown.retryable


def test_a_500_retry_without_status_uses_the_details() -> None:
    retry = classify_turn_error(
        {
            "message": "Reconnecting... 1/5",
            "codexErrorInfo": {"responseStreamDisconnected": {"httpStatusCode": None}},
            "additionalDetails": "We\u2019re currently experiencing high demand.",
        }
    )
    assert retry.code == ErrorCode.SERVER_ERROR


@pytest.mark.parametrize(
    ("text", "code"),
    [
        ("exceeded retry limit, last status: 429 Too Many Requests", ErrorCode.RATE_LIMITED),
        ("Quota exceeded. Check your plan and billing details.", ErrorCode.QUOTA_EXHAUSTED),
        ("You\u2019ve hit your usage limit. Upgrade to Pro", ErrorCode.QUOTA_EXHAUSTED),
        ("Codex ran out of room in the model's context window.", ErrorCode.CONTEXT_OVERFLOW),
        ("unexpected status 401 Unauthorized: Incorrect API key provided", ErrorCode.AUTH),
        ("We\u2019re currently experiencing high demand", ErrorCode.SERVER_ERROR),
        ("Connection failed: error sending request", ErrorCode.NETWORK),
        ("thread/resume failed: no rollout found for thread id x", ErrorCode.SESSION_NOT_FOUND),
        ("something else entirely", ErrorCode.UNKNOWN),
    ],
)
def test_text_rules(text: str, code: ErrorCode) -> None:
    assert classify_text(text).code == code


def test_reconnecting_lines() -> None:
    assert parse_reconnecting("Reconnecting... 2/5 (boom)") == (2, 5, "boom")
    assert parse_reconnecting("Reconnecting... 3/5") == (3, 5, "Reconnecting... 3/5")
    assert parse_reconnecting("Reconnecting... waiting for network (Connection failed: x)") == (
        0,
        None,
        "Connection failed: x",
    )
    assert parse_reconnecting("Quota exceeded.") is None


def test_request_errors_carry_method_code_and_a_stable_code() -> None:
    error = CodexRequestError(
        "thread/resume", {"code": -32600, "message": "no rollout found for thread id x"}
    )
    assert (error.method, error.code) == ("thread/resume", -32600)
    assert error.error_code == ErrorCode.SESSION_NOT_FOUND
    assert "thread/resume failed" in str(error)
