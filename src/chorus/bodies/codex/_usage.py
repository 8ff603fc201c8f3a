"""Codex reports token usage cumulatively per thread; Chorus wants per-turn counts.

Both app-server ``thread/tokenUsage/updated`` (``total``) and exec
``turn.completed.usage`` carry thread totals, also across resumes.
:class:`UsageMeter` remembers the last total and hands out increments.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from chorus.events import Usage

_FIELDS = (
    "input_tokens",
    "output_tokens",
    "cached_input_tokens",
    "cache_write_input_tokens",
    "reasoning_tokens",
)


def usage_from_camel(data: Mapping[str, Any]) -> Usage:
    """A :class:`Usage` from an app-server ``TokenUsageBreakdown`` (camelCase)."""
    return Usage(
        input_tokens=int(data.get("inputTokens") or 0),
        output_tokens=int(data.get("outputTokens") or 0),
        cached_input_tokens=int(data.get("cachedInputTokens") or 0),
        cache_write_input_tokens=int(data.get("cacheWriteInputTokens") or 0),
        reasoning_tokens=int(data.get("reasoningOutputTokens") or 0),
    )


def usage_from_snake(data: Mapping[str, Any]) -> Usage:
    """A :class:`Usage` from an exec ``turn.completed.usage`` (snake_case)."""
    return Usage(
        input_tokens=int(data.get("input_tokens") or 0),
        output_tokens=int(data.get("output_tokens") or 0),
        cached_input_tokens=int(data.get("cached_input_tokens") or 0),
        cache_write_input_tokens=int(data.get("cache_write_input_tokens") or 0),
        reasoning_tokens=int(data.get("reasoning_output_tokens") or 0),
    )


def add(a: Usage, b: Usage) -> Usage:
    return Usage(**{f: getattr(a, f) + getattr(b, f) for f in _FIELDS})


def is_zero(u: Usage) -> bool:
    return not any(getattr(u, f) for f in _FIELDS)


class UsageMeter:
    """Cumulative thread totals in, increments out.

    Contract: call :meth:`baseline` with a total that must not be counted (the
    restored totals of a resumed thread), :meth:`observe` with every later total.
    A total below the previous one (Codex resets counters on compaction) is a new
    baseline; its increment is then ``fallback`` (the ``last`` call's usage).
    """

    def __init__(self) -> None:
        self.total: Usage | None = None

    @property
    def known(self) -> bool:
        """True once a total has been seen (increments are then meaningful)."""
        return self.total is not None

    def baseline(self, total: Usage) -> None:
        self.total = total

    def observe(self, total: Usage, fallback: Usage | None = None) -> Usage:
        """The increment since the previous total (all zeros when nothing changed)."""
        previous = self.total or Usage()
        self.total = total
        deltas = {f: getattr(total, f) - getattr(previous, f) for f in _FIELDS}
        if any(v < 0 for v in deltas.values()):
            return fallback if fallback is not None else Usage()
        return Usage(**deltas)
