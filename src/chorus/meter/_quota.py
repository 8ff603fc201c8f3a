"""Quota as the providers state it (sans-I/O): rate-limit headers on each answer, and
Gemini's quota errors.

- Anthropic: ``anthropic-ratelimit-<window>-{limit,remaining,reset}`` for the
  requests, tokens, input-tokens and output-tokens windows (reset: RFC 3339).
- OpenAI: ``x-ratelimit-{limit,remaining,reset}-<window>`` for requests and tokens
  (reset: ``1s``, ``6m0s``, ``20ms``).
- Gemini: none on success; a 429 ``RESOURCE_EXHAUSTED`` names the quota it hit
  (``QuotaFailure``: ``quotaId``, ``quotaValue``) and when to retry
  (``RetryInfo.retryDelay``): that quota, nothing left until then.
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from chorus.meter._usage import Api

_ANTHROPIC = re.compile(r"anthropic-ratelimit-([a-z-]+?)-(limit|remaining|reset)")
_OPENAI = re.compile(r"x-ratelimit-(limit|remaining|reset)-([a-z-]+)")
_DURATION = re.compile(r"(\d+(?:\.\d+)?)(ms|h|m|s)")
_UNIT_S = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0}


@dataclass(slots=True)
class Window:
    """One limit the provider stated: how much, how much is left, when it resets."""

    limit: int | None = None
    remaining: int | None = None
    reset_at: float | None = None

    def to_json(self) -> dict[str, Any]:
        return {"limit": self.limit, "remaining": self.remaining, "reset_at": self.reset_at}


def windows_from(
    api: Api, status: int, headers: Mapping[str, str], body: Any, now: float
) -> dict[str, Window]:
    """The windows one answer states (none: it said nothing of its quota)."""
    if api == "gemini":
        return _gemini(status, body, now)
    pattern, swap = (_ANTHROPIC, False) if api == "anthropic" else (_OPENAI, True)
    prefix = "anthropic-ratelimit-" if api == "anthropic" else "x-ratelimit-"
    found: dict[str, Window] = {}
    for name, value in headers.items():
        low = name.lower()
        match = pattern.fullmatch(low) if low.startswith(prefix) else None
        if match is None:
            continue
        window, part = (match.group(2), match.group(1)) if swap else match.groups()
        _set(found.setdefault(window, Window()), part, value, now)
    return found


def _set(window: Window, part: str, value: str, now: float) -> None:
    if part == "reset":
        window.reset_at = _reset_at(value.strip(), now)
    elif value.strip().isdigit():
        setattr(window, part, int(value.strip()))


def _reset_at(value: str, now: float) -> float | None:
    """An RFC 3339 time, a duration (``6m0s``), or seconds."""
    try:
        return float(value) + now
    except ValueError:
        pass
    if (parts := _DURATION.findall(value)) and "".join(a + b for a, b in parts) == value:
        return now + sum(float(n) * _UNIT_S[unit] for n, unit in parts)
    try:
        return dt.datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None


def _gemini(status: int, body: Any, now: float) -> dict[str, Window]:
    details = _details(body) if status == 429 else []
    delay = next((_reset_at(str(d["retryDelay"]), now) for d in details if "retryDelay" in d), None)
    found: dict[str, Window] = {}
    for detail in details:
        for violation in detail.get("violations") or []:
            if isinstance(violation, dict) and violation.get("quotaId"):
                value = str(violation.get("quotaValue") or "")
                limit = int(value) if value.isdigit() else None
                found[str(violation["quotaId"])] = Window(limit, 0, delay)
    return found


def _details(body: Any) -> list[dict[str, Any]]:
    error = body.get("error") if isinstance(body, dict) else None
    details = error.get("details") if isinstance(error, dict) else None
    return [d for d in details if isinstance(d, dict)] if isinstance(details, list) else []


#: Told of each statement: (api, upstream, windows, when).
QuotaListener = Callable[[str, str, Mapping[str, Window], float], None]


@dataclass
class QuotaBook:
    """What each provider last said of its quota (per API, the upstream it came from)."""

    _apis: dict[str, dict[str, Any]] = field(default_factory=dict)
    listeners: list[QuotaListener] = field(default_factory=list)

    def update(self, api: str, upstream: str, windows: Mapping[str, Window], now: float) -> None:
        if not windows:
            return
        for listener in self.listeners:
            listener(api, upstream, windows, now)
        entry = self._apis.get(api)
        if entry is None or entry["upstream"] != upstream:
            entry = self._apis[api] = {"upstream": upstream, "windows": {}}
        entry["at"] = now
        entry["windows"].update({k: w.to_json() for k, w in windows.items()})

    def snapshot(self) -> dict[str, Any]:
        """``{api: {"upstream", "at", "windows": {name: {limit, remaining, reset_at}}}}``."""
        return {
            api: {**entry, "windows": dict(entry["windows"])} for api, entry in self._apis.items()
        }
