"""Pick a body for a job: user override, strategy, routing matrix, provider health."""

from __future__ import annotations

import itertools
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from chorus._errors import UnknownBodyError
from chorus.router._classify import Classification, classify
from chorus.router._health import HealthBook

#: Default preferences (DESIGN.md): deep reasoning and creative work to
#: claude; structured or token-heavy work to gemini; codex configurable.
DEFAULT_MATRIX: dict[str, list[str]] = {
    "deep_reasoning": ["claude", "codex", "gemini"],
    "creative": ["claude", "gemini", "codex"],
    "structured_execution": ["gemini", "codex", "claude"],
    "token_heavy": ["gemini", "claude", "codex"],
    "iterative": ["codex", "claude", "gemini"],
    "token_light": ["claude", "codex", "gemini"],
}


@dataclass(frozen=True, slots=True)
class Route:
    """The router's pick and why (the ``routed`` event of a job)."""

    body: str
    reason: str
    strategy: str
    classification: Classification | None = None
    skipped: list[str] = field(default_factory=list)


def _span(seconds: float) -> str:
    if seconds < 120:
        return f"{max(seconds, 0):.0f}s"
    if seconds < 7200:
        return f"{seconds / 60:.0f}m"
    if seconds < 172800:
        return f"{seconds / 3600:.1f}h"
    return f"{seconds / 86400:.1f}d"


def _always_ready(body: str) -> str | None:
    return None


class Router:
    """Stateless apart from the round-robin cursor; health is passed in."""

    def __init__(
        self,
        bodies: Sequence[str],
        *,
        strategy: str = "smart",
        matrix: dict[str, list[str]] | None = None,
    ) -> None:
        self.bodies = list(bodies)
        self.strategy = strategy
        self.matrix = {**DEFAULT_MATRIX, **(matrix or {})}
        self._rr = itertools.cycle(self.bodies)
        if strategy.endswith("_only") and strategy.removesuffix("_only") not in self.bodies:
            raise UnknownBodyError(f"routing strategy {strategy!r} names an unknown body")

    def preferences(self, prompt: str, override: str | None = None) -> list[str]:
        """Bodies in the order to try for ``prompt`` (override first, then strategy)."""
        if override is not None:
            if override not in self.bodies:
                raise UnknownBodyError(f"unknown body {override!r}; known: {self.bodies}")
            return [override] + [b for b in self.bodies if b != override]
        if self.strategy.endswith("_only"):
            only = self.strategy.removesuffix("_only")
            return [only]
        if self.strategy == "round_robin":
            first = next(self._rr)
            return [first] + [b for b in self.bodies if b != first]
        return self._smart(classify(prompt))

    def _smart(self, cls: Classification) -> list[str]:
        load_first = cls.load.value == "token_heavy"
        keys = [cls.load.value, cls.kind.value] if load_first else [cls.kind.value]
        order: list[str] = []
        for key in keys:
            order += [b for b in self.matrix.get(key, []) if b in self.bodies and b not in order]
        return order + [b for b in self.bodies if b not in order]

    def explain(
        self,
        prompt: str,
        health: HealthBook,
        now: float,
        *,
        key: Callable[[str], str] = str,
        unready: Callable[[str], str | None] = _always_ready,
    ) -> Route:
        """The body for ``prompt`` with the reason, in words a person can read: the
        strategy, the task's class (smart routing), the bodies passed over and why.
        ``unready`` says why a body cannot run at all (no login): it is never picked."""
        cls = classify(prompt) if self.strategy == "smart" else None
        prefs = self._smart(cls) if cls is not None else self.preferences(prompt)
        skipped = [f"{b}: {why}" for b in prefs if (why := unready(b))]
        prefs = [b for b in prefs if not unready(b)] or prefs
        for body in prefs:
            if health.healthy(key(body), now):
                return Route(body, self._why(cls, prefs, body), self.strategy, cls, skipped)
            left = health.get(key(body)).cooldown_until - now
            skipped.append(f"{body}: cooling down, {_span(left)} left")
        first = prefs[0] if prefs else ""
        why = "no body is healthy: queued on the first preferred, it waits for the reset"
        return Route(first, why, self.strategy, cls, skipped)

    def _why(self, cls: Classification | None, prefs: list[str], body: str) -> str:
        if cls is None:
            return f"strategy {self.strategy}"
        order = " > ".join(prefs)
        rank = "first" if prefs[0] == body else "first healthy"
        return f"{rank} for {cls.kind.value}/{cls.load.value} (order {order})"

    def choose(
        self,
        prompt: str,
        health: HealthBook,
        now: float,
        *,
        override: str | None = None,
        exclude: Sequence[str] = (),
        key: Callable[[str], str] = str,
        unready: Callable[[str], str | None] = _always_ready,
    ) -> str | None:
        """The first healthy preferred body not in ``exclude`` that can run (``unready``
        says why one cannot: no login); ``None`` if none is.

        ``key`` maps a body to its provider key in ``health`` (e.g. the body plus a
        fingerprint of the credential it would run with)."""
        for body in self.preferences(prompt, override):
            if body in exclude or unready(body) is not None:
                continue
            if health.healthy(key(body), now):
                return body
        return None
