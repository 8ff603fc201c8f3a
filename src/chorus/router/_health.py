"""Provider health per body and credential: success rate, cooldown, reset, quota.

Pure state with an explicit clock so it can be tested and persisted as JSON.
A failure with ``quota_exhausted`` or ``rate_limited`` puts the provider in a
cooldown that grows exponentially (``base * multiplier**(n-1)``, capped at
``max``). When the provider says when access returns (a reset header, a
``resetsAt``, "regain access on 2026-12-01"), that time is the cooldown instead.
"""

from __future__ import annotations

import hashlib
from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from chorus.events import ErrorCode, ErrorInfo
from chorus.router._reset import reset_time

_COOLING = {ErrorCode.QUOTA_EXHAUSTED, ErrorCode.RATE_LIMITED, ErrorCode.AUTH}

#: Environment variables that name the account a CLI runs as, per CLI family.
CREDENTIAL_VARS = (
    "ANTHROPIC_API_KEY",
    "ANTHROPIC_AUTH_TOKEN",
    "CLAUDE_CODE_OAUTH_TOKEN",
    "OPENAI_API_KEY",
    "CODEX_API_KEY",
    "GEMINI_API_KEY",
    "GOOGLE_API_KEY",
)


def provider_key(body: str, env: Mapping[str, str]) -> str:
    """``body@<8 hex>``: a fingerprint of the credentials in ``env`` (never the secret
    itself), so two accounts of one CLI cool down separately; ``body@default`` when
    none is set (the CLI's own login)."""
    present = [f"{name}={env[name]}" for name in CREDENTIAL_VARS if env.get(name)]
    if not present:
        return f"{body}@default"
    digest = hashlib.sha256("\n".join(present).encode()).hexdigest()[:8]
    return f"{body}@{digest}"


@dataclass(frozen=True, slots=True)
class CooldownPolicy:
    base_s: float = 30.0
    max_s: float = 3600.0
    multiplier: float = 2.0
    window: int = 20


@dataclass(slots=True)
class ProviderHealth:
    """Health of one provider key (``body`` or ``body:credential``)."""

    key: str
    outcomes: deque[bool] = field(default_factory=lambda: deque(maxlen=20))
    consecutive_failures: int = 0
    cooldown_until: float = 0.0
    quota_state: str = "ok"  # ok | rate_limited | exhausted
    last_error: str | None = None
    #: The cooldown ends when the provider said access returns (not a guess).
    reset_from_provider: bool = False
    #: Until then the provider said (rate-limit headers) that little is left: routed
    #: around before it runs out; a success does not end it, a later statement does.
    low_until: float = 0.0

    @property
    def success_rate(self) -> float:
        return sum(self.outcomes) / len(self.outcomes) if self.outcomes else 1.0

    def healthy(self, now: float) -> bool:
        return now >= self.cooldown_until and now >= self.low_until

    def record_success(self) -> None:
        self.outcomes.append(True)
        self.consecutive_failures = 0
        self.quota_state = "ok"
        self.cooldown_until = 0.0
        self.reset_from_provider = False

    def record_failure(self, error: ErrorInfo, now: float, policy: CooldownPolicy) -> None:
        self.outcomes.append(False)
        self.last_error = str(error.code)
        if error.code not in _COOLING:
            return
        self.consecutive_failures += 1
        backoff = policy.base_s * policy.multiplier ** (self.consecutive_failures - 1)
        told = reset_time(error, now)
        until = told if told is not None else now + min(backoff, policy.max_s)
        self.cooldown_until = until if told is not None else max(self.cooldown_until, until)
        self.reset_from_provider = told is not None
        self.quota_state = (
            "exhausted" if error.code == ErrorCode.QUOTA_EXHAUSTED else "rate_limited"
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "key": self.key,
            "outcomes": list(self.outcomes),
            "consecutive_failures": self.consecutive_failures,
            "cooldown_until": self.cooldown_until,
            "quota_state": self.quota_state,
            "last_error": self.last_error,
            "reset_from_provider": self.reset_from_provider,
            "low_until": self.low_until,
        }

    @classmethod
    def from_json(cls, data: dict[str, Any], window: int = 20) -> ProviderHealth:
        return cls(
            key=str(data["key"]),
            outcomes=deque((bool(x) for x in data.get("outcomes", [])), maxlen=window),
            consecutive_failures=int(data.get("consecutive_failures", 0)),
            cooldown_until=float(data.get("cooldown_until", 0.0)),
            quota_state=str(data.get("quota_state", "ok")),
            last_error=data.get("last_error"),
            reset_from_provider=bool(data.get("reset_from_provider", False)),
            low_until=float(data.get("low_until", 0.0)),
        )


class HealthBook:
    """All providers' health, keyed by provider key."""

    def __init__(self, policy: CooldownPolicy | None = None) -> None:
        self.policy = policy or CooldownPolicy()
        self._by_key: dict[str, ProviderHealth] = {}

    def get(self, key: str) -> ProviderHealth:
        if key not in self._by_key:
            self._by_key[key] = ProviderHealth(key, deque(maxlen=self.policy.window))
        return self._by_key[key]

    def success(self, key: str) -> None:
        self.get(key).record_success()

    def failure(self, key: str, error: ErrorInfo, now: float) -> None:
        self.get(key).record_failure(error, now, self.policy)

    def low(self, key: str, until: float) -> None:
        """The provider stated it is nearly out until ``until`` (0: it is not)."""
        self.get(key).low_until = until

    def healthy(self, key: str, now: float) -> bool:
        return self.get(key).healthy(now)

    def earliest_reset(self, keys: list[str]) -> float:
        """The soonest time one of ``keys`` leaves its cooldown."""
        return min(max(self.get(k).cooldown_until, self.get(k).low_until) for k in keys)

    def to_json(self) -> list[dict[str, Any]]:
        return [h.to_json() for h in self._by_key.values()]

    def load(self, rows: list[dict[str, Any]]) -> None:
        for row in rows:
            health = ProviderHealth.from_json(row, self.policy.window)
            self._by_key[health.key] = health
