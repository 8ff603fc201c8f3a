"""When a provider says its limit resets: read from a failure's structured fields
and, failing those, its message text.

Sans-I/O and clock-explicit. What the providers say, as seen:

* Anthropic API: "You will regain access on 2026-12-01 at 00:00 UTC."
* Claude subscriptions: "Claude AI usage limit reached|1733270400" (epoch seconds).
* Codex: ``resetsAt`` (epoch seconds) in the account's rate-limit windows, and
  "... or try again at 11:04 AM." (the local time of day).
* OpenAI: ``resets_at`` / ``resets_in_seconds`` in a ``usage_limit_reached`` body,
  "Please try again in 1s", a ``retry-after`` header.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta, tzinfo
from typing import Any

from chorus.events import ErrorInfo

#: An epoch in seconds is after 2001 and before 2286; milliseconds are bigger.
_EPOCH_RANGE = (1e9, 1e10)
_ABSOLUTE_KEYS = ("resetsAt", "resets_at", "reset_at", "resetAt")
_RELATIVE_KEYS = ("resets_in_seconds", "retry_after", "retry-after", "retryAfterSeconds")

_REGAIN = re.compile(
    r"(?:regain access|resets?|available again|try again)\s+(?:on|at)\s+"
    r"(\d{4}-\d{2}-\d{2})(?:[T ](?:at\s+)?|\s+at\s+)?(\d{1,2}:\d{2})?\s*(UTC|Z)?",
    re.IGNORECASE,
)
_CLOCK = re.compile(
    r"(?:try again|resets?|available again)\s+at\s+(\d{1,2})(?::(\d{2}))?\s*([AP]M)?\b",
    re.IGNORECASE,
)
_IN = re.compile(
    r"(?:try again|retry|resets?)\s+in\s+((?:\d+(?:\.\d+)?\s*[a-z]+\s*)+)", re.IGNORECASE
)
_PART = re.compile(r"(\d+(?:\.\d+)?)\s*(ms|s|sec|second|m|min|minute|h|hr|hour|d|day)s?\b", re.I)
_UNIT_S = {"ms": 0.001, "s": 1, "sec": 1, "second": 1, "m": 60, "min": 60, "minute": 60}
_UNIT_S.update({"h": 3600, "hr": 3600, "hour": 3600, "d": 86400, "day": 86400})
_PIPE_EPOCH = re.compile(r"\|(\d{10})\b")


def reset_time(error: ErrorInfo, now: float, local: tzinfo | None = None) -> float | None:
    """The epoch time at which the provider said access returns; None when it did not.

    ``local`` is the zone a bare time of day is in (default: this machine's)."""
    if error.retry_after_s is not None:
        return now + error.retry_after_s
    found = _from_native(error.native, now)
    if found is None:
        found = _from_text(error.message, now, local)
    return found if found is not None and found > now else None


def _from_native(native: Any, now: float) -> float | None:
    """The latest reset of the windows that are full (Codex's ``usedPercent`` 100),
    else the latest named at all (a quota resets when its slowest window does)."""
    full = list(_native_times(list(_full_windows(native)), now))
    times = full or list(_native_times(native, now))
    return max(times) if times else None


def _full_windows(value: Any) -> Iterator[dict[str, Any]]:
    if isinstance(value, dict):
        used = _number(value.get("usedPercent"))
        if used is not None and used >= 100:
            yield value
        for inner in value.values():
            yield from _full_windows(inner)
    elif isinstance(value, list):
        for inner in value:
            yield from _full_windows(inner)


def _native_times(value: Any, now: float) -> Iterator[float]:
    if isinstance(value, dict):
        for key, inner in value.items():
            number = _number(inner)
            if key in _ABSOLUTE_KEYS and number is not None:
                yield number / 1000 if number > _EPOCH_RANGE[1] else number
            elif key in _RELATIVE_KEYS and number is not None:
                yield now + number
            elif key == "message" and isinstance(inner, str):
                found = _from_text(inner, now, None)
                if found is not None:
                    yield found
            else:
                yield from _native_times(inner, now)
    elif isinstance(value, list):
        for inner in value:
            yield from _native_times(inner, now)


def _number(value: Any) -> float | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int | float):
        return float(value)
    if isinstance(value, str):
        try:
            return float(value.strip().removesuffix("s"))
        except ValueError:
            return None
    return None


def _from_text(text: str, now: float, local: tzinfo | None) -> float | None:
    for parse in (_dated, _piped, _relative, _clock):
        found = parse(text, now, local)
        if found is not None:
            return found
    return None


def _dated(text: str, now: float, local: tzinfo | None) -> float | None:
    found = _REGAIN.search(text)
    if found is None:
        return None
    day, clock, utc = found.groups()
    zone = UTC if utc or clock is None else (local or _here())
    hour, minute = (int(x) for x in clock.split(":")) if clock else (0, 0)
    moment = datetime.fromisoformat(day).replace(hour=hour, minute=minute, tzinfo=zone)
    return moment.timestamp()


def _piped(text: str, now: float, local: tzinfo | None) -> float | None:
    found = _PIPE_EPOCH.search(text)
    return float(found.group(1)) if found else None


def _relative(text: str, now: float, local: tzinfo | None) -> float | None:
    found = _IN.search(text)
    if found is None:
        return None
    parts = _PART.findall(found.group(1))
    seconds = sum(float(n) * _UNIT_S[unit.lower()] for n, unit in parts)
    return now + seconds if parts else None


def _clock(text: str, now: float, local: tzinfo | None) -> float | None:
    """A bare time of day: the next such moment (today, else tomorrow) in ``local``."""
    found = _CLOCK.search(text)
    if found is None:
        return None
    hour, minute, half = int(found.group(1)), int(found.group(2) or 0), found.group(3)
    if half:
        hour = hour % 12 + (12 if half.upper() == "PM" else 0)
    if hour > 23 or minute > 59:
        return None
    today = datetime.fromtimestamp(now, local or _here())
    moment = today.replace(hour=hour, minute=minute, second=0, microsecond=0)
    if moment.timestamp() <= now:
        moment += timedelta(days=1)
    return moment.timestamp()


def _here() -> tzinfo:
    zone = datetime.now().astimezone().tzinfo
    return zone if zone is not None else UTC
