"""Quota as stated: each provider's rate-limit headers and Gemini's quota errors."""

from __future__ import annotations

import pytest

from chorus.meter import QuotaBook, Window, windows_from
from chorus.testing._gemini import error_reply

NOW = 1_000_000.0


def test_anthropic_headers() -> None:
    headers = {
        "anthropic-ratelimit-requests-limit": "50",
        "anthropic-ratelimit-requests-remaining": "49",
        "anthropic-ratelimit-requests-reset": "1970-01-12T13:47:00Z",
        "anthropic-ratelimit-input-tokens-remaining": "39000",
        "request-id": "req_1",
    }
    found = windows_from("anthropic", 200, headers, None, NOW)
    assert found["requests"] == Window(50, 49, 1_000_020.0)
    assert found["input-tokens"] == Window(None, 39000, None)
    assert set(found) == {"requests", "input-tokens"}


@pytest.mark.parametrize(
    ("reset", "seconds"), [("1s", 1.0), ("6m0s", 360.0), ("20ms", 0.02), ("1h2m3.5s", 3723.5)]
)
def test_openai_headers_and_their_durations(reset: str, seconds: float) -> None:
    headers = {
        "x-ratelimit-limit-tokens": "10000",
        "x-ratelimit-remaining-tokens": "9000",
        "x-ratelimit-reset-tokens": reset,
    }
    found = windows_from("openai", 200, headers, None, NOW)
    assert found == {"tokens": Window(10000, 9000, pytest.approx(NOW + seconds))}


def test_gemini_quota_errors() -> None:
    reply = error_reply("rate_limit")
    found = windows_from("gemini", reply.status, {}, reply.body, NOW)
    assert found == {"GenerateRequestsPerMinutePerProjectPerModel-FreeTier": Window(10, 0, NOW + 1)}
    assert windows_from("gemini", 200, {}, reply.body, NOW) == {}
    assert windows_from("gemini", 429, {}, {"error": "flat"}, NOW) == {}


def test_the_book_keeps_each_apis_last_word() -> None:
    book = QuotaBook()
    book.update("openai", "https://a", {"requests": Window(10, 9, None)}, NOW)
    book.update("openai", "https://a", {"tokens": Window(5, 4, None)}, NOW + 1)
    book.update("openai", "https://a", {}, NOW + 2)  # an answer that said nothing
    snap = book.snapshot()["openai"]
    assert snap["at"] == NOW + 1
    assert set(snap["windows"]) == {"requests", "tokens"}
    book.update("openai", "https://b", {"tokens": Window(1, 0, None)}, NOW + 3)
    assert set(book.snapshot()["openai"]["windows"]) == {"tokens"}  # another upstream
