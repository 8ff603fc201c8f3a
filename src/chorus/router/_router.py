"""Pick a body for a job: user override, strategy, routing matrix, provider health."""

from __future__ import annotations

import itertools
from collections.abc import Callable, Sequence

from chorus._errors import UnknownBodyError
from chorus.router._classify import Classification, classify
from chorus.router._health import HealthBook

#: Default preferences (DESIGN.md / issue 10): deep reasoning and creative work to
#: claude; structured or token-heavy work to gemini; codex configurable.
DEFAULT_MATRIX: dict[str, list[str]] = {
    "deep_reasoning": ["claude", "codex", "gemini"],
    "creative": ["claude", "gemini", "codex"],
    "structured_execution": ["gemini", "codex", "claude"],
    "token_heavy": ["gemini", "claude", "codex"],
    "iterative": ["codex", "claude", "gemini"],
    "token_light": ["claude", "codex", "gemini"],
}


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

    def choose(
        self,
        prompt: str,
        health: HealthBook,
        now: float,
        *,
        override: str | None = None,
        exclude: Sequence[str] = (),
        key: Callable[[str], str] = str,
    ) -> str | None:
        """The first healthy preferred body not in ``exclude``; ``None`` if none is.

        ``key`` maps a body to its provider key in ``health`` (e.g. the body plus a
        fingerprint of the credential it would run with)."""
        for body in self.preferences(prompt, override):
            if body not in exclude and health.healthy(key(body), now):
                return body
        return None
