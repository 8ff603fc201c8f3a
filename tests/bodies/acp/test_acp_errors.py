"""Model-API failure text and JSON-RPC errors mapped to stable error codes."""

from __future__ import annotations

import pytest

from chorus.bodies.acp import AcpRpcError, classify_api_error, rpc_error_info
from chorus.events import ErrorCode

DAILY = "You have exhausted your daily quota on this model."
PER_MINUTE = (
    "You exceeded your current quota, please check your plan and billing details. "
    "Please retry in 1.5s.\nSuggested retry after 1s."
)


@pytest.mark.parametrize(
    ("message", "status", "code", "retryable", "retry_after"),
    [
        (DAILY, 429, ErrorCode.QUOTA_EXHAUSTED, False, None),
        (DAILY, None, ErrorCode.QUOTA_EXHAUSTED, False, None),
        (PER_MINUTE, 429, ErrorCode.RATE_LIMITED, True, 1.5),
        (
            "Resource has been exhausted (e.g. check quota).",
            429,
            ErrorCode.RATE_LIMITED,
            True,
            None,
        ),
        (
            "You exceeded your current quota, please check your plan and billing details.",
            None,
            ErrorCode.QUOTA_EXHAUSTED,
            False,
            None,
        ),
        ("Rate limit reached. Please retry after 250ms", None, ErrorCode.RATE_LIMITED, True, 0.25),
        (
            '{"error":{"code":500,"message":"Internal error (fake)","status":"INTERNAL"}}',
            None,
            ErrorCode.SERVER_ERROR,
            True,
            None,
        ),
        ("The model is overloaded. Please try again later.", 503, ErrorCode.OVERLOADED, True, None),
        ("API key not valid. Please pass a valid API key.", 400, ErrorCode.AUTH, False, None),
        (
            "The input token count (1200000) exceeds the maximum number of tokens allowed",
            400,
            ErrorCode.CONTEXT_OVERFLOW,
            False,
            None,
        ),
        (
            "The model returned an empty response with no text or thoughts.",
            None,
            ErrorCode.API_ERROR,
            True,
            None,
        ),
        (
            "The model response was blocked due to safety settings.",
            None,
            ErrorCode.API_ERROR,
            False,
            None,
        ),
    ],
)
def test_classify_api_error(
    message: str, status: int | None, code: ErrorCode, retryable: bool, retry_after: float | None
) -> None:
    info = classify_api_error(message, status=status)
    assert (info.code, info.retryable, info.retry_after_s) == (code, retryable, retry_after)
    assert info.message == message.strip()


def test_status_is_read_from_embedded_json() -> None:
    assert classify_api_error('{"error":{"code":500}}').http_status == 500
    assert classify_api_error("plain words").http_status is None


@pytest.mark.parametrize(
    ("code", "message", "data", "expected"),
    [
        (429, DAILY, None, ErrorCode.QUOTA_EXHAUSTED),
        (429, PER_MINUTE, None, ErrorCode.RATE_LIMITED),
        (-32000, "Authentication required", None, ErrorCode.AUTH),
        (-32602, "Invalid params", None, ErrorCode.INVALID_REQUEST),
        (-32601, "Method not found", None, ErrorCode.UNSUPPORTED),
        (
            -32603,
            "Internal error",
            {"details": "Invalid or unavailable mode: bogus"},
            ErrorCode.API_ERROR,
        ),
        (-32603, "Internal error", {"details": DAILY}, ErrorCode.QUOTA_EXHAUSTED),
    ],
)
def test_rpc_error_info(code: int, message: str, data: object, expected: ErrorCode) -> None:
    info = rpc_error_info(code, message, data)
    assert info.code is expected
    assert info.native == {"rpc_code": code, "message": message, "data": data}


def test_rpc_error_carries_details() -> None:
    error = AcpRpcError(
        "session/load",
        -32603,
        "Internal error",
        {"details": "No previous sessions found for this project."},
    )
    assert "No previous sessions found" in str(error)
    assert (error.method, error.code) == ("session/load", -32603)
    assert error.info().code is ErrorCode.API_ERROR
