"""The provider's own reset time, read from its failure, is the cooldown."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import pytest

from chorus.events import ErrorCode, ErrorInfo
from chorus.router import HealthBook
from chorus.router._reset import reset_time
from chorus.testing._anthropic import regain_date

NOW = datetime(2026, 11, 23, 10, 0, tzinfo=UTC).timestamp()
PARIS = timezone(timedelta(hours=1))


def quota(message: str, native: dict[str, Any] | None = None) -> ErrorInfo:
    return ErrorInfo(code=ErrorCode.QUOTA_EXHAUSTED, message=message, native=native)


def at(
    year: int, month: int, day: int, hour: int = 0, minute: int = 0, tz: timezone = UTC
) -> float:
    return datetime(year, month, day, hour, minute, tzinfo=tz).timestamp()


@pytest.mark.parametrize(
    ("message", "expected"),
    [
        # Anthropic's API (as the fake server says it, and as the real one does)
        ("You will regain access on 2026-12-01 at 00:00 UTC.", at(2026, 12, 1)),
        ("You will regain access on 2026-12-01.", at(2026, 12, 1)),
        # a Claude subscription: the epoch after a pipe
        (f"Claude AI usage limit reached|{int(NOW) + 7200}", NOW + 7200),
        # OpenAI / Codex
        ("Rate limit reached for requests. Please try again in 1s.", NOW + 1),
        ("Please try again in 2h 30m.", NOW + 9000),
        ("or try again at 11:04 AM.", at(2026, 11, 23, 11, 4, tz=PARIS)),
        ("or try again at 9:15 AM.", at(2026, 11, 24, 9, 15, tz=PARIS)),  # passed: tomorrow
        ("Quota exceeded. Check your plan and billing details.", None),
    ],
)
def test_reset_read_from_the_message(message: str, expected: float | None) -> None:
    assert reset_time(quota(message), NOW, PARIS) == expected


def test_structured_fields_win_and_a_full_window_decides() -> None:
    limits = {
        "primary": {"usedPercent": 100, "resetsAt": int(NOW) + 600},
        "secondary": {"usedPercent": 40, "resetsAt": int(NOW) + 86400},
    }
    native = {"message": "Quota exceeded.", "rate_limits": limits}
    assert reset_time(quota("try again in 5s", native), NOW) == NOW + 600
    body = {"error": {"type": "usage_limit_reached", "resets_at": int(NOW) + 3600}}
    assert reset_time(quota("The usage limit has been reached", body), NOW) == NOW + 3600
    header = ErrorInfo(code=ErrorCode.RATE_LIMITED, message="slow", retry_after_s=12)
    assert reset_time(header, NOW) == NOW + 12


def test_a_reset_in_the_past_is_no_reset() -> None:
    assert reset_time(quota("You will regain access on 2020-01-01."), NOW) is None


def test_the_cooldown_is_the_providers_reset_not_the_backoff() -> None:
    book = HealthBook()
    book.failure("claude@x", quota("You will regain access on 2026-12-01 at 00:00 UTC."), NOW)
    health = book.get("claude@x")
    assert health.cooldown_until == at(2026, 12, 1)  # not 30 s, not capped at an hour
    assert health.reset_from_provider
    assert not book.healthy("claude@x", NOW + 3 * 86400)
    book.failure("codex@x", quota("Quota exceeded."), NOW)
    assert book.get("codex@x").cooldown_until == NOW + 30  # no word: the backoff
    assert not book.get("codex@x").reset_from_provider


def test_the_fake_servers_regain_date_is_next_month() -> None:
    assert regain_date(datetime(2026, 11, 23).date()) == "2026-12-01"
    assert regain_date(datetime(2026, 12, 31).date()) == "2027-01-01"
